"""The servers page: each configured server with its state; add, edit, remove, test."""

from __future__ import annotations

import shlex
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.connection import TIMEOUT_SECONDS, ConnectionTest
from app.settings import SettingsState
from app.widgets import message_label, row_table
from core import paths
from core.proxy import instructions, manage, remote, status
from core.proxy.config import ServerConfig
from core.proxy.pins import Listing, evaluate

COLUMNS = ("Server", "Command", "Tools", "Needs you", "Last connection")
NAME, COMMAND, TOOLS, NEEDS, LAST = range(len(COLUMNS))
# The free-text columns are kept this narrow (elided in the middle, whole in the tooltip) so
# that the state columns beside them are always read whole; the operator may widen them.
FREE_TEXT_WIDTH = {NAME: 180, COMMAND: 240, LAST: 260}
EDITOR_WIDTH = 640  # the add-server dialog: room for a command line and its test's outcome


def _counts(server: ServerConfig, listing: Listing, handshake: dict[str, Any]) -> dict[str, int]:
    counts = {"pinned": 0, "new": 0, "changed": 0, "unclassified": 0, "conflicts": 0}
    told = instructions.evaluate(handshake, server.instructions_pin)
    counts["instructions"] = int(told.status in (instructions.NEW, instructions.CHANGED))
    for tool in listing.tools:
        state = evaluate(tool, server.tools.get(tool.name))
        counts[state.status] += 1
        if state.side_effect is None:
            counts["unclassified"] += 1
        if state.reason.startswith("annotation conflict"):
            counts["conflicts"] += 1
    return counts


def describe(counts: dict[str, int]) -> tuple[str, str]:
    """(the tools' pin states, what needs the operator) for a row."""
    tools = f"{counts['pinned']} pinned, {counts['new']} new, {counts['changed']} changed"
    needs = [
        f"{counts['unclassified']} unclassified" if counts["unclassified"] else "",
        f"{counts['conflicts']} annotation conflicts" if counts["conflicts"] else "",
        f"{review} to review" if (review := counts["new"] + counts["changed"]) else "",
        "instructions to review" if counts.get("instructions") else "",
    ]
    return tools, ", ".join(n for n in needs if n) or "nothing"


