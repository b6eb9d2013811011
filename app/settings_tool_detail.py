"""What the tools page shows of one tool: whether it is offered, its class and rule (as saved,
or as chosen and not saved), the server's suggested class, its pin, an annotation conflict, its
title, description, hints and schemas, and its parameters. Only showing: the page
(app/settings_tools.py) saves what is chosen here."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase, QTextOption
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app import tool_states
from app.settings import Problem, say, say_not_saved
from app.settings_parameters import ParametersBox
from app.words import class_words
from core.marks import visible
from core.policy.policy import Rule
from core.proxy import classifying
from core.proxy.config import ToolConfig
from core.proxy.pins import REPIN_TO_FORWARD, ListedTool, ToolState, evaluate
from core.tools import SideEffect


def _mono() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def server_side(annotations: dict[str, object]) -> SideEffect:
    """The class the server's explicit hints claim: the least a conflict can be resolved to."""
    if annotations.get("destructiveHint") is True:
        return SideEffect.DESTRUCTIVE
    return SideEffect.LOCAL_MUTATION


def in_words(text: str) -> str:
    """``text`` with each class's name said in words (``read_only`` -> ``read only``)."""
    for side_effect in SideEffect:
        text = text.replace(side_effect.value, f"“{class_words(side_effect)}”")
    return text


def class_box(unclassified: str | None) -> QComboBox:
    """The classes in words (the name in each one's tooltip), and first ``unclassified``."""
    box = QComboBox()
    if unclassified is not None:
        box.addItem(unclassified, None)
    for s in SideEffect:
        box.addItem(class_words(s), s.value)
        box.setItemData(box.count() - 1, s.value, Qt.ItemDataRole.ToolTipRole)
    return box


