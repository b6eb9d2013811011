"""The policy page: the rule for each side-effect class, and the proxy's timings."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.settings import SettingsState
from app.words import class_explanation, class_words
from core.policy.policy import DEFAULT_RULES, Rule
from core.proxy import config as configuration
from core.proxy import manage
from core.tools import SideEffect

TIMINGS = {
    "hold_seconds": (
        "Hold a call needing approval", configuration.DEFAULT_HOLD,
        "how long the host's call waits for your decision before it is told the request is"
        " pending",
    ),
    "duplicate_window_seconds": (
        "Duplicate window", configuration.DEFAULT_DUPLICATE_WINDOW,
        "an identical mutating call within this waits for you instead of running again",
    ),
    "call_timeout_seconds": (
        "Call timeout", configuration.DEFAULT_CALL_TIMEOUT,
        "a server taking longer is told the call is cancelled (a server's or tool's own"
        " timeout, set for it in its configuration, comes first)",
    ),
    "cancel_grace_seconds": (
        "Answer awaited after a cancel", configuration.DEFAULT_CANCEL_GRACE,
        "an answer the server still sends in this time is recorded; without one the outcome"
        " is unknown, and waits for you",
    ),
    "grant_ttl_seconds": (
        "Approval lapses after", configuration.DEFAULT_GRANT_TTL,
        "an approval not executed within this after you granted it lapses",
    ),
}  # fmt: skip
RULE_WORDS = {
    Rule.ALLOW: "Allow",
    Rule.APPROVE: "Ask me first",
    Rule.DENY: "Deny",
}
NOTIFICATIONS = {
    "each": "a notification for each request (stays until you decide)",
    "tray": "the tray icon and its menu only",
}


class PolicyPage(QWidget):
    def __init__(self, state: SettingsState) -> None:
        super().__init__()
        self.state = state
        layout = QVBoxLayout(self)
        rules = QGroupBox("What each class of tool may do")
        rules_form = QFormLayout(rules)
        self.rules: dict[SideEffect, QComboBox] = {}
        self.explanations: dict[SideEffect, QLabel] = {}
        for side_effect in SideEffect:
            box = QComboBox()
            for rule in Rule:
                default = " (default)" if DEFAULT_RULES[side_effect] is rule else ""
                box.addItem(f"{RULE_WORDS[rule]}{default}", rule.value)
            self.rules[side_effect] = box
            name = QLabel(class_words(side_effect))
            name.setToolTip(side_effect.value)  # as the configuration and the terminal say it
            explanation = QLabel(class_explanation(side_effect))
            explanation.setWordWrap(True)
            self.explanations[side_effect] = explanation
            row = QHBoxLayout()
            row.addWidget(box)
            row.addWidget(explanation, 1)
            rules_form.addRow(name, row)
        widest = max(box.sizeHint().width() for box in self.rules.values())
        for box in self.rules.values():
            box.setMinimumWidth(widest)  # the rules in one column, their explanations in another
        layout.addWidget(rules)
        timing = QGroupBox("Timing")
        timing_form = QFormLayout(timing)
        timing_form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.timings: dict[str, QDoubleSpinBox] = {}
        for name, (label, default, why) in TIMINGS.items():
            spin = QDoubleSpinBox()
            spin.setRange(0, 86_400)
            spin.setDecimals(0 if default >= 1 else 1)
            spin.setSuffix(" s")
            spin.setToolTip(f"{why} (default {default:g} s)")
            if name == "grant_ttl_seconds":  # 0 s is refused; the box's 0 stands for "never"
                spin.setSpecialValueText(configuration.NEVER)
            self.timings[name] = spin
            timing_form.addRow(f"{label} (default {default:g} s)", spin)
        self.notifications = QComboBox()
        for value, text in NOTIFICATIONS.items():
            default = " (default)" if value == configuration.NOTIFICATIONS[0] else ""
            self.notifications.addItem(f"{text}{default}", value)
        timing_form.addRow("Notify me with", self.notifications)
        layout.addWidget(timing)
        row = QHBoxLayout()
        self.recheck_button = QPushButton("Re-check the history against these rules…")
        self.recheck_button.setToolTip("Which recorded decisions would these rules have changed?")
        self.recheck_button.clicked.connect(state.recheck.emit)
        row.addWidget(self.recheck_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.message = QLabel()
        self.message.setWordWrap(True)
        layout.addWidget(self.message)
        layout.addStretch(1)
        self._shown: configuration.Config | None = None  # the configuration last shown
        self._refreshing = self._saving = False
        state.changed.connect(self.refresh)
        self.refresh()
        # Saved as it is made, like a tool's class (issue 21): a rule or a notification choice
        # when chosen, a time when its box is left.
        for box in (*self.rules.values(), self.notifications):
            box.currentIndexChanged.connect(self._chosen)
        for spin in self.timings.values():
            spin.editingFinished.connect(self._chosen)

    def refresh(self) -> None:
        """Show the configuration; a change saved elsewhere (another page, the terminal) never
        overwrites choices made here and not saved yet."""
        if self._shown is not None and not self._saving and self.unsaved():
            return
        self._refreshing = True
        try:
            self._show(self.state.config)
        finally:
            self._refreshing = False

    def _show(self, config: configuration.Config) -> None:
        self._shown = config
        policy = config.policy()
        for side_effect, box in self.rules.items():
            box.setCurrentIndex(box.findData(policy.classes[side_effect].value))
        for name, spin in self.timings.items():
            value = getattr(config, name)
            spin.setValue(0 if value is None else value)  # None: "never" (grant_ttl_seconds)
        self.notifications.setCurrentIndex(self.notifications.findData(config.notifications))

    def unsaved(self) -> bool:
        """Whether the page shows choices not saved (against what it last showed)."""
        assert self._shown is not None
        rules, settings = self._changes(self._shown)
        return bool(rules or settings)

    def _chosen(self) -> None:
        if not self._refreshing and self.unsaved():
            self.save()

    def save(self) -> str:
        """Write what the page shows, in one save; "" when saved, else what refused it."""
        config = self.state.config
        before = config.policy().identity()
        rules, settings = self._changes(self._shown or config)  # what was changed here only
        if not rules and not settings:
            return self._said("Nothing changed.") and ""
        self._saving = True  # the reload its save makes shows what was saved
        try:
            error = self.state.apply(lambda p: manage.set_policy(p, rules, settings))
        finally:
            self._saving = False
        if error:
            return self._said(f"Not saved: {error}")
        changed = self.state.config.policy().identity() != before
        self._said(
            "Saved. The rules changed and the change is recorded in the history; re-check it"
            " to see which past decisions these rules would have changed."
            if changed else "Saved."
        )  # fmt: skip
        return ""

    def _changes(
        self, config: configuration.Config
    ) -> tuple[dict[SideEffect, Rule | None], dict[str, object]]:
        """What the page shows that differs from ``config``: rules by class, and settings."""
        rules: dict[SideEffect, Rule | None] = {}
        for side_effect, box in self.rules.items():
            rule = Rule(box.currentData())
            keep = None if rule is DEFAULT_RULES[side_effect] else rule
            if config.classes.get(side_effect) != keep:
                rules[side_effect] = keep
        settings: dict[str, object] = {}
        for name, spin in self.timings.items():
            value: object = spin.value()
            if name == "grant_ttl_seconds" and value == 0:
                value = configuration.NEVER if config.grant_ttl_seconds is not None else None
                if value is None:
                    continue
            elif isinstance(value, float) and value.is_integer():
                value = int(value)
            if value != getattr(config, name):
                settings[name] = value
        if self.notifications.currentData() != config.notifications:
            settings["notifications"] = self.notifications.currentData()
        return rules, settings

    def _said(self, text: str) -> str:
        self.message.setText(text)
        return text