class ServerEditor(QDialog):
    """Add or edit one server: name, command, arguments, and the variables passed through."""

    connection_done = Signal()  # a test of the command listed its tools or failed

    def __init__(self, state: SettingsState, name: str | None, parent: QWidget | None) -> None:
        super().__init__(parent)
        self.state = state
        self.original = name
        self.setWindowTitle(f"Edit server {name}" if name else "Add a server")
        server = state.config.servers.get(name) if name else None
        self.setMinimumWidth(EDITOR_WIDTH)
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.name = QLineEdit(name or "")
        self.name.setPlaceholderText("letters, digits, - and _: the name your MCP host will use")
        self.command = QLineEdit(server.command if server else "")
        self.command.setPlaceholderText("npx, uvx, or a path")
        self.args = QLineEdit(shlex.join(server.args) if server else "")
        self.args.setPlaceholderText("as in a shell: -y @modelcontextprotocol/server-memory")
        self.env = QLineEdit(" ".join(server.env) if server else "")
        self.env.setPlaceholderText("names only, e.g. GITHUB_TOKEN; values are never stored")
        form.addRow("Name", self.name)
        form.addRow("Command", self.command)
        form.addRow("Arguments", self.args)
        form.addRow("Variables passed through", self.env)
        # Off until the operator turns them on (decision 0055); pinned with the tools.
        self.prompts = QCheckBox("Offer its prompts to hosts, once pinned")
        self.resources = QCheckBox("Offer its resources to hosts; each read is recorded")
        self.prompts.setChecked(bool(server and server.prompts))
        self.resources.setChecked(bool(server and server.resources))
        form.addRow("Beside its tools", self.prompts)
        form.addRow("", self.resources)
        # Off until the operator allows it (decision 0057): the server's own path to the model.
        self.sampling = QCheckBox("Let it ask your host's model (sampling); each ask is recorded")
        self.sampling.setChecked(bool(server and server.sampling))
        form.addRow("", self.sampling)
        self.test_button = QPushButton("Test connection")
        self.test_button.clicked.connect(self.test)
        test_row = QHBoxLayout()
        test_row.addWidget(self.test_button)
        test_row.addStretch(1)
        form.addRow("", test_row)
        # On a row of its own, the whole width: a server's error or tool list can be long.
        self.outcome = message_label()
        form.addRow(self.outcome)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        self.connection: ConnectionTest | None = None
        self.listing: Listing | None = None  # what the last test listed, for self.tested
        self.handshake: dict[str, Any] = {}
        self.tested: ServerConfig | None = None

    def say(self, text: str) -> None:
        """Show the outcome of a test or a save, growing the dialog so that it is read whole."""
        self.outcome.setText(text)
        layout = self.layout()
        need = layout.totalHeightForWidth(self.width()) if layout is not None else -1
        if need > self.height():
            room = self.screen().availableGeometry().height() - 60  # its frame stays on screen
            self.resize(self.width(), min(need, room))

    def server(self) -> ServerConfig:
        """The server as the fields say (may raise ValueError for unbalanced quotes)."""
        return ServerConfig(
            self.name.text().strip(),
            self.command.text().strip(),
            tuple(shlex.split(self.args.text())),
            tuple(self.env.text().replace(",", " ").split()),
        )

    def test(self) -> None:
        try:
            server = self.server()
        except ValueError as e:
            self.say(f"The arguments cannot be read: {e}")
            return
        if not server.command:
            self.say("Give the command first.")
            return
        if self.connection is not None and self.connection.running:
            self.connection.cancel()
        self.listing, self.tested = None, server
        self.connection = ConnectionTest(server.name or "test", server, parent=self)
        self.connection.listed.connect(self._listed)
        self.connection.failed.connect(self._failed)
        self.say("Starting the server…")
        self.test_button.setEnabled(False)
        self.connection.start()

    def _listed(self, name: str, listing: Listing, handshake: dict[str, Any]) -> None:
        self.test_button.setEnabled(True)
        names = ", ".join(t.name for t in listing.tools) or "no tools"
        dropped = f"; {len(listing.dropped)} malformed tools left out" if listing.dropped else ""
        self.say(f"Connected: {len(listing.tools)} tools ({names}){dropped}.")
        self.listing, self.handshake = listing, handshake
        self.connection_done.emit()

    def _failed(self, name: str, why: str) -> None:
        self.test_button.setEnabled(True)
        self.say(f"Could not connect: {why}")
        self.connection_done.emit()

    def save(self) -> None:
        try:
            server = self.server()
        except ValueError as e:
            self.say(f"The arguments cannot be read: {e}")
            return
        if self.original is None:
            error = self.state.apply(
                lambda p: manage.add_server(p, server.name, server.command, server.args, server.env)
            )
        else:
            original = self.original
            error = self.state.apply(
                lambda p: manage.edit_server(
                    p,
                    original,
                    command=server.command,
                    args=server.args,
                    env=server.env,
                    new_name=server.name,
                )
            )
        now = self.state.config.servers.get(server.name)
        offer = {"prompts": self.prompts.isChecked(), "resources": self.resources.isChecked()}
        if not error and now is not None and offer != {k: getattr(now, k) for k in offer}:
            error = self.state.apply(lambda p: manage.set_offer(p, server.name, **offer))
        sampling = self.sampling.isChecked()
        if not error and now is not None and sampling != now.sampling:
            error = self.state.apply(lambda p: manage.set_sampling(p, server.name, on=sampling))
        if error:
            self.say(f"Not saved: {error}")
            return
        if self.connection is not None and self.connection.running:
            self.connection.cancel()
        if self.listing is not None and self.tested == server:
            self.state.listings[server.name] = self.listing
            self.state.handshakes[server.name] = self.handshake
        self.accept()

    def done(self, result: int) -> None:
        if self.connection is not None and self.connection.running:
            self.connection.cancel()
        super().done(result)


