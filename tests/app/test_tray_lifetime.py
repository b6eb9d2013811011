"""A tray app and everything it made are deleted when their owner lets go of them, by reference
counting, on the main thread: none is left for PySide's teardown at interpreter exit, which
deletes what is left in no set order and there deleted a window's button twice (a crash after
the last test; docs/reliability.md, "Crash at exit")."""

from __future__ import annotations

import weakref
from pathlib import Path

from PySide6.QtCore import QObject

from app.tray import TrayApp
from core.heads import MemoryHeadStore
from core.store import Store
from tests.app.pending import make_pending


def test_a_tray_app_let_go_is_deleted_with_its_menu_notifier_and_windows(
    store: Store, home: Path, qtbot
) -> None:
    alive = used_and_let_go(store, home, qtbot)
    assert [name for name, ref in alive.items() if ref() is not None] == []


def used_and_let_go(store: Store, home: Path, qtbot) -> dict[str, weakref.ref[QObject]]:
    """A tray app with a request waiting, its dialog, the history and the settings open, then
    stopped; weak references to each part, once the app's last name is gone."""
    app = TrayApp(store, MemoryHeadStore(), home, native=False)
    app.start()
    approval = make_pending(store)
    qtbot.waitUntil(lambda: app.model.state == "pending", timeout=5000)
    dialog = app.open_dialog(approval.id)
    assert dialog is not None
    # Each of these once kept itself alive through a lambda holding it on a signal of its own.
    made: dict[str, QObject] = {"app": app, "menu": app.menu, "notifier": app.notifier,
                                "dialog": dialog, "history": app.open_history(),
                                "settings": app.open_settings()}  # fmt: skip
    app.stop()
    return {name: weakref.ref(part) for name, part in made.items()}
