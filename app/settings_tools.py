"""The tools page: each tool of a server with its pin, class, rule, description, schema and
hints; pinning (with a diff of what changed), classifying one tool or several at once, the
server's suggested class, fixed and denied parameters, and annotation conflicts with their two
resolutions.

Rules (decision 0041):

1. A choice of class, rule or overrule is saved as it is made, as Pin is, by the CLI's own code
   (``core.proxy.manage``: one write of the file, its configuration recorded, the change of the
   rules recorded). Several tools selected are classified in one write
   (``manage.classify``, all or none).
2. A choice that cannot be saved is kept in the page, shown with why in words (the error's name
   in the tooltip), marked "not saved" in the list, and tried again on request; the file is as
   it was. Closing the window with such a choice asks.
3. Fixed and denied parameters are saved with their own button; leaving the tool, the server or
   the window with them changed and not saved asks: save, discard, or stay.
4. The server's hints are shown as a suggestion the operator applies with one click, never
   applied on their own (core/proxy/classifying.py rule 5).
5. Each server in the picker, and the page's header, count its tools offered and waiting for
   the operator (app/tool_states.py).
"""

from __future__ import annotations

import re

from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app import tool_states
from app.diffview import RepinDialog
from app.settings import Problem, SettingsState, say, say_not_saved
from app.settings_instructions import InstructionsBox
from app.settings_parameters import parse_fixed
from app.settings_tool_detail import ToolDetail, class_box, server_side
from app.widgets import message_label, row_table
from app.words import class_words
from core.proxy import classifying, manage, pindiff, pinstore
from core.proxy.config import ToolConfig
from core.proxy.pins import ListedTool, evaluate
from core.tools import SideEffect

__all__ = ["ToolsPage", "parse_fixed", "server_side"]

COLUMNS = ("Tool", "Pin", "Class", "Offered to hosts")
NAMED = re.compile(r"\s*\[\w+\]$")  # "... [UpstreamStartFailed]": an error's name at the end
Button = QMessageBox.StandardButton


