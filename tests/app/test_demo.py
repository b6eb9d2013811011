"""Trying the demo from the app, as a person clicks it: the welcome or the tray menu starts it,
its requests open in this app's dialog, and its runs end up in a history window of their own,
never in the operator's own record. Real widgets offscreen, the real ``signoff demo`` as a
subprocess, the real Secret Service holding the demo's operator key."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QAction
from pytestqt.exceptions import TimeoutError as WaitTimeout

from app.demo import HOME
from app.dialog import ApprovalDialog
from app.tray import DEMO_HISTORY, DEMO_RUNNING, TRY_DEMO, TrayApp
from core.demo import first_start
from core.demo.run import NEW_NOTE, NEW_TEXT, NOTES_DIR, OLD_NOTE
from core.heads import MemoryHeadStore
from core.store import Store
from tests.conftest import _secret_service_problem, need

DEMO_SECONDS = 120_000  # ms: the demo's set-up runs several signoff commands, each a process


@pytest.fixture
def tray(store: Store, home: Path, qtbot):
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    app = TrayApp(store, MemoryHeadStore(), home, native=False)
    app.start()
    yield app
    app.stop()


def _entry(tray: TrayApp, text: str) -> QAction:
    [action] = [a for a in tray.menu.actions() if a.text() == text]
    return action


def _texts(tray: TrayApp) -> list[str]:
    return [a.text() for a in tray.menu.actions()]


def _dialog_for(tray: TrayApp, qtbot, tool: str) -> ApprovalDialog:
    def found() -> ApprovalDialog | None:
        return next((d for d in tray.demo.dialogs.values() if d.pending.tool == tool), None)

    try:
        qtbot.waitUntil(lambda: found() is not None, timeout=DEMO_SECONDS)
    except WaitTimeout as e:  # say what the demo did meanwhile
        log = tray.demo.log_path.read_text(errors="replace")[-3000:]
        raise AssertionError(f"no dialog for the demo's {tool}: {e}\nthe demo said:\n{log}") from e
    dialog = found()
    assert dialog is not None and dialog.isVisible()
    return dialog


def _runs(store: Store) -> int:
    with store.snapshot() as conn:
        count: int = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    return count


@pytest.mark.slow
def test_the_demo_tried_from_the_menu_asks_here_and_shows_its_runs_in_a_history_window(
    store: Store, home: Path, tray: TrayApp, qtbot
) -> None:
    assert TRY_DEMO in _texts(tray) and DEMO_HISTORY not in _texts(tray)
    _entry(tray, TRY_DEMO).trigger()
    assert tray.demo.running
    assert tray.said[-1][0] == "Signoff: the demo starts"
    qtbot.waitUntil(lambda: DEMO_RUNNING in _texts(tray), timeout=5000)

    write = _dialog_for(tray, qtbot, "write_note")  # the write waits for the person, here
    assert write.windowTitle().startswith("Signoff demo:")
    write.close()  # closed undecided: the demo's agent waits; the menu opens it again
    _entry(tray, DEMO_RUNNING).trigger()
    write = _dialog_for(tray, qtbot, "write_note")
    write.approve_button.click()
    delete = _dialog_for(tray, qtbot, "delete_note")  # destructive: the dialog, always
    delete.approve_button.click()
    qtbot.waitUntil(lambda: not tray.demo.running, timeout=DEMO_SECONDS)
    assert tray.demo.exit_code == 0, tray.demo.log_path.read_text()

    history = tray.demo.history
    assert history is not None and history.isVisible()
    assert history.windowTitle() == "Signoff: the demo's history"
    assert sorted((r.tool, r.status) for r in history.model.rows) == [
        ("delete_note", "COMPLETED"),
        ("list_notes", "COMPLETED"),
        ("read_note", "COMPLETED"),
        ("write_note", "COMPLETED"),
    ]
    notes = home / HOME / NOTES_DIR
    assert (notes / NEW_NOTE).read_text(encoding="utf-8") == NEW_TEXT
    assert not (notes / OLD_NOTE).exists()
    assert _runs(store) == 0  # the operator's own chain holds none of the demo's record

    history.close()
    qtbot.waitUntil(lambda: TRY_DEMO in _texts(tray), timeout=5000)
    _entry(tray, DEMO_HISTORY).trigger()  # one click shows it again
    assert tray.demo.history is not None and tray.demo.history.isVisible()


def test_a_click_on_the_welcome_balloon_starts_the_demo(tray: TrayApp, qtbot) -> None:
    """Where no notification service has buttons, the welcome is a balloon; a click on it
    starts the demo, as its text says."""
    tray.welcome()
    assert tray.notifier.sent[-1] == ("welcome", "balloon")
    welcome = f"{first_start.MESSAGE}{first_start.CLICK}"
    assert "`" not in welcome and "signoff " not in welcome  # no terminal in window text
    assert not tray.demo.running
    tray.notifier._balloon_clicked()  # what QSystemTrayIcon.messageClicked calls
    assert tray.demo.running
    qtbot.waitUntil(lambda: DEMO_RUNNING in _texts(tray), timeout=5000)
    assert TRY_DEMO not in _texts(tray)
    tray.demo.stop()
    assert not tray.demo.running
