"""The settings page for MCP hosts: import a host's servers into Signoff, wire the host to
launch ``signoff proxy`` in their place, undo that write.

Everything is ``core.hosts``, the same functions as ``signoff hosts``; the files are small and
local, so the work is done on the click. A refused read or write is said on the page (never in
a modal box) and changes nothing. Importing and writing ask first in a dialog that is opened,
not executed (``self.dialog``), so nothing waits on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.widgets import message_label
from app.words import said
from core import paths
from core.errors import SignoffError
from core.host_backups import Backup, undo, write_wire
from core.host_tools import ServerTools, after_wiring, of_server
from core.hosts import (
    Action,
    Host,
    HostConfigError,
    HostFile,
    ImportItem,
    apply_import,
    default_paths,
    existing_path,
    plan_import,
    plan_wire,
    read_host,
    signoff_command,
)
from core.proxy import config as configuration
from core.proxy import remote

COLUMNS = ("Host's server", "Signoff server", "What happens")
CHECKABLE = (Action.IMPORT, Action.IMPORTED)
PREFIX = {Action.SKIPPED: "skipped: ", Action.WIRED: "skipped: ", Action.CONFLICT: "conflict: "}


class ConfirmDialog(QDialog):
    """A text to read before one action: ``accept_button`` does it, Cancel does not. With a
    ``warning``, the action is also confirmed on its own (``confirm_box``) before it can be
    done."""

    def __init__(
        self,
        title: str,
        intro: str,
        text: str,
        accept: str,
        parent: QWidget,
        warning: tuple[str, str] | None = None,  # (what is lost, "do it anyway" in words)
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(760, 520)
        layout = QVBoxLayout(self)
        label = QLabel(intro)
        label.setWordWrap(True)
        layout.addWidget(label)
        self.warning = QLabel(warning[0] if warning else "")
        self.warning.setWordWrap(True)
        self.warning.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warning.setStyleSheet("color: #b00020;")
        self.warning.setVisible(warning is not None)
        layout.addWidget(self.warning)
        self.confirm_box = QCheckBox(warning[1] if warning else "")
        self.confirm_box.setVisible(warning is not None)
        layout.addWidget(self.confirm_box)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlainText(text)
        layout.addWidget(self.text, 1)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.accept_button = QPushButton(accept)
        for button in (self.cancel_button, self.accept_button):
            button.setAutoDefault(False)
            buttons.addWidget(button)
        layout.addLayout(buttons)
        self.cancel_button.clicked.connect(self.reject)
        self.accept_button.clicked.connect(self.accept)
        if warning is not None:
            self.accept_button.setEnabled(False)
            self.confirm_box.toggled.connect(self.accept_button.setEnabled)


class HostsPage(QWidget):
    servers_changed = Signal()  # an import or a wire changed Signoff's configuration

    def __init__(self, config_path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.config_path = config_path
        self.hostfile: HostFile | None = None
        self.items: list[ImportItem] = []
        self.boxes: list[QTableWidgetItem] = []  # column 0 of each row, checkable or not
        self.dialog: ConfirmDialog | None = None  # the confirmation open now, if any
        self.error: SignoffError | None = None  # what refused the last action, if anything
        self.kept: dict[str, ServerTools] = {}  # per entry read: what its host keeps once wired

        layout = QVBoxLayout(self)
        intro = QLabel(
            "Import the servers an MCP host starts, then wire the host to start them through"
            " Signoff. Signoff keeps a copy of the file before it writes, and Undo puts it back."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)

        row = QHBoxLayout()
        self.host_box = QComboBox()
        for host in Host:
            self.host_box.addItem(host.label, host.value)
        row.addWidget(QLabel("Host"))
        row.addWidget(self.host_box)
        self.file_edit = QLineEdit()
        self.file_edit.setPlaceholderText("the host's configuration file")
        row.addWidget(self.file_edit, 1)
        self.choose_button = QPushButton("Choose file…")
        self.read_button = QPushButton("Read")
        row.addWidget(self.choose_button)
        row.addWidget(self.read_button)
        layout.addLayout(row)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.verticalHeader().setVisible(False)
        # What happens to a server's tools is said whole: the row grows, the text wraps.
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        layout.addWidget(self.table, 1)

        actions = QHBoxLayout()
        self.import_button = QPushButton("Import selected")
        self.wire_button = QPushButton("Wire selected…")
        self.undo_button = QPushButton("Undo last write")
        for button in (self.import_button, self.wire_button, self.undo_button):
            actions.addWidget(button)
        actions.addStretch(1)
        layout.addLayout(actions)

        self.message = message_label()
        layout.addWidget(self.message)

        self.host_box.currentIndexChanged.connect(self._host_chosen)
        self.choose_button.clicked.connect(self._choose_file)
        self.read_button.clicked.connect(self.read)
        self.import_button.clicked.connect(self.import_selected)
        self.wire_button.clicked.connect(self.wire_selected)
        self.undo_button.clicked.connect(self.undo_last)
        self._host_chosen()

    # --- choosing and reading ----------------------------------------------------------------

    def host(self) -> Host:
        return Host(self.host_box.currentData())

    def path(self) -> Path:
        return Path(self.file_edit.text().strip()).expanduser()

    def _host_chosen(self) -> None:
        host = self.host()
        self.file_edit.setText(str(existing_path(host) or default_paths(host)[0]))
        self._show(None, [])
        self._say("")

    def _choose_file(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self, f"{self.host().label} configuration", self.file_edit.text(), "JSON (*.json)"
        )
        if name:
            self.file_edit.setText(name)
            self.read()

    def read(self) -> bool:
        """Read the file and list its servers with what would happen to each."""
        try:
            hostfile = read_host(self.path(), self.host())
            config = configuration.load(self.config_path)
            items = plan_import(hostfile, config)
        except SignoffError as e:
            self._show(None, [])
            self._refused(e)
            return False
        status_dir = paths.data_dir() / "status"
        self.kept = {
            item.key: of_server(item.key, item.name, config, status_dir)
            for item in items
            if item.action in CHECKABLE
        }
        self._show(hostfile, items)
        note = " It has comments: Signoff can read it, not write it." if hostfile.jsonc else ""
        self._say(f"{len(items)} servers in {hostfile.path}.{note}")
        return True

    def _show(self, hostfile: HostFile | None, items: list[ImportItem]) -> None:
        self.hostfile, self.items = hostfile, items
        if hostfile is None:
            self.kept = {}
        self.boxes = []
        self.table.setRowCount(len(items))
        for row, item in enumerate(items):
            entry = QTableWidgetItem(item.key)
            self.boxes.append(entry)
            if item.action in CHECKABLE:
                entry.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
                entry.setCheckState(Qt.CheckState.Checked)
            else:
                entry.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.table.setItem(row, 0, entry)
            self.table.setItem(row, 1, QTableWidgetItem(item.name or "-"))
            what = PREFIX.get(item.action, "") + item.reason
            kept = self.kept.get(item.key)
            if item.url and item.name:  # a remote server: imported, never wired here
                what += ". Not wired: edit the host's entry by hand."
            elif kept is not None:
                what += f". Once wired: {kept.sentence()}."
            cell = QTableWidgetItem(what)
            cell.setToolTip(what)
            self.table.setItem(row, 2, cell)

    def checked(self) -> list[str]:
        """The keys of the checked servers."""
        return [
            item.key
            for item, box in zip(self.items, self.boxes, strict=True)
            if box.checkState() == Qt.CheckState.Checked
        ]

    def set_checked(self, key: str, on: bool) -> None:
        state = Qt.CheckState.Checked if on else Qt.CheckState.Unchecked
        for item, box in zip(self.items, self.boxes, strict=True):
            if item.key == key:
                box.setCheckState(state)

    # --- the actions -------------------------------------------------------------------------

    def import_selected(self) -> None:
        """Ask, then import the checked servers Signoff does not have yet."""
        keys = [k for k in self.checked() if self._item(k).action is Action.IMPORT]
        if self.hostfile is None or not keys:
            self._say("Nothing to import: read a file and check servers Signoff does not have.")
            return
        lines = []
        for key in keys:
            item = self._item(key)
            env = f"  (passes on {', '.join(item.env)})" if item.env else ""
            what = remote.shown(item.url) if item.url else " ".join([item.command, *item.args])
            lines.append(f"{item.name}: {what}{env}")
        items = list(self.items)

        def do() -> None:
            try:
                names = apply_import(self.config_path, items, keys)
            except SignoffError as e:
                self._refused(e)
                return
            self.servers_changed.emit()
            self.read()
            self._say(f"Imported {', '.join(names)}. Review and pin their tools next.")

        self._confirm(
            "Import servers",
            f"These servers will be added to {self.config_path} (variables by name only):",
            "\n".join(lines),
            "Import",
            do,
        )

    def wire_selected(self) -> None:
        """Show what the file would become; write it when the operator says so."""
        wired = [k for k in self.checked() if not self._item(k).url]  # a remote one: imported
        if self.hostfile is None or not wired:
            self._say("Nothing to wire: read a file and check the servers to wire (a remote"
                      " server is imported, not wired).")  # fmt: skip
            return
        try:
            config = configuration.load(self.config_path)
            plan = plan_wire(self.hostfile, wired, signoff_command(), config=config)
            if not plan.writable:
                raise HostConfigError(
                    f"{plan.hostfile.path} has comments or trailing commas, which Signoff would"
                    " lose: remove them and try again, or change the file by hand"
                )
        except SignoffError as e:
            self._refused(e)
            return
        if not plan.changed:
            self._say("Nothing to change: these servers already go through Signoff.")
            return
        imported = [item.name for item in plan.imports]
        losing = [
            kept
            for kept in after_wiring(plan.wired, config, paths.data_dir() / "status")
            if kept.loses
        ]

        def do() -> None:
            try:
                backup = write_wire(plan, self.config_path)
            except SignoffError as e:
                self._refused(e)
                return
            if imported:
                self.servers_changed.emit()
            self.read()
            self._say(
                f"Wrote {plan.hostfile.path}; the original is kept at {backup.backup}."
                f" Restart {plan.hostfile.host.label} to use it."
            )

        also = f" Signoff will first import {', '.join(imported)}." if imported else ""
        self._confirm(
            "Wire the host",
            f"{plan.hostfile.path} will be changed as shown; a copy of it is kept first.{also}",
            plan.diff,
            "Write",
            do,
            _losses(losing, plan.hostfile.host.label) if losing else None,
        )

    def undo_last(self) -> Backup | None:
        """Restore the file as it was before Signoff's last write to it."""
        try:
            restored = undo(self.path(), self.config_path)
        except SignoffError as e:
            self._refused(e)
            return None
        self.read()
        self._say(f"Restored {restored.original} from {restored.backup}.")
        return restored

    # --- helpers -----------------------------------------------------------------------------

    def _item(self, key: str) -> ImportItem:
        return next(item for item in self.items if item.key == key)

    def _confirm(
        self,
        title: str,
        intro: str,
        text: str,
        accept: str,
        then: Callable[[], None],
        warning: tuple[str, str] | None = None,
    ) -> None:
        if self.dialog is not None:
            self.dialog.reject()
        dialog = ConfirmDialog(title, intro, text, accept, self, warning)
        dialog.accepted.connect(then)
        dialog.finished.connect(self._confirm_finished)  # bound: see app/tray.py
        self.dialog = dialog
        dialog.open()

    def _confirm_finished(self, _result: int) -> None:
        dialog = self.sender()
        if isinstance(dialog, ConfirmDialog):
            self._closed(dialog)

    def _closed(self, dialog: ConfirmDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    def _say(self, text: str) -> None:
        self.error = None
        self.message.setStyleSheet("")
        self.message.setText(text)

    def _refused(self, e: SignoffError) -> None:
        self.error = e
        self.message.setStyleSheet("color: #b00020;")
        self.message.setText(said(e))
        self.message.setToolTip(type(e).__name__)


def _losses(losing: list[ServerTools], host: str) -> tuple[str, str]:
    """What the host would lose, in words for the window (no commands), and the confirmation."""
    lines = [f"{host} would lose tools that Signoff does not offer yet:"]
    for kept in losing:
        what = "all of its tools" if kept.today is None else ", ".join(kept.lost)
        said = kept.sentence(names=False)
        lines.append(f"• {kept.key} would lose {what}. {said[:1].upper()}{said[1:]}.")
    lines.append(
        "To keep them, cancel; import any server Signoff does not have yet, pin and classify"
        " its tools on the Tools page, then wire again."
    )
    confirm = f"Wire anyway: {host} goes without these tools until they are pinned and classified"
    return "\n".join(lines), confirm