class ServersPage(QWidget):
    show_tools = Signal(str)

    def __init__(self, state: SettingsState) -> None:
        super().__init__()
        self.state = state
        self.tests: dict[str, ConnectionTest] = {}
        self.editor: ServerEditor | None = None
        self.timeout = TIMEOUT_SECONDS  # how long a server may take to list its tools
        layout = QVBoxLayout(self)
        intro = QLabel(
            "The MCP servers Signoff starts for your hosts. A tool is offered only once you"
            " pinned and classified it; test a server to see its tools."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.table = row_table(COLUMNS)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a command's both ends
        self.table.setWordWrap(False)
        # Bound methods, not lambdas or partials holding self (see app/tray.py).
        self.table.doubleClicked.connect(self._row_double_clicked)
        layout.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.add_button = QPushButton("Add…")
        self.edit_button = QPushButton("Edit…")
        self.remove_button = QPushButton("Remove")
        self.test_button = QPushButton("Test connection")
        self.tools_button = QPushButton("Tools…")
        for button, action in (
            (self.add_button, self.add),
            (self.edit_button, self.edit),
            (self.remove_button, self.remove),
            (self.test_button, self.test_selected),
            (self.tools_button, self._tools),
        ):
            button.clicked.connect(action)
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        self.message = message_label()
        layout.addWidget(self.message)
        state.changed.connect(self.refresh)
        state.listed.connect(self._server_listed)
        self.refresh()

    # --- the table ------------------------------------------------------------------------

    def refresh(self) -> None:
        selected = self.selected()
        servers = list(self.state.config.servers.values())
        self.table.setRowCount(len(servers))
        status_dir = paths.data_dir() / "status"
        for n, server in enumerate(servers):
            listing = self.state.listings.get(server.name)
            last = status.read(status_dir, server.name) if listing is None else None
            error = self.state.errors.get(server.name) or (last.error if last else "")
            if server.name in self.tests and self.tests[server.name].running:
                tools, needs, seen = "…", "…", "testing…"
            elif listing is not None:
                handshake = self.state.handshakes.get(server.name, {})
                tools, needs = describe(_counts(server, listing, handshake))
                seen = f"listed {len(listing.tools)} tools just now"
            elif last is not None and last.tools:
                tools, needs = describe(last.summary(server))
                seen = f"{last.at[:19].replace('T', ' ')} UTC"
            else:
                tools, needs, seen = f"{len(server.tools)} configured", "a test", "never"
            if error:
                seen = f"failed: {error}"
            started = (
                shlex.join([server.command, *server.args])
                if server.command
                else remote.shown(server.url)
            )
            cells = (server.name, started, tools, needs, seen)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if c == 4 and error:
                    item.setForeground(Qt.GlobalColor.red)
                self.table.setItem(n, c, item)
            if server.name == selected:
                self.table.selectRow(n)
        self.table.resizeColumnsToContents()
        for column, width in FREE_TEXT_WIDTH.items():
            self.table.setColumnWidth(column, min(self.table.columnWidth(column), width))
        has = bool(servers)
        for button in (self.edit_button, self.remove_button, self.test_button, self.tools_button):
            button.setEnabled(has)

    def selected(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            item = self.table.item(rows[0].row(), 0)
            return item.text() if item else None
        return None

    def select(self, name: str) -> None:
        for n in range(self.table.rowCount()):
            item = self.table.item(n, 0)
            if item and item.text() == name:
                self.table.selectRow(n)

    # --- actions --------------------------------------------------------------------------

    def add(self) -> ServerEditor:
        return self._open_editor(None)

    def edit(self) -> ServerEditor | None:
        name = self.selected()
        return self._open_editor(name) if name else None

    def _open_editor(self, name: str | None) -> ServerEditor:
        self.editor = ServerEditor(self.state, name, self)
        self.editor.accepted.connect(self._editor_accepted)
        self.editor.open()
        return self.editor

    def _editor_accepted(self) -> None:
        editor = self.sender()
        if isinstance(editor, ServerEditor):
            self._saved(editor)

    def _saved(self, editor: ServerEditor) -> None:
        name = editor.server().name
        self.message.setText(f"Saved {name}. Next: review and pin its tools.")
        self.refresh()
        self.select(name)

    def remove(self) -> None:
        name = self.selected()
        if name is None:
            return
        error = self.state.apply(lambda p: manage.remove_server(p, name))
        self.state.listings.pop(name, None)
        self.state.handshakes.pop(name, None)
        self.message.setText(f"Not removed: {error}" if error else f"Removed {name}.")

    def test_selected(self) -> ConnectionTest | None:
        name = self.selected()
        return self.test(name) if name else None

    def test(self, name: str) -> ConnectionTest:
        """Start a server and list its tools, without blocking the window."""
        old = self.tests.get(name)
        if old is not None and old.running:
            return old
        test = ConnectionTest(name, timeout=self.timeout, parent=self)
        test.listed.connect(self._listed)
        test.failed.connect(self._failed)
        self.tests[name] = test
        self.message.setText(f"Starting {name}…")
        test.start()
        self.refresh()
        return test

    def _listed(self, name: str, listing: Listing, handshake: dict[str, Any]) -> None:
        self.state.listings[name] = listing
        self.state.handshakes[name] = handshake
        self.state.errors.pop(name, None)
        dropped = "".join(f"\nleft out {what}: {why}" for what, why in listing.dropped)
        self.message.setText(f"{name} lists {len(listing.tools)} tools.{dropped}")
        self.state.listed.emit(name)

    def _failed(self, name: str, why: str) -> None:
        self.state.errors[name] = why
        self.message.setText(f"{name}: could not connect: {why}")
        self.state.listed.emit(name)

    def cancel_tests(self) -> None:
        for test in self.tests.values():
            if test.running:
                test.cancel()

    def _row_double_clicked(self, _index: QModelIndex) -> None:
        self._tools()

    def _server_listed(self, _server: str) -> None:
        self.refresh()

    def _tools(self) -> None:
        name = self.selected()
        if name:
            self.show_tools.emit(name)
