"""The settings window: servers, their tools, the policy, and the MCP hosts.

Everything here is also a terminal command and lands in the same TOML: each change goes
through ``core.proxy.manage``, which validates the whole file before writing it, so a refused
change is shown and leaves the file as it was. A change of the rules is recorded in the audit
chain. Connections to servers run in a separate process (``app.connection``).
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QLabel, QTabWidget, QVBoxLayout, QWidget

from core.errors import SignoffError
from core.proxy import config as configuration
from core.proxy import manage
from core.proxy.pins import Listing
from core.store import Store

log = logging.getLogger("signoff.app")


def said(error: Exception) -> str:
    """An error as a window says it: its message, for a person; the error's name (for a bug
    report) goes to the log, never into the window's text."""
    log.info("refused: %s: %s", type(error).__name__, error)
    return str(error)


class SettingsState(QObject):
    """What the pages share: the file, the store, and the listings seen in this window."""

    changed = Signal()  # the configuration was saved
    listed = Signal(str)  # a server's tools were listed (or its connection failed)
    recheck = Signal()  # the operator asked to re-check the history against the new rules

    def __init__(self, config_path: Path, store: Store | None) -> None:
        super().__init__()
        self.config_path = config_path
        self.store = store
        self.listings: dict[str, Listing] = {}
        self.handshakes: dict[str, dict[str, Any]] = {}  # each server's initialize result
        self.errors: dict[str, str] = {}  # server -> why its last test failed
        self.config = configuration.Config()
        self.load_error = ""
        self.reload()

    def reload(self) -> None:
        try:
            self.config = configuration.load(self.config_path)
            self.load_error = ""
        except SignoffError as e:
            self.load_error = said(e)

    def apply(self, change: Callable[[Path], configuration.Config]) -> str:
        """Run one change; "" when saved, else what refused it (and nothing changed)."""
        before = self.config
        try:
            after = change(self.config_path)
        except (SignoffError, ValueError) as e:
            return said(e)
        self.config = after
        if self.store is not None:
            try:
                manage.record_policy_change(
                    self.store, before, after, by=f"operator:{getpass.getuser()}"
                )
            except SignoffError as e:  # saved, but not recorded: say so
                log.warning("the policy change was saved but not recorded: %s", e)
                self.changed.emit()
                return f"saved, but not recorded in the history: {said(e)}"
        self.changed.emit()
        return ""


class SettingsWindow(QDialog):
    def __init__(
        self, config_path: Path, store: Store | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        from app.settings_hosts import HostsPage
        from app.settings_policy import PolicyPage
        from app.settings_servers import ServersPage
        from app.settings_tools import ToolsPage

        self.setWindowTitle("Signoff settings")
        self.resize(1040, 700)  # fits a 1280x800 screen (and 2560x1600 at 200%) with its frame
        self.setMinimumSize(720, 480)
        self.state = SettingsState(config_path, store)
        layout = QVBoxLayout(self)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020;")
        self.problem.setVisible(bool(self.state.load_error))
        self.problem.setText(
            f"The configuration cannot be read, so nothing here can be saved: "
            f"{self.state.load_error}"
        )
        layout.addWidget(self.problem)
        self.tabs = QTabWidget()
        self.servers = ServersPage(self.state)
        self.tools = ToolsPage(self.state)
        self.policy = PolicyPage(self.state)
        self.hosts = HostsPage(config_path)
        self.hosts.servers_changed.connect(self._reloaded)
        self.servers.show_tools.connect(self._show_tools)
        for page, title in (
            (self.servers, "Servers"),
            (self.tools, "Tools"),
            (self.policy, "Policy"),
            (self.hosts, "MCP hosts"),
        ):
            self.tabs.addTab(page, title)
        layout.addWidget(self.tabs)

    def _reloaded(self) -> None:
        self.state.reload()
        self.state.changed.emit()

    def _show_tools(self, server: str) -> None:
        self.tools.select_server(server)
        self.tabs.setCurrentWidget(self.tools)

    def closeEvent(self, event: Any) -> None:
        self.servers.cancel_tests()
        super().closeEvent(event)