class ToolDetail(QScrollArea):
    def __init__(self) -> None:
        super().__init__()
        self.settling = False  # the boxes are being set to what is shown, not chosen
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        form = self.form = QFormLayout(body)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-weight: bold;")
        form.addRow(self.title)
        self.availability = QLabel()
        self.availability.setWordWrap(True)
        form.addRow("Offered", self.availability)

        self.side_effect = class_box("no class: not offered")
        form.addRow("Class", self.side_effect)
        self.suggestion = QWidget()
        suggestion = QHBoxLayout(self.suggestion)
        suggestion.setContentsMargins(0, 0, 0, 0)
        self.use_suggestion = QPushButton()
        self.use_suggestion.setToolTip(
            "The server's hints are its own claim: nothing is applied until you choose"
        )
        suggestion.addWidget(self.use_suggestion)
        suggestion.addStretch(1)
        form.addRow("", self.suggestion)
        # Rows of a label beside a button are widgets: a form lays out a wrapped label's
        # height for its width only in a widget, not in a nested layout.
        class_row = QHBoxLayout(class_widget := QWidget())
        class_row.setContentsMargins(0, 0, 0, 0)
        self.class_message = QLabel()
        self.class_message.setWordWrap(True)
        self.retry = QPushButton("Try again")
        class_row.addWidget(self.class_message, 1)
        class_row.addWidget(self.retry)
        form.addRow("", class_widget)
        self.policy = QComboBox()
        self.policy.addItem("the class's rule", None)
        for r in Rule:
            self.policy.addItem(f"always {r.value}", r.value)
        form.addRow("Rule for this tool", self.policy)

        pin_row = QHBoxLayout(pin_widget := QWidget())
        pin_row.setContentsMargins(0, 0, 0, 0)
        self.pin_state = QLabel()
        self.pin_state.setWordWrap(True)
        self.pin_button = QPushButton("Pin")
        pin_row.addWidget(self.pin_state, 1)
        pin_row.addWidget(self.pin_button)
        form.addRow("Pin", pin_widget)
        form.addRow("Conflict", self._conflict_box())

        self.tool_title = QLabel()
        self.tool_title.setWordWrap(True)
        form.addRow("Title", self.tool_title)
        self.description = QPlainTextEdit()
        self.description.setReadOnly(True)
        self.description.setMaximumHeight(110)
        form.addRow("Description", self.description)
        self.annotations = QLabel()
        self.annotations.setWordWrap(True)
        form.addRow("Server's hints", self.annotations)
        self.schema = QPlainTextEdit()
        self.schema.setReadOnly(True)
        self.schema.setFont(_mono())
        self.schema.setMinimumHeight(140)
        form.addRow("Input schema", self.schema)
        self.output_schema = QPlainTextEdit()
        self.output_schema.setReadOnly(True)
        self.output_schema.setFont(_mono())
        self.output_schema.setMaximumHeight(110)
        form.addRow("Output schema", self.output_schema)

        for text in (self.description, self.schema, self.output_schema):
            # Long text wraps, a URL or a word longer than the line anywhere: never sideways.
            text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
            text.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)

        self.overrule = QCheckBox("Keep my class even where the server's hints disagree")
        form.addRow("", self.overrule)
        self.params = ParametersBox()
        form.addRow(self.params)
        self.setWidget(body)

    def _conflict_box(self) -> QWidget:
        self.conflict = QWidget()
        conflict_layout = QVBoxLayout(self.conflict)
        conflict_layout.setContentsMargins(0, 0, 0, 0)
        self.conflict_text = QLabel()
        self.conflict_text.setWordWrap(True)
        self.conflict_text.setStyleSheet("color: #b00020;")
        conflict_layout.addWidget(self.conflict_text)
        resolutions = QHBoxLayout()
        self.take_server_class = QPushButton()
        self.keep_my_class = QPushButton()
        resolutions.addWidget(self.take_server_class)
        resolutions.addWidget(self.keep_my_class)
        resolutions.addStretch(1)
        conflict_layout.addLayout(resolutions)
        return self.conflict

    # --- showing ---------------------------------------------------------------------------

    def show_tool(
        self,
        server: str,
        row: tuple[str, ListedTool | None, ToolConfig | None],
        chosen: dict[str, object],
        problem: Problem | None,
        again: bool,
    ) -> None:
        """Show one tool: ``chosen``, the settings chosen and not saved (``problem``: why), over
        its configuration; ``again``: it is the tool shown already (its unsaved parameters and
        the message of its last choice stay)."""
        tool, listed, cfg = row
        cfg = cfg or ToolConfig()
        for widget in (self.side_effect, self.policy, self.params, self.overrule):
            widget.setEnabled(True)
        state = evaluate(listed, cfg) if listed else None
        self.title.setText(f"{server} / {tool}")
        self.tool_title.setText(visible(listed.title) if listed and listed.title else "none")
        self.description.setPlainText(listed.description if listed else "")
        for text, schema in (
            (self.schema, listed.input_schema if listed else None),
            (self.output_schema, listed.output_schema if listed else None),
        ):
            shown = json.dumps(schema, indent=2, ensure_ascii=False) if schema is not None else ""
            text.setPlainText(shown)
        hints = listed.annotations if listed else {}
        self.annotations.setText(
            ", ".join(f"{k}: {json.dumps(v)}" for k, v in hints.items()) or "none"
        )
        self.availability.setText(
            tool_states.offered_words(state) if state else "the server does not list it now"
        )
        self._show_pin(state)
        self._show_conflict(state, cfg)
        self._show_choices(cfg, chosen, problem, again)
        self._show_suggestion(hints)
        if not again or not self.params.dirty:
            self.params.show_tool(cfg)  # unsaved parameters of this tool are kept

    def show_nothing(self, tools: list[str]) -> None:
        """No tool, or (``tools``) several selected."""
        for widget in (self.side_effect, self.policy, self.params, self.overrule):
            widget.setEnabled(False)
        self.title.setText(
            f"{len(tools)} tools selected: {', '.join(tools)}. Classify them together below the"
            " list."
            if len(tools) > 1
            else "Select a tool, or several to classify them together"
        )
        for text in (self.description, self.schema, self.output_schema):
            text.setPlainText("")
        for label in (self.tool_title, self.availability, self.annotations, self.pin_state):
            label.setText("")
        say(self.class_message, "")
        self.retry.setVisible(False)
        self.suggestion.setVisible(False)
        self.form.setRowVisible(self.suggestion, False)
        self.pin_button.setEnabled(False)
        self.conflict.setVisible(False)
        self.form.setRowVisible(self.conflict, False)
        self.params.show_tool(ToolConfig())

    def _show_choices(
        self, cfg: ToolConfig, chosen: dict[str, object], problem: Problem | None, again: bool
    ) -> None:
        """The class, rule and overrule as chosen: as saved, or as chosen and not saved."""
        value = chosen.get("side_effect", cfg.side_effect.value if cfg.side_effect else None)
        rule = chosen.get("policy", cfg.policy.value if cfg.policy else None)
        overrule = chosen.get("overrule_annotations", cfg.overrule_annotations)
        self.settling = True
        self.side_effect.setCurrentIndex(max(self.side_effect.findData(value), 0))
        self.policy.setCurrentIndex(max(self.policy.findData(rule), 0))
        self.overrule.setChecked(bool(overrule))
        self.settling = False
        self.retry.setVisible(problem is not None)
        if problem is not None:
            say_not_saved(self.class_message, problem)
        elif not again:
            say(self.class_message, "")

    def _show_suggestion(self, hints: dict[str, object]) -> None:
        """The server's suggested class, offered when it is not the class shown (never
        applied here: core/proxy/classifying.py rule 5)."""
        suggested = classifying.suggested(hints)
        offer = suggested is not None and suggested.value != self.side_effect.currentData()
        self.suggestion.setVisible(offer)
        self.form.setRowVisible(self.suggestion, offer)
        if suggested is not None:
            self.use_suggestion.setText(f"Use the server's suggestion: {class_words(suggested)}")

    def _show_pin(self, state: ToolState | None) -> None:
        if state is None:
            self.pin_state.setText("connect to the server to pin this tool")
            self.pin_button.setEnabled(False)
            return
        review = state.status == "changed" or state.repin_to_forward
        self.pin_button.setEnabled(state.status != "pinned" or state.repin_to_forward)
        self.pin_state.setText({
            "new": "not pinned yet: read the description and schema, then pin",
            "pinned": f"pinned, unchanged ({state.pinned_as[:16]}…)"
            + (f"; pinned before titles and output schemas were: {REPIN_TO_FORWARD}"
               if state.repin_to_forward else ""),
            "changed": "CHANGED since you pinned it: review what changed before re-pinning",
        }[state.status])  # fmt: skip
        self.pin_button.setText("Review changes…" if review else "Pin")

    def _show_conflict(self, state: ToolState | None, cfg: ToolConfig) -> None:
        clash = in_words(state.conflict) if state else ""
        self.conflict.setVisible(bool(clash))
        self.form.setRowVisible(self.conflict, bool(clash))
        if not clash or state is None or cfg.side_effect is None:
            return
        theirs = server_side(state.tool.annotations)
        overruled = " (you overruled the hints: it is offered)" if cfg.overrule_annotations else ""
        self.conflict_text.setText(f"{clash[0].upper()}{clash[1:]}.{overruled}")
        self.take_server_class.setText(f"Classify it “{class_words(theirs)}”")
        self.keep_my_class.setText(
            f"Keep “{class_words(cfg.side_effect)}”: overrule the server's hints"
        )
        self.keep_my_class.setEnabled(not cfg.overrule_annotations)
