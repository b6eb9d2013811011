"""The tools page: each tool of a server with its description, schema, annotations, pin and
class; pinning (with a diff of what changed), classifying, fixed and denied parameters, and
annotation conflicts with their two resolutions."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.diffview import RepinDialog
from app.settings import SettingsState
from app.settings_instructions import InstructionsBox
from app.widgets import message_label, row_table
from core import canonical
from core.errors import JSONRefused, SchemaRefused
from core.marks import visible
from core.policy import Rule
from core.proxy import manage, pindiff, pinstore
from core.proxy.config import ToolConfig
from core.proxy.pins import REPIN_TO_FORWARD, ListedTool, ToolState, evaluate, rewrite_schema
from core.tools import SideEffect

COLUMNS = ("Tool", "Pin", "Class", "Offered to hosts")


def _mono() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def server_side(annotations: dict[str, object]) -> SideEffect:
    """The class the server's explicit hints claim: the least a conflict can be resolved to."""
    if annotations.get("destructiveHint") is True:
        return SideEffect.DESTRUCTIVE
    return SideEffect.LOCAL_MUTATION


def parse_fixed(text: str) -> object:
    """A fixed value as typed: JSON when it reads as JSON, otherwise the text as a string."""
    try:
        return canonical.loads(text)
    except JSONRefused:
        return text