class ToolsPage(QWidget):
    def __init__(self, state: SettingsState) -> None:
        super().__init__()
        self.state = state
        self.repin_dialog: RepinDialog | None = None
        self.question: QMessageBox | None = None  # the question asked before leaving (rule 3)
        self._repinning: ListedTool | None = None  # the tool the repin dialog shows
        # Choices not saved (rule 2): (server, tool) -> (the settings chosen, why not saved).
        self.failed: dict[tuple[str, str], tuple[dict[str, object], Problem]] = {}
        self._shown: tuple[str, str] | None = None  # the tool whose settings the detail shows
        self._server_shown = ""
        self._settling = False  # the page itself is changing the selection or the boxes
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(QLabel("Server"))
        self.server = QComboBox()
        # Bound methods, not lambdas holding self (see app/tray.py).
        self.server.currentIndexChanged.connect(self._server_changed)
        top.addWidget(self.server, 1)
        self.connect_button = QPushButton("Connect and list tools")
        self.connect_button.clicked.connect(self._connect)
        top.addWidget(self.connect_button)
        self.pin_all_button = QPushButton("Pin all new tools")
        self.pin_all_button.clicked.connect(self.pin_all_new)
        top.addWidget(self.pin_all_button)
        layout.addLayout(top)
        self.counts = QLabel()
        self.counts.setWordWrap(True)
        layout.addWidget(self.counts)
        self.message = message_label()
        layout.addWidget(self.message)
        self.instructions = InstructionsBox(state)
        layout.addWidget(self.instructions)

        # The list above the detail, each the page's full width (decision 0047): the list's
        # states are read whole beside a long tool name, the detail's text wraps.
        split = QSplitter(Qt.Orientation.Vertical)
        split.setChildrenCollapsible(False)
        split.addWidget(self._list())
        self.detail = ToolDetail()
        self._connect_detail(self.detail)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout.addWidget(split, 1)
        state.changed.connect(self._fill_servers)
        state.listed.connect(self._listed)
        self._fill_servers()

    # --- layout ----------------------------------------------------------------------------

    def _list(self) -> QWidget:
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        self.table = row_table(COLUMNS)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        # One line a row. The tool's name, the free text, takes the width the states leave
        # (elided in the middle, whole in its tooltip); the states are as wide as they are.
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        layout.addWidget(self.table, 1)
        bulk = QHBoxLayout()
        bulk.addWidget(QLabel("Selected tools:"))
        self.bulk_class = class_box(None)
        bulk.addWidget(self.bulk_class, 1)
        self.bulk_button = QPushButton("Classify")
        self.bulk_button.setToolTip("Give every selected tool this class, in one change")
        self.bulk_button.clicked.connect(self.classify_selected)
        bulk.addWidget(self.bulk_button)
        layout.addLayout(bulk)
        return box

    def _connect_detail(self, detail: ToolDetail) -> None:
        detail.side_effect.currentIndexChanged.connect(self._class_chosen)
        detail.policy.currentIndexChanged.connect(self._rule_chosen)
        detail.overrule.toggled.connect(self._overrule_chosen)
        detail.use_suggestion.clicked.connect(self.apply_suggestion)
        detail.retry.clicked.connect(self.retry_class)
        detail.pin_button.clicked.connect(self.pin_selected)
        detail.take_server_class.clicked.connect(self.resolve_with_server)
        detail.keep_my_class.clicked.connect(self.resolve_with_mine)
        detail.params.save_button.clicked.connect(self.save)

    # --- the server picker and its counts (rule 5) -----------------------------------------

    def server_name(self) -> str:
        return str(self.server.currentData() or "")

    def _fill_servers(self) -> None:
        current = self.server_name()
        names = list(self.state.config.servers)
        self.server.blockSignals(True)
        if [self.server.itemData(i) for i in range(self.server.count())] != names:
            self.server.clear()
            for name in names:
                self.server.addItem(name, name)
        self.server.setCurrentIndex(max(self.server.findData(current), 0))
        self.server.blockSignals(False)
        self._server_shown = self.server_name()
        self.refresh()

    def tally(self, name: str) -> tool_states.Tally | None:
        return tool_states.of_server(self.state.config, self.state.listings, name)

    def _show_counts(self) -> None:
        for i in range(self.server.count()):
            name = str(self.server.itemData(i))
            counted = self.tally(name)
            self.server.setItemText(
                i, f"{name}: {counted.short() if counted else 'not listed yet'}"
            )
        counted = self.tally(self.server_name())
        self.counts.setText(counted.long() if counted else "")

    def select_server(self, name: str) -> None:
        index = self.server.findData(name)
        if index >= 0:
            self.server.setCurrentIndex(index)
        if name not in self.state.listings:
            self._connect()

    def _listed(self, name: str) -> None:
        if name == self.server_name():
            error = self.state.errors.get(name, "")
            words = NAMED.sub("", error)  # the error's name in the tooltip only
            self.message.setText(f"Could not connect: {words}" if error else "")
            self.message.setToolTip(error)
            self.connect_button.setEnabled(True)
        self.refresh()

    def _server_changed(self, _index: int) -> None:
        if self.server_name() != self._server_shown and not self.may_leave():
            self.server.blockSignals(True)
            self.server.setCurrentIndex(max(self.server.findData(self._server_shown), 0))
            self.server.blockSignals(False)
            return
        self._server_shown = self.server_name()
        self.refresh()

    # --- the list --------------------------------------------------------------------------

    def rows(self) -> list[tuple[str, ListedTool | None, ToolConfig | None]]:
        """Each tool of the server: listed now, configured, or both."""
        name = self.server_name()
        server = self.state.config.servers.get(name)
        listing = self.state.listings.get(name)
        configured = dict(server.tools) if server else {}
        rows: list[tuple[str, ListedTool | None, ToolConfig | None]] = []
        for tool in listing.tools if listing else ():
            rows.append((tool.name, tool, configured.pop(tool.name, None)))
        rows += [(tool, None, cfg) for tool, cfg in sorted(configured.items())]
        return rows

    def refresh(self) -> None:
        chosen = self.selected_tools()
        name = self.server_name()
        listing = self.state.listings.get(name)
        if not name:
            self.message.setText("No server yet: add one on the Servers page.")
        elif listing is None and name not in self.state.errors:
            self.message.setText(
                "Connect to the server to see its tools' descriptions and schemas."
            )
        self.instructions.show_server(name)
        rows = self.rows()
        self._settling = True
        self.table.setRowCount(len(rows))
        for n, (tool, listed, cfg) in enumerate(rows):
            state = evaluate(listed, cfg) if listed else None
            pin = state.status if state else ("not listed now" if listing else "?")
            side = tool_states.class_text(cfg.side_effect if cfg else None)
            unsaved = self.failed.get((name, tool), ({}, None))[0]
            if "side_effect" in unsaved:
                side = f"{tool_states.class_text(_side(unsaved['side_effect']))} (not saved)"
            offered = tool_states.offered_words(state) if state else "-"
            for c, text in enumerate((tool, pin, side, offered)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if (c == 3 and state and not state.available) or "(not saved)" in text:
                    item.setForeground(Qt.GlobalColor.darkRed)
                self.table.setItem(n, c, item)
        for column in range(1, len(COLUMNS)):
            self.table.resizeColumnToContents(column)  # its header and every state whole
        self.select_tools(chosen)
        self._settling = False
        new = [t for t, listed, cfg in rows if listed and (cfg is None or cfg.pin is None)]
        self.pin_all_button.setEnabled(bool(new))
        self.connect_button.setEnabled(bool(name))
        self._show_counts()
        self._show_selected()

    def selected_tools(self) -> list[str]:
        """The tools selected, in the list's order."""
        rows = sorted(index.row() for index in self.table.selectionModel().selectedRows())
        items = [self.table.item(row, 0) for row in rows]
        return [item.text() for item in items if item is not None]

    def selected(self) -> str | None:
        """The tool selected, when one is."""
        tools = self.selected_tools()
        return tools[0] if len(tools) == 1 else None

    def select_tools(self, tools: list[str]) -> None:
        self.table.clearSelection()
        model = self.table.selectionModel()
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        for n in range(self.table.rowCount()):
            item = self.table.item(n, 0)
            if item and item.text() in tools:
                model.select(self.table.model().index(n, 0), flags)

    def select_tool(self, tool: str) -> None:
        self.select_tools([tool])

    def _selection_changed(self) -> None:
        if self._settling:
            return
        shown = self._shown
        if shown is not None and self.selected_tools() != [shown[1]] and not self.may_leave():
            self._settling = True
            self.select_tools([shown[1]])
            self._settling = False
            return
        self._show_selected()

    # --- the detail ------------------------------------------------------------------------

    def _current(self) -> tuple[str, ListedTool | None, ToolConfig | None] | None:
        tool = self.selected()
        return next((r for r in self.rows() if r[0] == tool), None) if tool else None

    def _show_selected(self) -> None:
        current = self._current()
        tools = self.selected_tools()
        self.bulk_button.setEnabled(bool(tools))
        self.bulk_button.setText(f"Classify {len(tools)} tools" if len(tools) > 1 else "Classify")
        if current is None:
            self._shown = None
            self.detail.show_nothing(tools)
            return
        shown = (self.server_name(), current[0])
        chosen, problem = self.failed.get(shown, ({}, None))
        self.detail.show_tool(shown[0], current, chosen, problem, again=shown == self._shown)
        self._shown = shown

    # --- saved as made (rules 1 and 2) -----------------------------------------------------

    def _save_settings(self, tools: list[str], settings: dict[str, object]) -> Problem | None:
        """Save ``settings`` for ``tools`` in one write: a class for any number of tools by
        ``manage.classify`` (all or none), anything else for one tool by ``manage.set_tool``.
        What cannot be saved is kept, with why (rule 2)."""
        server = self.server_name()
        value = settings.get("side_effect")
        if list(settings) == ["side_effect"] and value is not None:
            entries = [(tool, str(value)) for tool in tools]
            problem = self.state.save(lambda p: manage.classify(p, server, entries)[0])
        else:
            problem = self.state.save(lambda p: manage.set_tool(p, server, tools[0], **settings))
        before = dict(self.failed)
        for tool in tools:
            kept = self.failed.pop((server, tool), None)
            chosen = kept[0] if kept else {}
            if problem is not None and not problem.saved:
                self.failed[(server, tool)] = ({**chosen, **settings}, problem)
            elif kept and (left := {k: v for k, v in chosen.items() if k not in settings}):
                self.failed[(server, tool)] = (left, kept[1])  # the rest is still not saved
        if self.failed != before:
            self.refresh()  # the list marks what is not saved; the boxes keep the choice
        return problem

    def _set(self, said: str, **settings: object) -> str:
        """Save ``settings`` for the selected tool; "" when saved, else why not."""
        tool = self.selected()
        if tool is None:
            return "no tool selected"
        problem = self._save_settings([tool], settings)
        if problem is not None:
            say_not_saved(self.detail.class_message, problem)
            return str(problem)
        say(self.detail.class_message, f"Saved: {tool} {said}.")
        return ""

    def choose_class(self, value: str | None) -> str:
        """Classify the selected tool as ``value`` (None: no class); "" when saved."""
        side_effect = _side(value)
        said = f"the class “{class_words(side_effect)}”" if side_effect else "no class: not offered"
        return self._set(f"now has {said}", side_effect=value)

    def _class_chosen(self, _index: int) -> None:
        if not self.detail.settling:
            self.choose_class(self.detail.side_effect.currentData())

    def _rule_chosen(self, _index: int) -> None:
        if not self.detail.settling:
            rule = self.detail.policy.currentData()
            self._set(f"follows {f'always {rule}' if rule else 'its class rule'}", policy=rule)

    def _overrule_chosen(self, checked: bool) -> None:
        if not self.detail.settling:
            said = "keeps your class" if checked else "follows the server's hints again"
            self._set(said, overrule_annotations=checked)

    def retry_class(self) -> str:
        """Save again what was chosen for the selected tool and not saved."""
        tool = self.selected()
        chosen = self.failed.get((self.server_name(), tool or ""), ({}, None))[0]
        return self._set("now has what you chose", **chosen) if chosen else ""

    def classify_selected(self) -> str:
        """Give every selected tool the class chosen below the list, in one write."""
        tools = self.selected_tools()
        value = str(self.bulk_class.currentData())
        if not tools:
            return "no tool selected"
        problem = self._save_settings(tools, {"side_effect": value})
        if problem is not None:
            say_not_saved(self.message, problem)
            return str(problem)
        words = class_words(SideEffect(value))
        say(self.message, f"Saved: {', '.join(tools)} now {_have(tools)} the class “{words}”.")
        return ""

    def apply_suggestion(self) -> str:
        """Classify the selected tool as its server's hints suggest (rule 4)."""
        current = self._current()
        listed = current[1] if current else None
        suggested = classifying.suggested(listed.annotations) if listed else None
        if suggested is None:
            return "no suggestion"
        return self.choose_class(suggested.value)

    # --- the parameters, saved with a button (rule 3) --------------------------------------

    def save(self) -> str:
        """Save the parameters of the tool shown; "" when saved (or nothing to save)."""
        if self._shown is None:
            return "no tool selected"
        server, tool = self._shown
        listed = next((r[1] for r in self.rows() if r[0] == tool), None)
        schema = listed.input_schema if listed else None
        problem = self.detail.params.save(self.state, server, tool, schema)
        return "" if problem is None else str(problem)

    def unsaved(self) -> str:
        """What is not saved, in words, or ""."""
        said = []
        if self._shown is not None and self.detail.params.dirty:
            said.append(f"the parameters of {self._shown[1]} are changed and not saved")
        if self.failed:
            names = ", ".join(f"{s}/{t}" for s, t in self.failed)
            said.append(f"what you chose for {names} could not be saved")
        return "; ".join(said)

    def may_leave(self, closing: bool = False) -> bool:
        """Whether the page may show another tool, server, or (``closing``) close: asked when
        something is not saved (rules 2 and 3)."""
        params = self._shown is not None and self.detail.params.dirty
        if not params and not (closing and self.failed):
            return True
        said = self.unsaved() if closing else self.unsaved().split("; ")[0]
        buttons = Button.Discard | Button.Cancel | (Button.Save if params else Button.NoButton)
        self.question = QMessageBox(
            QMessageBox.Icon.Question, "Not saved", f"{said[0].upper()}{said[1:]}.", buttons, self
        )
        self.question.setInformativeText(
            "Save them, discard them, or stay here?" if params else "Close anyway?"
        )
        self.question.exec()
        answer = self.question.standardButton(self.question.clickedButton())
        self.question = None
        if answer == Button.Save:
            return self.save() == "" and not self.detail.params.dirty
        if answer == Button.Discard:
            if self._shown is not None:
                cfg = self.state.config.servers.get(self._shown[0])
                self.detail.params.show_tool(
                    (cfg.tools.get(self._shown[1]) if cfg else None) or ToolConfig()
                )
            if closing:
                self.failed.clear()
            return True
        return False

    # --- pins and conflicts ----------------------------------------------------------------

    def _connect(self) -> None:
        name = self.server_name()
        window = self.window()
        servers = getattr(window, "servers", None)
        if not name or servers is None:
            return
        self.connect_button.setEnabled(False)
        self.message.setText(f"Starting {name}…")
        servers.test(name)

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
                    f" shown: {e}"
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
        server = self.server_name()
        problem = self.state.save(lambda p: manage.pin(p, server, tools))
        if problem is not None:
            self.message.setToolTip(str(problem))
        self.message.setText(
            f"Not pinned: {problem.words}"
            if problem
            else f"Pinned {', '.join(t.name for t in tools)}."
        )

    def resolve_with_server(self) -> None:
        current = self._current()
        if current is None or current[1] is None:
            return
        theirs = server_side(current[1].annotations)
        self._set(f"now has the class “{class_words(theirs)}”", side_effect=theirs.value,
                  overrule_annotations=False)  # fmt: skip

    def resolve_with_mine(self) -> None:
        self._set("keeps your class; the hints are overruled", overrule_annotations=True)


def _have(tools: list[str]) -> str:
    return "have" if len(tools) > 1 else "has"


def _side(value: object) -> SideEffect | None:
    return SideEffect(str(value)) if value else None
