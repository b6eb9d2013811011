"""A tool's fixed and denied parameters, edited in the tools page and saved with a button.

These are the one part of a tool's settings not saved as it is made: a row is typed in two
cells, and a half-typed one is no setting. The box knows whether what it shows differs from
what it was given (``dirty``), so that the page can ask before leaving a tool with unsaved
changes (decision 0041).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.settings import Problem, SettingsState, say, say_not_saved
from core import canonical
from core.errors import JSONRefused, SchemaRefused
from core.proxy import manage
from core.proxy.config import ToolConfig
from core.proxy.pins import rewrite_schema


def parse_fixed(text: str) -> object:
    """A fixed value as typed: JSON when it reads as JSON, otherwise the text as a string."""
    try:
        return canonical.loads(text)
    except JSONRefused:
        return text


class ParametersBox(QWidget):
    """The fixed parameters (a table of name and value), the denied ones, and their Save."""

    edited = Signal()  # what the box shows changed (by the operator)

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Fixed parameters (set by Signoff, hidden from the model)"))
        self.fixed = QTableWidget(0, 2)
        self.fixed.setHorizontalHeaderLabels(("Parameter", "Value (JSON or text)"))
        self.fixed.horizontalHeader().setStretchLastSection(True)
        self.fixed.verticalHeader().setVisible(False)
        self.fixed.setMaximumHeight(120)
        self.fixed.itemChanged.connect(self._edited)
        layout.addWidget(self.fixed)
        buttons = QHBoxLayout()
        add = QPushButton("Add")
        add.clicked.connect(self._add_row)
        remove = QPushButton("Remove")
        remove.clicked.connect(self._remove_row)
        buttons.addWidget(add)
        buttons.addWidget(remove)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addWidget(QLabel("Denied parameters"))
        self.deny = QLineEdit()
        self.deny.setPlaceholderText("names, separated by spaces; a call setting one fails")
        self.deny.textChanged.connect(self._edited)
        layout.addWidget(self.deny)
        save_row = QHBoxLayout()
        self.save_button = QPushButton("Save parameters")
        self.message = QLabel()
        self.message.setWordWrap(True)
        save_row.addWidget(self.save_button)
        save_row.addWidget(self.message, 1)
        layout.addLayout(save_row)
        self._given: tuple[dict[str, object], list[str]] = ({}, [])
        self._showing = False

    def show_tool(self, cfg: ToolConfig) -> None:
        """Show ``cfg``'s parameters, as saved: nothing unsaved."""
        self._showing = True
        self.fixed.setRowCount(0)
        for name, value in cfg.fixed.items():
            row = self.fixed.rowCount()
            self.fixed.insertRow(row)
            self.fixed.setItem(row, 0, QTableWidgetItem(name))
            self.fixed.setItem(row, 1, QTableWidgetItem(canonical.dumps_text(value)))
        self.deny.setText(" ".join(cfg.deny))
        self._showing = False
        self._given = self.values()
        self.message.setText("")
        self.message.setToolTip("")

    def values(self) -> tuple[dict[str, object], list[str]]:
        """The fixed values and denied names as shown (a row with no name is no setting)."""
        fixed: dict[str, object] = {}
        for row in range(self.fixed.rowCount()):
            name_item, value_item = self.fixed.item(row, 0), self.fixed.item(row, 1)
            name = name_item.text().strip() if name_item else ""
            if name:
                fixed[name] = parse_fixed(value_item.text() if value_item else "")
        return fixed, self.deny.text().replace(",", " ").split()

    @property
    def dirty(self) -> bool:
        """Whether what is shown differs from what was saved."""
        return self.values() != self._given

    def saved(self) -> None:
        """What is shown is now what is saved."""
        self._given = self.values()

    def save(self, state: SettingsState, server: str, tool: str, schema: object) -> Problem | None:
        """Save what is shown as ``tool``'s parameters (checked against its input ``schema``
        when it is listed); None when saved, or when nothing changed."""
        fixed, deny = self.values()
        problem = None
        if isinstance(schema, dict) and (fixed or deny):
            try:
                rewrite_schema(schema, [*fixed, *deny])
            except SchemaRefused as e:
                problem = Problem.of(e)
        if problem is None and self.dirty:
            problem = state.save(lambda p: manage.set_tool(p, server, tool, fixed=fixed, deny=deny))
            if problem is None or problem.saved:
                self.saved()
        if problem is not None and not problem.saved:
            say_not_saved(self.message, problem)
            return problem
        say(self.message, "Saved.")
        return None

    def _edited(self, *_: object) -> None:
        if not self._showing:
            self.message.setText("Not saved yet." if self.dirty else "")
            self.edited.emit()

    def _add_row(self) -> None:
        self.fixed.insertRow(self.fixed.rowCount())

    def _remove_row(self) -> None:
        self.fixed.removeRow(self.fixed.currentRow())
        self._edited()
