"""The rule editor: "always allow / always reject this tool when…", made from a waiting request
and prefilled from it (issue 22, decision 0052). A rule is configuration (core/policy/rules.py,
decision 0048); this window only drafts one and saves it as the settings window does.

Rules:

1. It is made from a request the policy asked about, and the conditions see the arguments as
   the server will receive them: the tool's fixed values over the call's
   (``core.policy.as_received``). One row per top-level argument, in the order the dialog
   shows them: its name, its value (elided, whole in the tooltip) and a condition. Every row
   opens at "equals this value", the effect at "Always allow", the expiry at "never": as
   opened, the rule matches this exact request and nothing else.
2. The conditions are core/policy/rules.py's shorthands (``equals``, ``under_folder``, ``pattern``,
   ``at_most``, joined by ``on_arguments``), offered by the value's type and prefilled from it
   (app/rule_conditions.py); "any value" sets none. An allow rule also names every argument
   ("any value" as ``{}``) and allows no other (``closed``): a call that adds one is not the
   request the rule was made from, and asks; a reject rule is left open, since closing it
   would let another argument escape it. What the rule will do is said in words, and its
   JSON Schema is one click away.
3. An allow rule on a destructive tool (as the request was recorded, or as the tool is
   classified now) is saved only once the operator ticked that they understand
   (``confirm_destructive``): Save stays disabled until then. A tool classified destructive
   while the editor is open is refused by name on Save (nothing was confirmed).
4. Saving goes through ``SettingsState.save`` (``manage.add_rule``: one validated write of
   the file, recorded as ``policy.changed``). A refused rule is said in words (the error's
   name in the tooltip), the file is left as it was and the editor stays open.
5. After a save, the policy of the saved configuration is asked about this very request: when
   it is decided by the new rule, ``saved`` carries what to do with it (``approve`` for an
   allow rule, ``reject`` for a reject rule) and the editor closes, so that the dialog decides
   it as once; otherwise the editor says the request still waits, and ``saved`` carries "".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.model import Pending
from app.rule_conditions import (
    AT_MOST,
    CHOICES,
    EQUALS,
    FOLDER,
    PATTERN,
    choices_for,
    prefill,
    said,
    shown,
)
from app.rule_conditions import condition as made_condition
from app.settings import Problem, SettingsState, say, say_not_saved
from core import canonical, marks, present
from core.canonical import JSONValue
from core.errors import (
    RuleNeedsConfirmation,
    RuleTargetUnknown,
    SignoffError,
)
from core.policy import rules
from core.policy.meaning import Where
from core.policy.policy import PolicyRequest, as_received
from core.policy.rules import ArgumentRule, Effect
from core.proxy import manage
from core.tools import SideEffect

EXPIRIES = (("never", ""), ("1 hour", "1h"), ("1 day", "1d"), ("7 days", "7d"),
            ("30 days", "30d"))  # fmt: skip
DESTRUCTIVE_CONFIRM = (
    "I understand: this tool is destructive, and matching calls will run without asking"
)
VALUE_WIDTH = 260  # pixels: a value longer than this is elided, whole in its tooltip


def _utc_now() -> datetime:
    return datetime.now(UTC)


# Refusals whose own message names a terminal command, said as this window would (rule 4).
REFUSED_WORDS = {
    RuleNeedsConfirmation.__name__: (
        "this tool is now classified destructive: an allow rule on it runs such calls without"
        " asking, so tick that you understand first"
    ),
    RuleTargetUnknown.__name__: (
        "this tool is not pinned, or its server is no longer configured, in Signoff's"
        " settings: a rule is made only on a pinned tool"
    ),
}


def in_words(problem: Problem) -> Problem:
    """Why a rule was not saved, in this window's words; the error's name for the tooltip."""
    words = REFUSED_WORDS.get(problem.name)
    return problem if words is None else Problem(words, problem.name, problem.saved)


@dataclass
class Row:
    """One argument's row: its name and value, the condition chosen and its field."""

    name: str
    value: Any
    fixed: bool
    choice: QComboBox
    field: QLineEdit
    seen: QLabel  # the value, elided; whole in its tooltip

    def condition(self) -> dict[str, JSONValue] | None:
        return made_condition(self.choice.currentData(), self.value, self.field.text())

    def words(self) -> str:
        return said(self.choice.currentData(), self.name, self.value, self.field.text())


