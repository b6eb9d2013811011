"""The settings window: servers, their tools, the policy, the rules, and the MCP hosts.

Everything here is also a terminal command and lands in the same TOML: each change goes
through ``core.proxy.manage``, which validates the whole file before writing it, so a refused
change is shown and leaves the file as it was. A change of the rules is recorded in the audit
chain. Connections to servers run in a separate process (``app.connection``).
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QLabel, QTabWidget, QVBoxLayout, QWidget

from app.words import said
from core.errors import ConfigChangedOutside, SignoffError
from core.proxy import config as configuration
from core.proxy import manage
from core.proxy.pins import Listing
from core.store import Store

log = logging.getLogger("signoff.app")


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
        """Run one change; "" when saved, else what refused it, in words (and nothing
        changed)."""
        problem = self.save(change)
        return "" if problem is None else problem.words

    def save(self, change: Callable[[Path], configuration.Config]) -> Problem | None:
        """Run one change, as the CLI does (``core.proxy.manage``: one write of the file, its
        configuration recorded, then the change of the rules recorded); None when saved and
        recorded, else what went wrong (``saved`` says whether the file was written)."""
        before = self.config
        try:
            after = change(self.config_path)
        except (SignoffError, ValueError) as e:
            return Problem.of(e)
        self.config = after
        if self.store is not None:
            try:
                manage.record_policy_change(
                    self.store, before, after, by=f"operator:{getpass.getuser()}"
                )
            except SignoffError as e:  # saved, but not recorded: say so
                log.warning("the policy change was saved but not recorded: %s", e)
                self.changed.emit()
                return Problem.of(e, saved=True)
        self.changed.emit()
        return None


@dataclass(frozen=True)
class Problem:
    """Why a change was refused (or, ``saved``, kept out of the history): ``words`` for the
    window, ``name`` (the error's) for a tooltip. ``str()`` gives both, for a tooltip."""

    words: str
    name: str
    saved: bool = False

    @classmethod
    def of(cls, error: Exception, saved: bool = False) -> Problem:
        if isinstance(error, ConfigChangedOutside):
            from app.config_outside import TITLE

            words = (
                "the configuration file was changed by something other than Signoff's own"
                " windows and commands, and Signoff does not write over it: accept or restore"
                f' it from the tray menu ("{TITLE}"), or, if it was changed just now by another'
                " change, try again"
            )
        else:
            words = said(error)
        if saved:
            words = f"saved, but not recorded in the history: {words}"
        return cls(words, type(error).__name__, saved)

    def __str__(self) -> str:
        return f"{self.words} [{self.name}]"


def say_not_saved(label: QLabel, problem: Problem) -> None:
    """Why a choice was not saved, in words; the error's name in the tooltip."""
    label.setText(f"Not saved: {problem.words}." if not problem.saved else f"{problem.words}.")
    label.setToolTip(str(problem))
    label.setStyleSheet("color: #b00020;")


def say(label: QLabel, text: str) -> None:
    """What happened, after a problem was said on ``label``."""
    label.setText(text)
    label.setToolTip("")
    label.setStyleSheet("")


class SettingsWindow(QDialog):
    def __init__(
        self, config_path: Path, store: Store | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        from app.settings_catalog import CatalogPage
        from app.settings_hosts import HostsPage
        from app.settings_policy import PolicyPage
        from app.settings_rules import RulesPage
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
        self.catalog = CatalogPage(self.state)  # prompts and resource templates
        self.policy = PolicyPage(self.state)
        self.rules = RulesPage(self.state)
        self.hosts = HostsPage(config_path)
        self.hosts.servers_changed.connect(self._reloaded)
        self.servers.show_tools.connect(self._show_tools)
        for page, title in (
            (self.servers, "Servers"),
            (self.tools, "Tools"),
            (self.catalog, "Prompts"),
            (self.policy, "Policy"),
            (self.rules, "Rules"),
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
        if not self._may_close():  # something not saved: asked first
            event.ignore()
            return
        self.servers.cancel_tests()
        super().closeEvent(event)

    def reject(self) -> None:
        """Escape, or the close button: asks first when something is not saved."""
        if self._may_close():
            super().reject()

    def _may_close(self) -> bool:
        return self.tools.may_leave(closing=True)