class ToolsPage(QWidget):
    def __init__(self, state: SettingsState) -> None:
        super().__init__()
        self.state = state
        self.repin_dialog: RepinDialog | None = None
        self._repinning: ListedTool | None = None  # the tool the repin dialog shows
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(QLabel("Server"))
        self.server = QComboBox()
        # Bound methods, not lambdas holding self (see app/tray.py).
        self.server.currentTextChanged.connect(self._server_changed)
        top.addWidget(self.server, 1)
        self.connect_button = QPushButton("Connect and list tools")
        self.connect_button.clicked.connect(self._connect)
        top.addWidget(self.connect_button)
        self.pin_all_button = QPushButton("Pin all new tools")
        self.pin_all_button.clicked.connect(self.pin_all_new)
        top.addWidget(self.pin_all_button)
        layout.addLayout(top)
        self.message = message_label()
        layout.addWidget(self.message)
        self.instructions = InstructionsBox(state)
        layout.addWidget(self.instructions)

        split = QSplitter()
        self.table = row_table(COLUMNS)
        self.table.itemSelectionChanged.connect(self._show_selected)
        split.addWidget(self.table)
        split.addWidget(self._detail())
        split.setSizes([330, 670])
        layout.addWidget(split, 1)
        state.changed.connect(self._changed)
        state.listed.connect(self._listed)
        self._fill_servers()

    # --- layout ----------------------------------------------------------------------------

    def _detail(self) -> QWidget:
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        form = self.form = QFormLayout(body)
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        form.addRow(self.title)
        self.availability = QLabel()
        self.availability.setWordWrap(True)
        form.addRow("Offered", self.availability)
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

        pin_row = QHBoxLayout()
        self.pin_state = QLabel()
        self.pin_button = QPushButton("Pin")
        self.pin_button.clicked.connect(self.pin_selected)
        pin_row.addWidget(self.pin_state, 1)
        pin_row.addWidget(self.pin_button)
        form.addRow("Pin", pin_row)

        self.conflict = QWidget()
        conflict_layout = QVBoxLayout(self.conflict)
        conflict_layout.setContentsMargins(0, 0, 0, 0)
        self.conflict_text = QLabel()
        self.conflict_text.setWordWrap(True)
        self.conflict_text.setStyleSheet("color: #b00020;")
        conflict_layout.addWidget(self.conflict_text)
        resolutions = QHBoxLayout()
        self.take_server_class = QPushButton()
        self.take_server_class.clicked.connect(self.resolve_with_server)
        self.keep_my_class = QPushButton()
        self.keep_my_class.clicked.connect(self.resolve_with_mine)
        resolutions.addWidget(self.take_server_class)
        resolutions.addWidget(self.keep_my_class)
        resolutions.addStretch(1)
        conflict_layout.addLayout(resolutions)
        form.addRow("Conflict", self.conflict)

        self.side_effect = QComboBox()
        self.side_effect.addItem("unclassified: not offered", None)
        for s in SideEffect:
            self.side_effect.addItem(s.value, s.value)
        form.addRow("Class", self.side_effect)
        self.policy = QComboBox()
        self.policy.addItem("the class's rule", None)
        for r in Rule:
            self.policy.addItem(f"always {r.value}", r.value)
        form.addRow("Policy for this tool", self.policy)
        self.fixed = QTableWidget(0, 2)
        self.fixed.setHorizontalHeaderLabels(("Parameter", "Value (JSON or text)"))
        self.fixed.horizontalHeader().setStretchLastSection(True)
        self.fixed.verticalHeader().setVisible(False)
        self.fixed.setMaximumHeight(120)
        fixed_buttons = QHBoxLayout()
        add_fixed = QPushButton("Add")
        add_fixed.clicked.connect(self._add_fixed_row)
        remove_fixed = QPushButton("Remove")
        remove_fixed.clicked.connect(self._remove_fixed_row)
        fixed_buttons.addWidget(add_fixed)
        fixed_buttons.addWidget(remove_fixed)
        fixed_buttons.addStretch(1)
        fixed_box = QVBoxLayout()
        fixed_box.addWidget(self.fixed)
        fixed_box.addLayout(fixed_buttons)
        form.addRow("Fixed parameters\n(set by Signoff,\nhidden from the model)", fixed_box)
        self.deny = QLineEdit()
        self.deny.setPlaceholderText("names, separated by spaces; a call setting one fails")
        form.addRow("Denied parameters", self.deny)
        self.overrule = QCheckBox("Keep my class even where the server's hints disagree")
        form.addRow("", self.overrule)
        save_row = QHBoxLayout()
        self.save_button = QPushButton("Save tool settings")
        self.save_button.clicked.connect(self.save)
        self.save_message = QLabel()
        self.save_message.setWordWrap(True)
        save_row.addWidget(self.save_button)
        save_row.addWidget(self.save_message, 1)
        form.addRow(save_row)
        scroll.setWidget(body)
        return scroll

    # --- what is shown ---------------------------------------------------------------------

    def _fill_servers(self) -> None:
        current = self.server.currentText()
        self.server.blockSignals(True)
        self.server.clear()
        self.server.addItems(list(self.state.config.servers))
        index = self.server.findText(current)
        self.server.setCurrentIndex(max(index, 0))
        self.server.blockSignals(False)
        self.refresh()

    def select_server(self, name: str) -> None:
        index = self.server.findText(name)
        if index >= 0:
            self.server.setCurrentIndex(index)
        if name not in self.state.listings:
            self._connect()

    def _changed(self) -> None:
        self._fill_servers()

    def _listed(self, name: str) -> None:
        if name == self.server.currentText():
            error = self.state.errors.get(name)
            self.message.setText(f"Could not connect: {error}" if error else "")
            self.connect_button.setEnabled(True)
            self.refresh()

    def rows(self) -> list[tuple[str, ListedTool | None, ToolConfig | None]]:
        """Each tool of the server: listed now, configured, or both."""
        name = self.server.currentText()
        server = self.state.config.servers.get(name)
        listing = self.state.listings.get(name)
        configured = dict(server.tools) if server else {}
        rows: list[tuple[str, ListedTool | None, ToolConfig | None]] = []
        for tool in listing.tools if listing else ():
            rows.append((tool.name, tool, configured.pop(tool.name, None)))
        rows += [(tool, None, cfg) for tool, cfg in sorted(configured.items())]
        return rows

    def _server_changed(self, _name: str) -> None:
        self.refresh()

    def _add_fixed_row(self) -> None:
        self.fixed.insertRow(self.fixed.rowCount())

    def _remove_fixed_row(self) -> None:
        self.fixed.removeRow(self.fixed.currentRow())

    def refresh(self) -> None:
        selected = self.selected()
        name = self.server.currentText()
        listing = self.state.listings.get(name)
        if not name:
            self.message.setText("No server yet: add one on the Servers page.")
        elif listing is None and name not in self.state.errors:
            self.message.setText(
                "Connect to the server to see its tools' descriptions and schemas."
            )
        self.instructions.show_server(name)
        rows = self.rows()
        self.table.setRowCount(len(rows))
        for n, (tool, listed, cfg) in enumerate(rows):
            state = evaluate(listed, cfg) if listed else None
            pin = state.status if state else ("not listed now" if listing else "?")
            side = cfg.side_effect.value if cfg and cfg.side_effect else "unclassified"
            offered = "yes" if state and state.available else (state.reason if state else "-")
            for c, text in enumerate((tool, pin, side, offered)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if c == 3 and state and not state.available:
                    item.setForeground(Qt.GlobalColor.darkRed)
                self.table.setItem(n, c, item)
        self.table.resizeColumnToContents(0)
        new = [t for t, listed, cfg in rows if listed and (cfg is None or cfg.pin is None)]
        self.pin_all_button.setEnabled(bool(new))
        self.connect_button.setEnabled(bool(name))
        if selected:
            self.select_tool(selected)
        self._show_selected()

    def selected(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        item = self.table.item(rows[0].row(), 0) if rows else None
        return item.text() if item else None

    def select_tool(self, tool: str) -> None:
        for n in range(self.table.rowCount()):
            item = self.table.item(n, 0)
            if item and item.text() == tool:
                self.table.selectRow(n)
                return

    def _current(self) -> tuple[str, ListedTool | None, ToolConfig | None] | None:
        tool = self.selected()
        return next((r for r in self.rows() if r[0] == tool), None) if tool else None

    def _show_selected(self) -> None:
        current = self._current()
        editable = current is not None
        for widget in (self.side_effect, self.policy, self.fixed, self.deny, self.overrule,
                       self.save_button):  # fmt: skip
            widget.setEnabled(editable)
        self.save_message.setText("")
        if current is None:
            self.title.setText("Select a tool")
            for text in (self.description, self.schema, self.output_schema):
                text.setPlainText("")
            self.tool_title.setText("")
            self.availability.setText("")
            self.annotations.setText("")
            self.pin_state.setText("")
            self.pin_button.setEnabled(False)
            self.conflict.setVisible(False)
            self.form.setRowVisible(self.conflict, False)
            return
        tool, listed, cfg = current
        cfg = cfg or ToolConfig()
        state = evaluate(listed, cfg) if listed else None
        self.title.setText(f"{self.server.currentText()} / {tool}")
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
            "yes" if state and state.available
            else (f"no: {state.reason}" if state else "the server does not list it now")
        )  # fmt: skip
        self._show_pin(state)
        self._show_conflict(state, cfg)
        self.side_effect.setCurrentIndex(
            max(self.side_effect.findData(cfg.side_effect.value if cfg.side_effect else None), 0)
        )
        self.policy.setCurrentIndex(
            max(self.policy.findData(cfg.policy.value if cfg.policy else None), 0)
        )
        self.fixed.setRowCount(0)
        for name, value in cfg.fixed.items():
            row = self.fixed.rowCount()
            self.fixed.insertRow(row)
            self.fixed.setItem(row, 0, QTableWidgetItem(name))
            self.fixed.setItem(row, 1, QTableWidgetItem(canonical.dumps_text(value)))
        self.deny.setText(" ".join(cfg.deny))
        self.overrule.setChecked(cfg.overrule_annotations)

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
        clash = state.conflict if state else ""
        self.conflict.setVisible(bool(clash))
        self.form.setRowVisible(self.conflict, bool(clash))
        if not clash or state is None or cfg.side_effect is None:
            return
        theirs = server_side(state.tool.annotations)
        overruled = " (you overruled the hints: it is offered)" if cfg.overrule_annotations else ""
        self.conflict_text.setText(f"{clash[0].upper()}{clash[1:]}.{overruled}")
        self.take_server_class.setText(f"Classify it {theirs.value}")
        self.keep_my_class.setText(f"Keep {cfg.side_effect.value}: overrule the server's hints")
        self.keep_my_class.setEnabled(not cfg.overrule_annotations)

    # --- actions ---------------------------------------------------------------------------

    def _connect(self) -> None:
        name = self.server.currentText()
        window = self.window()
        servers = getattr(window, "servers", None)
        if not name or servers is None:
            return
        self.connect_button.setEnabled(False)
        self.message.setText(f"Starting {name}…")
        servers.test(name)

    def _listed_tool(self) -> ListedTool | None:
        current = self._current()
        return current[1] if current else None

    def pin_selected(self) -> RepinDialog | None:
        """Pin the selected tool as shown; a changed one shows what changed first."""
        current = self._current()
        if current is None or current[1] is None:
            return None
        _tool, listed, cfg = current
        if cfg is not None and cfg.pin is not None and cfg.pin != listed.pin:
            problem = ""
            try:
                old = pinstore.kept(manage.pins_dir(self.state.config_path), cfg.pin)
            except (pinstore.PinTextAltered, pinstore.PinTextUnreadable) as e:
                problem = (
                    f"The text kept when you pinned this tool cannot be trusted, so no diff is"
                    f" shown: {e} [{type(e).__name__}]"
                )
                old = None
            self.repin_dialog = RepinDialog(pindiff.diff(old, listed), self, problem)
            self._repinning = listed
            self.repin_dialog.accepted.connect(self._repin_accepted)
            self.repin_dialog.open()
            return self.repin_dialog
        self._pin([listed])
        return None

    def _repin_accepted(self) -> None:
        if self._repinning is not None:
            self._pin([self._repinning])

    def pin_all_new(self) -> None:
        new = [t for _, t, cfg in self.rows() if t and (cfg is None or cfg.pin is None)]
        self._pin(new)

    def _pin(self, tools: list[ListedTool]) -> None:
        server = self.server.currentText()
        error = self.state.apply(lambda p: manage.pin(p, server, tools))
        names = ", ".join(t.name for t in tools)
        self.message.setText(f"Not pinned: {error}" if error else f"Pinned {names}.")

    def save(self) -> str:
        """Save the selected tool's class, rule, fixed and denied parameters; "" when saved."""
        current = self._current()
        if current is None:
            return "no tool selected"
        tool, listed, _ = current
        fixed: dict[str, object] = {}
        for row in range(self.fixed.rowCount()):
            name_item, value_item = self.fixed.item(row, 0), self.fixed.item(row, 1)
            name = name_item.text().strip() if name_item else ""
            if name:
                fixed[name] = parse_fixed(value_item.text() if value_item else "")
        deny = self.deny.text().replace(",", " ").split()
        error = ""
        if listed is not None and (fixed or deny):
            try:
                rewrite_schema(listed.input_schema, [*fixed, *deny])
            except SchemaRefused as e:
                error = f"{e} [{type(e).__name__}]"
        if not error:
            error = self.state.apply(
                lambda p: manage.set_tool(
                    p,
                    self.server.currentText(),
                    tool,
                    side_effect=self.side_effect.currentData(),
                    policy=self.policy.currentData(),
                    fixed=fixed,
                    deny=deny,
                    overrule_annotations=self.overrule.isChecked(),
                )
            )
        self.select_tool(tool)
        self.save_message.setText(f"Not saved: {error}" if error else "Saved.")
        return error

    def resolve_with_server(self) -> None:
        current = self._current()
        if current is None or current[1] is None:
            return
        tool, listed, _ = current
        theirs = server_side(listed.annotations)
        error = self.state.apply(
            lambda p: manage.set_tool(
                p,
                self.server.currentText(),
                tool,
                side_effect=theirs.value,
                overrule_annotations=False,
            )
        )
        self.select_tool(tool)
        self.message.setText(f"Not saved: {error}" if error else f"{tool} is now {theirs.value}.")

    def resolve_with_mine(self) -> None:
        current = self._current()
        if current is None:
            return
        tool = current[0]
        error = self.state.apply(
            lambda p: manage.set_tool(p, self.server.currentText(), tool, overrule_annotations=True)
        )
        self.select_tool(tool)
        self.message.setText(
            f"Not saved: {error}" if error else f"{tool} keeps your class; the hints are overruled."
        )