class RuleEditor(QDialog):
    saved = Signal(str, str)  # what to do with the request ("approve", "reject" or ""), rule id

    def __init__(
        self,
        pending: Pending,
        state: SettingsState,
        parent: QWidget | None = None,
        *,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        super().__init__(parent)
        self.pending = pending
        self.state = state
        self.clock = clock
        self.server, self.tool = pending.server or "", pending.tool or ""
        # Destructive as recorded with the request, or as classified now (what add_rule asks).
        server = state.config.servers.get(self.server)
        spec = server.tools.get(self.tool) if server is not None else None
        self.destructive = SideEffect.DESTRUCTIVE in (
            getattr(spec, "side_effect", None), SideEffect(pending.side_effect or "read_only"),
        )  # fmt: skip
        self.setWindowTitle(f"Signoff: a rule for {pending.title}")
        self.setMinimumWidth(620)
        layout = QVBoxLayout(self)
        intro = QLabel(
            f"A rule for every call of {pending.title} whose arguments meet these conditions,"
            " as the server will receive them. It opens matching this exact request only."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)

        effects = QHBoxLayout()
        self.allow = QRadioButton("Always allow")
        self.reject_effect = QRadioButton("Always reject")
        self.effect = QButtonGroup(self)
        for button in (self.allow, self.reject_effect):
            self.effect.addButton(button)
            effects.addWidget(button)
        effects.addStretch(1)
        self.allow.setChecked(True)
        layout.addLayout(effects)

        layout.addWidget(QLabel("When:"))
        self.rows = self._rows(layout)

        form = QFormLayout()
        self.expires = QComboBox()
        self.expires.setEditable(True)  # a time or a duration (2h, 2026-12-31T18:00) typed
        for words, text in EXPIRIES:
            self.expires.addItem(words, text)
        form.addRow("Expires", self.expires)
        self.note = QLineEdit()
        self.note.setPlaceholderText("Note (optional): why this rule")
        form.addRow("Note", self.note)
        layout.addLayout(form)

        self.confirm = QCheckBox(DESTRUCTIVE_CONFIRM)
        self.confirm.setStyleSheet("color: #b42318; font-weight: bold;")
        layout.addWidget(self.confirm)
        self.preview = QLabel()
        self.preview.setWordWrap(True)
        self.preview.setTextFormat(Qt.TextFormat.PlainText)
        self.preview.setStyleSheet("font-weight: 600;")
        layout.addWidget(self.preview)
        self.details_button = QPushButton("Details")
        self.details_button.setCheckable(True)
        self.details_button.setAutoDefault(False)
        self.details_button.setToolTip("The condition as saved: a JSON Schema over the arguments")
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.details.hide()
        layout.addWidget(self.details, 1)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.problem)

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.save_button = QPushButton("Save the rule")
        for button in (self.cancel_button, self.save_button):
            button.setAutoDefault(False)
            buttons.addWidget(button)
        layout.addLayout(buttons)

        # Bound methods, not lambdas holding self (see app/tray.py).
        self.effect.buttonToggled.connect(self._changed)
        self.confirm.toggled.connect(self._changed)
        self.expires.currentTextChanged.connect(self._changed)
        self.note.textChanged.connect(self._changed)
        self.details_button.toggled.connect(self._show_details)
        self.cancel_button.clicked.connect(self.reject)
        self.save_button.clicked.connect(self.save)
        self._changed()

    def _rows(self, layout: QVBoxLayout) -> list[Row]:
        """One row per argument as the server will receive it (rule 1)."""
        try:
            arguments = canonical.loads(self.pending.arguments)
            fixed = canonical.loads(self.pending.fixed)
        except SignoffError:
            arguments, fixed = None, {}
        received = as_received(arguments, fixed if isinstance(fixed, dict) else {})
        grid = QGridLayout()
        found: list[Row] = []
        if not isinstance(received, dict):
            layout.addWidget(QLabel("(no arguments to set conditions on)"))
            return found
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        fixed = fixed if isinstance(fixed, dict) else {}
        schema = self.pending.schema
        names = present.order(arguments, schema) if isinstance(arguments, dict) else []
        names += [name for name in present.order(fixed, schema) if name not in names]
        for at, name in enumerate(names):  # as the dialog: the call's, then the fixed ones
            value, is_fixed = received[name], name in fixed
            named = QLabel(marks.visible(name, lines=False))
            named.setTextFormat(Qt.TextFormat.PlainText)
            if is_fixed:
                named.setToolTip(f"{present.SET_BY_SIGNOFF}: sent with every call of this tool")
                named.setText(f"{named.text()} ({present.SET_BY_SIGNOFF})")
            text = shown(value)
            seen = QLabel()
            seen.setTextFormat(Qt.TextFormat.PlainText)
            seen.setFont(mono)
            seen.setText(seen.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle,
                                                       VALUE_WIDTH))  # fmt: skip
            seen.setToolTip(text)
            choice = QComboBox()
            for kind in choices_for(value):
                choice.addItem(CHOICES[kind], kind)
            choice.setCurrentIndex(choice.findData(EQUALS))
            field = QLineEdit()
            field.hide()
            row = Row(name, value, is_fixed, choice, field, seen)
            choice.currentIndexChanged.connect(self._row_chosen)
            field.textChanged.connect(self._changed)
            for column, widget in enumerate((named, seen, choice, field)):
                grid.addWidget(widget, at, column)
            found.append(row)
        grid.setColumnStretch(3, 1)
        layout.addLayout(grid)
        return found

    def _show_details(self, shown: bool) -> None:
        self.details_button.setText("Hide details" if shown else "Details")
        self.details.setVisible(shown)

    def _row_chosen(self, _index: int) -> None:
        row = next((r for r in self.rows if r.choice is self.sender()), None)
        if row is not None:
            _chosen(row)
        self._changed()

    def row(self, name: str) -> Row:
        return next(r for r in self.rows if r.name == name)

    def choose(self, name: str, choice: str, text: str | None = None) -> None:
        """Set a row's condition (and its field), as a person would."""
        row = self.row(name)
        row.choice.setCurrentIndex(row.choice.findData(choice))
        if text is not None:
            row.field.setText(text)

    # --- the draft ------------------------------------------------------------------------

    @property
    def effect_chosen(self) -> Effect:
        return Effect.ALLOW if self.allow.isChecked() else Effect.REJECT

    def expires_text(self) -> str:
        """The expiry as core/rules.expiry reads it ("" for never)."""
        typed = self.expires.currentText()
        at = self.expires.findText(typed)
        return str(self.expires.itemData(at)) if at >= 0 else typed.strip()

    def draft(self) -> ArgumentRule:
        """The rule as the editor says it now; a named ``SignoffError`` when it cannot be one."""
        # An allow rule names every argument and no other (rule 2): a call adding one, an
        # optional flag or a second path, is not the request it was made from, and asks. A
        # reject rule names only the conditions chosen: another argument must not escape it.
        closed = self.effect_chosen is Effect.ALLOW
        when = rules.on_arguments(
            ((row.name, {} if found is None else found) for row in self.rows
             if (found := row.condition()) is not None or closed),
            closed=closed,
        )  # fmt: skip
        text = self.expires_text()
        expires = rules.expiry(text, self.clock()) if text and text != "never" else None
        return ArgumentRule.make(self.server, self.tool, self.effect_chosen, when,
                                 expires=expires, note=self.note.text().strip())  # fmt: skip

    def words(self, rule: ArgumentRule) -> str:
        """What the rule will do, in words."""
        said = [w for row in self.rows if (w := row.words())]
        what = " and ".join(said) if said else "whatever its arguments"
        if rule.effect is Effect.ALLOW and not said:  # closed (rule 2): named, any values
            named = ", ".join(row.name for row in self.rows) or "no argument"
            what = f"it sets {named} to any value"
        if rule.effect is Effect.ALLOW:
            what += ", and no other argument"
        verb = "allow, without asking," if rule.effect is Effect.ALLOW else "reject"
        until = (
            f"until {rule.expires.astimezone().strftime('%Y-%m-%d %H:%M')}"
            if rule.expires is not None else "with no end"
        )  # fmt: skip
        return f"Always {verb} {self.pending.title} when {what}, {until}."

    def _changed(self, *_: object) -> None:
        allow_destructive = self.destructive and self.allow.isChecked()
        self.confirm.setVisible(allow_destructive)
        try:
            rule = self.draft()
        except (SignoffError, ValueError) as e:
            self.preview.setText(f"This rule cannot be made yet: {Problem.of(e).words}.")
            self.details.setPlainText("")
        else:
            self.preview.setText(self.words(rule))
            self.details.setPlainText(json.dumps(rule.when, indent=2, ensure_ascii=False))
        self.save_button.setEnabled(not allow_destructive or self.confirm.isChecked())

    # --- saving ---------------------------------------------------------------------------

    def save(self) -> None:
        """Save the rule (rule 4), then say what it does to this request (rule 5)."""
        try:
            rule = self.draft()
        except (SignoffError, ValueError) as e:
            say_not_saved(self.problem, in_words(Problem.of(e)))
            return
        self.state.reload()  # what the file says now, for the record of the change
        confirmed = self.destructive and self.confirm.isChecked()
        problem = self.state.save(
            partial(manage.add_rule, rule=rule, confirm_destructive=confirmed)
        )
        if problem is not None and not problem.saved:
            if problem.name == RuleNeedsConfirmation.__name__:
                self.destructive = True  # classified so since it opened: ask the tick now
                self._changed()
            say_not_saved(self.problem, in_words(problem))
            return
        decision = self._decides(rule)
        if decision:
            self.accept()
            self.saved.emit(decision, rule.id)
            return
        say(self.problem, f"Saved as rule {rule.id}. It does not decide this request (its"
            " arguments do not meet every condition, or another rule comes first), which"
            " still waits for you.")  # fmt: skip
        if problem is not None:  # saved, not recorded
            say_not_saved(self.problem, problem)
        self.save_button.setEnabled(False)
        self.cancel_button.setText("Close")
        self.saved.emit("", rule.id)

    def _decides(self, rule: ArgumentRule) -> str:
        """``approve`` or ``reject`` when the saved configuration's policy decides this
        request by ``rule``, else ""."""
        try:
            arguments = canonical.loads(self.pending.arguments)
            request = PolicyRequest.build(
                tool=rule.gate_name, spec_hash="", idempotent=False, arguments=arguments,
                side_effect=SideEffect(self.pending.side_effect), run_id=self.pending.run_id,
                goal="", step=0, consecutive_failures=0,
            )  # fmt: skip
            # Relative paths read from the folder the proxy read them from (decision 0064).
            where = Where(self.pending.cwd) if self.pending.cwd else None
            decision = self.state.config.policy(where).evaluate(request)
        except (SignoffError, ValueError):
            return ""
        if decision.rule != rule.id:
            return ""
        return "approve" if rule.effect is Effect.ALLOW else "reject"


def _chosen(row: Row) -> None:
    """A row's field shows for a condition that takes one, prefilled from the value."""
    choice = row.choice.currentData()
    takes = choice in (FOLDER, PATTERN, AT_MOST)
    row.field.setVisible(takes)
    row.field.setText(prefill(choice, row.value) if takes else "")
    row.field.setPlaceholderText({FOLDER: "/an/absolute/folder", PATTERN: "a regular expression",
                                  AT_MOST: "a number"}.get(choice, ""))  # fmt: skip
