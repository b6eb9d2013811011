"""The tray's notice of tools waiting for review: "notes has 2 tools to review", one entry per
server, each opening Settings on that server's Tools page.

What waits is read by ``core.proxy.review`` from the servers' last listings and the
configuration; it is read again each time the tray refreshes (a proxy that lists a server
again wakes the app), so the entry goes once the operator has pinned and classified the tools.
A tool newly waiting is also said once in a message from the tray.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from core.errors import SignoffError
from core.proxy import config as configuration
from core.proxy.review import Waiting, waiting

if TYPE_CHECKING:
    from app.settings import SettingsWindow

log = logging.getLogger("signoff.app")
REVIEW_WHY = "They are not offered until you review them; the tray menu opens them."
KEY = "review-server"  # an entry's data: {KEY: server}, never a request's id (a str)


class ReviewNotice(QObject):
    """The servers with tools waiting (``waiting``), and their menu entries; choosing one opens
    the window ``open_settings`` gives on that server's tools.

    ``open_settings`` is a bound method of the app, held weakly: the app holds this notice, and
    a strong reference back would keep a let-go app alive past its owner (tests/app/
    test_tray_lifetime.py)."""

    def __init__(
        self,
        config_path: Path,
        status_dir: Path,
        open_settings: Callable[[], SettingsWindow],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._open_settings = weakref.WeakMethod(open_settings)  # type: ignore[arg-type]
        self.config_path = config_path
        self.status_dir = status_dir
        self.waiting: tuple[Waiting, ...] = ()
        self._seen: dict[str, set[str]] = {}  # the tools waiting when last read, by server
        self._problem = ""  # why the configuration could not be read, last time

    def read(self) -> tuple[Waiting, ...]:
        """What waits now (``waiting``; nothing when the configuration cannot be read: the tray
        says why elsewhere). Returned: the servers with a tool waiting that was not waiting
        when last read, to be said once; fewer tools waiting is not news."""
        try:
            config = configuration.load(self.config_path)
        except SignoffError as e:
            if str(e) != self._problem:  # once, not at every refresh
                log.warning("tools to review: the configuration cannot be read: %s", e)
            self._problem = str(e)
            self.waiting = ()
        else:
            self.waiting = waiting(self.status_dir, config)
        fresh = tuple(w for w in self.waiting if set(w.tools) - self._seen.get(w.server, set()))
        self._seen = {w.server: set(w.tools) for w in self.waiting}
        return fresh

    def add_to(self, menu: QMenu, label: Callable[[str], str]) -> list[QAction]:
        """An entry per server with tools waiting, then a separator when there was one."""
        entries = []
        for item in self.waiting:
            action = menu.addAction(label(f"{item.words()}…"))
            action.setToolTip(", ".join(item.tools))
            action.setData({KEY: item.server})
            entries.append(action)
        if entries:
            menu.addSeparator()
        return entries

    def chosen(self, action: QAction) -> None:
        """A menu entry was chosen: one of ours opens its server's tools."""
        data = action.data()
        if isinstance(data, dict) and isinstance(data.get(KEY), str):
            self.open_tools(data[KEY])

    def open_tools(self, server: str) -> SettingsWindow:
        """Settings on ``server``'s tools, listed afresh: the tools waiting are shown, not the
        listing the window saw before the server added them."""
        open_settings = self._open_settings()
        if open_settings is None:
            raise RuntimeError("the tray app that opened this notice is gone")
        settings = open_settings()
        settings.state.listings.pop(server, None)
        settings.servers.show_tools.emit(server)
        return settings
