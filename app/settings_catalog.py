"""The prompts page: a server's prompts and resource templates, new, changed or pinned, and
pinning them (core/proxy/catalog.py rule 3, decision 0055).

Rules:

1. What the server lists is read by ``signoff servers catalog NAME --raw`` in a separate process
   (the window never waits on a server), and its raw answers with ``catalog.read``: the same
   code, over the same bytes, as the proxy and ``signoff pin``.
2. Pinning one saves it with ``manage.pin_catalog``, as ``signoff pin NAME --accept`` does (its
   text kept for the next diff, the configuration recorded); only the ones chosen are pinned.
3. A changed one shows its text as pinned beside the text listed now, when the text was kept.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from PySide6.QtCore import QProcess, QProcessEnvironment, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.connection import TIMEOUT_SECONDS, signoff_command
from app.settings import SettingsState
from app.widgets import message_label, row_table
from core.errors import SignoffError
from core.proxy import catalog, manage, pinstore

COLUMNS = ("Kind", "Name", "State")
KINDS = {"prompt_pins": (catalog.PROMPTS, "Prompt"),
         "template_pins": (catalog.TEMPLATES, "Resource template")}  # fmt: skip
STATES = {"new": "New: not offered until you pin it",
          "changed": "Changed since you pinned it: not offered until you pin it again",
          "pinned": "Pinned: offered when its kind is turned on"}  # fmt: skip


class CatalogPage(QWidget):
    listed = Signal(str)  # a server's prompts and templates were listed (or could not be)

    def __init__(self, state: SettingsState) -> None:
        super().__init__()
        self.state = state
        self.items: dict[str, list[tuple[str, catalog.Item]]] = {}  # server -> (table, item)
        self.process: QProcess | None = None
        layout = QVBoxLayout(self)
        intro = QLabel(
            "A server's prompts and resource templates are text your model reads, as a tool's"
            " description is. A new one, or one changed since you pinned it, is not offered"
            " until you pin it. Turn prompts and resources on in the server's editor."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        top = QHBoxLayout()
        top.addWidget(QLabel("Server"))
        self.server = QComboBox()
        self.server.currentIndexChanged.connect(self._server_changed)
        top.addWidget(self.server, 1)
        self.list_button = QPushButton("List them")
        self.list_button.clicked.connect(self.list_server)
        top.addWidget(self.list_button)
        layout.addLayout(top)
        self.table = row_table(COLUMNS)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.itemSelectionChanged.connect(self._show)
        layout.addWidget(self.table, 1)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        layout.addWidget(self.text, 1)
        row = QHBoxLayout()
        self.pin_button = QPushButton("Pin as shown")
        self.pin_button.clicked.connect(self.pin_selected)
        self.pin_button.setEnabled(False)
        row.addWidget(self.pin_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.message = message_label()
        layout.addWidget(self.message)
        state.changed.connect(self._fill_servers)
        self._fill_servers()

    # --- servers ---------------------------------------------------------------------------

    def server_name(self) -> str:
        return str(self.server.currentData() or "")

    def select_server(self, name: str) -> None:
        index = self.server.findData(name)
        if index >= 0:
            self.server.setCurrentIndex(index)

    def _fill_servers(self) -> None:
        shown = self.server_name()
        self.server.blockSignals(True)
        self.server.clear()
        for name in self.state.config.servers:
            self.server.addItem(name, name)
        self.server.setCurrentIndex(max(self.server.findData(shown), 0))
        self.server.blockSignals(False)
        self.refresh()

    def _server_changed(self, _index: int) -> None:
        self.message.setText("")
        self.refresh()

    # --- listing ---------------------------------------------------------------------------

    def list_server(self) -> None:
        """Start the server in a process of its own and read what it lists (rule 1)."""
        name = self.server_name()
        idle = QProcess.ProcessState.NotRunning
        if not name or (self.process is not None and self.process.state() != idle):
            return  # one listing at a time
        command = signoff_command()
        self.process = QProcess(self)
        self.process.setProcessEnvironment(QProcessEnvironment.systemEnvironment())
        self.process.setProgram(command[0])
        self.process.setArguments([*command[1:], "servers", "catalog", name, "--raw",
                                   "--timeout", str(TIMEOUT_SECONDS)])  # fmt: skip
        self.process.setProperty("server", name)
        self.process.finished.connect(self._finished)
        self.list_button.setEnabled(False)
        self.message.setText(f"Starting {name} to list its prompts and templates…")
        self.process.start()

    def _finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        process = self.process
        assert process is not None
        name = str(process.property("server"))
        self.list_button.setEnabled(True)
        out = bytes(process.readAllStandardOutput().data())
        err = bytes(process.readAllStandardError().data()).decode("utf-8", "replace")
        try:
            if code != 0:
                lines = [line for line in err.splitlines() if line.strip()]
                raise ValueError(lines[-1].removeprefix("signoff: ") if lines else f"code {code}")
            self.items[name], said = read(json.loads(out))
        except (ValueError, SignoffError) as e:
            self.items.pop(name, None)
            self.message.setText(f"Could not list the prompts and templates of {name}: {e}")
        else:
            self.message.setText(
                said or f"Listed {len(self.items[name])} from {name}. {offers(self.state, name)}"
            )
        self.refresh()
        self.listed.emit(name)

    # --- showing and pinning ---------------------------------------------------------------

    def status(self, table: str, item: catalog.Item) -> str:
        server = self.state.config.servers.get(self.server_name())
        return catalog.status(item, getattr(server, table) if server else {})

    def refresh(self) -> None:
        self.table.setRowCount(0)
        for table, item in self.items.get(self.server_name(), []):
            row = self.table.rowCount()
            self.table.insertRow(row)
            cells = (KINDS[table][1], item.key, STATES[self.status(table, item)])
            for column, text in enumerate(cells):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.table.resizeColumnToContents(0)
        self._show()

    def selected(self) -> list[tuple[str, catalog.Item]]:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        listed = self.items.get(self.server_name(), [])
        return [listed[row] for row in rows if row < len(listed)]

    def select(self, *keys: str) -> None:
        self.table.clearSelection()
        mode = self.table.selectionMode()
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        for row, (_, item) in enumerate(self.items.get(self.server_name(), [])):
            if item.key in keys:
                self.table.selectRow(row)
        self.table.setSelectionMode(mode)

    def _show(self) -> None:
        chosen = self.selected()
        self.pin_button.setEnabled(any(self.status(t, i) != "pinned" for t, i in chosen))
        if len(chosen) != 1:
            self.text.setPlainText("" if not chosen else f"{len(chosen)} chosen.")
            return
        table, item = chosen[0]
        shown = f"As the server lists it now:\n{item.raw.decode('utf-8', 'replace')}"
        if self.status(table, item) == "changed":  # rule 3
            server = self.state.config.servers[self.server_name()]
            kept = pinstore.kept_item(manage.pins_dir(self.state.config_path),
                                      getattr(server, table)[item.key])  # fmt: skip
            before = kept.decode("utf-8", "replace") if kept else "(its text was not kept)"
            shown += f"\n\nAs you pinned it:\n{before}"
        self.text.setPlainText(shown)

    def pin_selected(self) -> None:
        """Pin the chosen ones as listed (rule 2), each kind in one change."""
        server = self.server_name()
        chosen = [(t, i) for t, i in self.selected() if self.status(t, i) != "pinned"]
        for table in KINDS:
            items = [i for t, i in chosen if t == table]
            if not items:
                continue
            error = self.state.apply(
                lambda p, table=table, items=items: manage.pin_catalog(p, server, table, items)
            )
            if error:
                self.message.setText(f"Not pinned: {error}")
                return
        if chosen:
            self.message.setText(f"Pinned {', '.join(i.key for _, i in chosen)}.")
        self.refresh()


def offers(state: SettingsState, name: str) -> str:
    """Whether the server's prompts and resources are turned on, in a sentence."""
    server = state.config.servers.get(name)
    if server is None:
        return ""
    kinds = {"prompts": server.prompts, "resources": server.resources}
    return " ".join(f"Its {k} are {'on' if on else 'off'}." for k, on in kinds.items())


def read(line: Any) -> tuple[list[tuple[str, catalog.Item]], str]:
    """The items of ``signoff servers catalog --raw``'s line, and what could not be read."""
    if not isinstance(line, dict):
        raise ValueError("the listing could not be read")
    found: list[tuple[str, catalog.Item]] = []
    said = [f"{KINDS[t][1]}s not listed: {why}" for t, why in (line.get("errors") or {}).items()
            if t in KINDS]  # fmt: skip
    for table, (kind, words) in KINDS.items():
        if table not in line:
            continue
        listed = catalog.read([base64.b64decode(page) for page in line[table]], kind)
        found += [(table, item) for item in listed.items]
        said += [f"{words} {what} left out: {why}" for what, why in listed.dropped]
    return found, "; ".join(said)
