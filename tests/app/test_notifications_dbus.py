"""The tray app's notifications over a real session bus, for a real held proxy call.

A fake ``org.freedesktop.Notifications`` service (tests/app/notification_service.py, dbus-fast)
owns the name on the session bus that the test command starts with ``dbus-run-session``. The
app is the real ``TrayApp`` with native notifications (app/freedesktop.py over D-Bus) in a
qasync loop around pytest-qt's QApplication; the call is a real ``signoff proxy --hold 30``
started by the mcp SDK's client in a thread, in front of tests/proxy/fake_server.py. The proxy
wakes the app over its socket; the app reads the store and notifies; a button is pressed by
the service emitting ``ActionInvoked``, exactly as a notification daemon does.

Every wait is on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import qasync
from dbus_fast import DBusError
from dbus_fast import Message as DBusMessage
from dbus_fast.aio import MessageBus
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from app.model import Pending
from app.notifier import Notifier, _Centre
from app.tray import TrayApp
from core.demo import first_start
from core.heads import MemoryHeadStore
from core.present import markup_escape
from core.store import Store
from tests.app.notification_service import (
    NotificationService,
    Shown,
    session_bus_available,
)
from tests.conftest import need
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import until

DEADLINE = 30.0
HOLD = 30.0
NO_BUS = "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset); run the tests with make test"


# --- a held call -----------------------------------------------------------------------------


class HeldCall:
    """One tools/call through ``signoff proxy NAME --hold 30``, made by the mcp SDK's client on a
    thread of its own (its own event loop), so that the app's loop goes on meanwhile."""

    def __init__(self, rig: Rig, tool: str, arguments: dict[str, Any], hold: float = HOLD) -> None:
        self.rig, self.tool, self.arguments, self.hold = rig, tool, arguments, hold
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"host-{tool}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        async def call() -> None:
            async with self.rig.client("notes", hold=self.hold) as host:
                self.result = await host.call_tool(self.tool, self.arguments)

        try:
            anyio.run(call)
        except BaseException as e:  # handed to the test by wait()
            self.error = e
        finally:
            self.done.set()

    async def wait(self) -> str:
        await until(self.done.is_set, f"the held {self.tool} call to return", DEADLINE + HOLD)
        self._thread.join(5)
        if self.error is not None:
            raise self.error
        return text(self.result)

    def join(self) -> None:
        """Teardown: a call still held ends with its hold at the latest."""
        self._thread.join(HOLD + 15)


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def service() -> Iterator[NotificationService]:
    need(session_bus_available(), NO_BUS)
    with NotificationService() as running:
        yield running


@pytest.fixture
def loop(qapp: QApplication) -> Iterator[qasync.QEventLoop]:
    """An asyncio loop that is Qt's own event loop, around pytest-qt's QApplication, set up as
    app/main.py sets it up (closing the last dialog does not quit the tray app)."""
    quits = qapp.quitOnLastWindowClosed()
    qapp.setQuitOnLastWindowClosed(False)
    # Qt objects left as garbage go now, in this thread: a collection started by one of the
    # test's other threads would delete them there, and Qt warns about their timers.
    gc.collect()
    event_loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(event_loop)
    try:
        yield event_loop
    finally:
        event_loop.close()
        asyncio.set_event_loop(None)
        qapp.setQuitOnLastWindowClosed(quits)
        gc.collect()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


def _rig(home: Path, notes: Path, write_note: str) -> Rig:
    rig = Rig(home)  # SIGNOFF_HOME is the rig's home, in this process too (the wake socket)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note=write_note)
    return rig


@pytest.fixture
def rig(home: Path, notes: Path) -> Rig:
    return _rig(home, notes, "local_mutation")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "app-data"
    path.mkdir(mode=0o700)
    return path


class Apps:
    """Creates TrayApps and stops every one of them, whatever the test did."""

    def __init__(self, store: Store, data_dir: Path) -> None:
        self.store, self.data_dir = store, data_dir
        self.made: list[TrayApp] = []
        self.stopped: list[TrayApp] = []

    def start(self) -> TrayApp:
        tray = TrayApp(self.store, MemoryHeadStore(), self.data_dir, native=True)
        self.made.append(tray)
        tray.start()
        assert tray.watcher.listening, "the app does not listen for the proxy's wake-up"
        return tray

    async def stop(self, tray: TrayApp) -> None:
        """As the app quits: nothing left sending, the bus connection closed, windows gone."""
        if tray in self.stopped:
            return
        self.stopped.append(tray)
        await until(lambda: not tray.notifier._tasks, "the app's notifications to be sent")
        for dialog in list(tray.dialogs.values()):
            dialog.close()
        tray.stop()
        tray.notifier.close()


def run(loop: qasync.QEventLoop, scenario: Callable[[], Awaitable[None]], apps: Apps) -> None:
    async def guarded() -> None:
        try:
            await scenario()
        finally:
            for tray in apps.made:
                await apps.stop(tray)

    loop.run_until_complete(asyncio.wait_for(guarded(), DEADLINE + 2 * HOLD))


@pytest.fixture
def apps(store: Store, data_dir: Path) -> Iterator[Apps]:
    made = Apps(store, data_dir)
    yield made
    made.made.clear()  # the loop fixture's collection then deletes them in this thread
    made.stopped.clear()


def approval_row(store: Store, approval_id: str) -> tuple[str, str, str, str]:
    with store.snapshot() as conn:
        row = conn.execute(
            "SELECT status, request_hash, decided_by, decided_reason FROM approvals WHERE id = ?",
            (approval_id,),
        ).fetchone()
    assert row is not None, f"no approval {approval_id}"
    return row[0], row[1], row[2], row[3]


def grouped(digest: str) -> str:
    """The fingerprint as a notification shows it: the first 16 hex digits in fours."""
    return " ".join(digest[i : i + 4] for i in range(0, 16, 4))


def buttons(shown: Shown) -> list[str]:
    """The labels of the buttons; the ``default`` action is the click on the body."""
    return [label for key, label in shown.actions if key != "default"]


# --- the tests -------------------------------------------------------------------------------


def test_a_held_call_is_notified_and_approve_returns_its_result(
    service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps, notes: Path
) -> None:
    arguments = {"text": "approved from the notification"}

    async def scenario() -> None:
        tray = apps.start()
        held = HeldCall(rig, "write_note", arguments)
        try:
            [shown] = await until(service.snapshot, "the app's Notify")
            [waiting] = rig.pending()

            # 1. What the notification says: tool, server, class, arguments, fingerprint.
            assert shown.app_name == "Signoff"
            assert shown.summary == "Approve notes/write_note?"
            kind, fingerprint, *lines = shown.body.splitlines()
            assert kind == "Changes this computer"
            assert fingerprint == f"fingerprint {grouped(waiting['hash'])}"
            assert lines == ['text: "approved from the notification"']
            assert buttons(shown) == ["Approve", "Reject"]
            assert ("default", "") in shown.actions  # a click on the body opens the dialog
            # The app maps the daemon's id to its buttons once the Notify call returns; a
            # press before that finds no request (no person is that fast).
            await until(lambda: tray.notifier.sent, "the app to know what it showed")
            assert tray.notifier.sent == [(waiting["id"], "native")]
            assert not notes.exists() and not held.done.is_set()  # held, not run

            # 2. Approve, pressed on the notification: exactly that request runs, once.
            service.invoke(shown.id, shown.action("Approve"))
            assert await held.wait() == f"wrote {arguments['text']!r}"
        finally:
            held.join()
        assert notes.read_text() == "approved from the notification\n"
        assert rig.pending() == []
        status, request_hash, by, reason = approval_row(tray.store, waiting["id"])
        assert request_hash == waiting["hash"]
        assert grouped(request_hash) in shown.body
        assert status == "consumed"  # granted, then used by the one execution
        assert by.startswith("operator:") and reason == "from the notification"
        with tray.store.snapshot() as conn:
            assert conn.execute("SELECT count(*) FROM approvals").fetchone()[0] == 1
        assert service.closed == []  # the app closed nothing; the daemon closed it on the press

    run(loop, scenario, apps)


@pytest.mark.guarantee("G-APP-1")
def test_a_destructive_call_offers_only_review_which_opens_the_dialog(
    service: NotificationService,
    loop: qasync.QEventLoop,
    home: Path,
    notes: Path,
    apps: Apps,
    qtbot: QtBot,
) -> None:
    rig = _rig(home, notes, "destructive")

    async def scenario() -> None:
        tray = apps.start()
        held = HeldCall(rig, "write_note", {"text": "destroy"})
        try:
            [shown] = await until(service.snapshot, "the app's Notify")
            [waiting] = rig.pending()
            assert shown.summary == "Approve notes/write_note?"
            assert shown.body.startswith("Destructive\nfingerprint ")
            assert buttons(shown) == ["Review…"]
            await until(lambda: tray.notifier.sent, "the app to know what it showed")

            # 3. Review opens the dialog and approves nothing.
            service.invoke(shown.id, shown.action("Review…"))
            dialog = await until(lambda: tray.dialogs.get(waiting["id"]), "the dialog")
            assert dialog.isVisible()
            assert waiting["hash"] in dialog.hash_label.text()
            assert approval_row(tray.store, waiting["id"])[0] == "pending"
            assert [p["id"] for p in rig.pending()] == [waiting["id"]]
            assert not held.done.is_set() and not notes.exists()

            # The dialog decides: Reject, and the held call says so; nothing ran.
            qtbot.mouseClick(dialog.reject_button, Qt.MouseButton.LeftButton)
            answer = await held.wait()
        finally:
            held.join()
        assert held.result.is_error and "rejected" in answer
        assert not notes.exists()
        assert approval_row(tray.store, waiting["id"])[0] == "rejected"
        await until(lambda: waiting["id"] not in tray.dialogs, "Qt to delete the closed dialog")
        assert len(service.snapshot()) == 1

    run(loop, scenario, apps)


def test_a_pending_approval_is_notified_once_across_a_restart(
    service: NotificationService,
    loop: qasync.QEventLoop,
    rig: Rig,
    apps: Apps,
    notes: Path,
    qtbot: QtBot,
) -> None:
    async def scenario() -> None:
        first = apps.start()
        held = HeldCall(rig, "write_note", {"text": "after a restart"})
        try:
            [shown] = await until(service.snapshot, "the first app's Notify")
            [waiting] = rig.pending()
            await apps.stop(first)

            # 4. The app is recreated over the same data: it knows the approval waits, and
            # says nothing again; it takes off the notification the first one left.
            second = apps.start()
            assert [p.id for p in second.model.pending] == [waiting["id"]]
            assert second.model.state == "pending"
            await until(lambda: not second.notifier._tasks, "the left-over to be closed")
            assert second.notifier.sent == []

            # The operator decides from the menu's dialog instead; the held call completes.
            dialog = second.open_dialog(waiting["id"])
            assert dialog is not None
            qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
            assert await held.wait() == "wrote 'after a restart'"
            await until(lambda: not second.model.pending, "the app to see nothing waits")
            await until(lambda: not second.notifier._tasks, "the app's sends to finish")
        finally:
            held.join()
        assert service.snapshot() == [shown]  # one Notify, from the first app only
        # The first app's notification could no longer answer: the second took it off.
        assert (shown.id, 3) in service.closed
        assert notes.read_text() == "after a restart\n"

    run(loop, scenario, apps)


def test_approvals_waiting_at_start_are_each_notified_over_one_connection(
    service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps
) -> None:
    """The notifier connects to the bus on its first send: two first sends at once must not
    open two connections, one of them never closed."""

    async def scenario() -> None:
        for n in (1, 2):  # a short hold: both calls return "pending" before the app starts
            call = HeldCall(rig, "write_note", {"text": f"waiting {n}"}, hold=0.1)
            assert "pending" in await call.wait()
        waiting = rig.pending()
        assert len(waiting) == 2
        before = await own_connections()
        tray = apps.start()
        shown = await until(lambda: len(service.snapshot()) == 2 and service.snapshot(), "both")
        assert [s.body.splitlines()[2] for s in shown] == ['text: "waiting 1"', 'text: "waiting 2"']
        await until(lambda: len(tray.notifier.sent) == 2, "both sends to finish")
        tray.witness.drain()  # its keyring calls (the operator key's read) opened and closed
        assert await own_connections() == before + 1
        await apps.stop(tray)
        await until(lambda: connections_are(before), "the app's connection to close")

    run(loop, scenario, apps)


@pytest.mark.guarantee("G-APP-1")
def test_without_a_working_notification_service_the_app_falls_back_to_a_popup(
    loop: qasync.QEventLoop, qtbot: QtBot
) -> None:
    """A failed send is tried again, then falls back; the operator is always told (while the
    approval counts as notified). A service that refuses every Notify stands for "none works"
    (an absent one cannot be had where a daemon is D-Bus activatable, as on a desktop or in CI
    with a real daemon installed). The popup is plain text and offers no Approve."""
    need(session_bus_available(), NO_BUS)
    pending = Pending(
        "approval-1", "run-1", "notes", "write_note", '{"text":"x"}', "ab" * 32, "approval",
        "local_mutation", "2026-01-01T00:00:00.000000Z", "", "Append a line",
    )  # fmt: skip
    notifier = Notifier(None, native=True)

    async def scenario() -> None:
        notifier.notify(pending)
        await until(lambda: notifier.sent, "the notifier to give up or succeed")
        await until(lambda: not notifier._tasks, "the send to finish")

    service = NotificationService(refuse=1000)
    with service:
        loop.run_until_complete(asyncio.wait_for(scenario(), DEADLINE))
        notifier.close()
    assert notifier.sent == [("approval-1", "popup")]
    assert service.shown == []
    popup = notifier._popup
    qtbot.addWidget(popup)
    assert isinstance(popup, QMessageBox) and popup.isVisible()
    assert popup.text() == 'Changes this computer\nfingerprint abab abab abab abab\ntext: "x"'
    assert popup.textFormat() == Qt.TextFormat.PlainText
    labels = {b.text().replace("&", "") for b in popup.buttons()}
    assert not any("Approve" in label for label in labels), labels


def test_the_welcome_offers_the_demo_as_a_button_that_starts_it(
    service: NotificationService, loop: qasync.QEventLoop
) -> None:
    """The first start's welcome, where the notification service has buttons: "Try the demo"
    on the notification itself, and pressing it asks the app to start the demo."""
    notifier = Notifier(None, native=True)
    pressed: list[bool] = []
    notifier.demo.connect(lambda: pressed.append(True))

    async def scenario() -> None:
        notifier.welcome(first_start.TITLE, first_start.MESSAGE, first_start.BUTTON,
                         first_start.CLICK)  # fmt: skip
        await until(service.snapshot, "the welcome to be shown")
        [shown] = service.snapshot()
        assert (shown.summary, shown.body) == (first_start.TITLE, first_start.MESSAGE)
        assert not pressed
        service.invoke(shown.id, shown.action(first_start.BUTTON))
        await until(lambda: pressed, "the button's press to reach the app")

    loop.run_until_complete(asyncio.wait_for(scenario(), DEADLINE))
    notifier.close()
    assert notifier.sent == [("welcome", "native")]


@pytest.fixture
def markup_service() -> Iterator[NotificationService]:
    need(session_bus_available(), NO_BUS)
    with NotificationService(markup=True) as running:
        yield running


@pytest.mark.guarantee("G-APP-1")
def test_a_daemon_that_parses_markup_gets_every_request_text_escaped(
    markup_service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps
) -> None:
    """G-APP-1: no argument is rendered as markup. Signoff's own line is the only bold one."""
    payload = "<b>ok</b> & 'q' \"x\""

    async def scenario() -> None:
        apps.start()
        held = HeldCall(rig, "write_note", {"text": payload}, hold=0.1)
        [shown] = await until(markup_service.snapshot, "the app's Notify")
        await held.wait()
        [waiting] = rig.pending()
        kind, fingerprint, line = shown.body.splitlines()
        assert kind == "<b>Changes this computer</b>"
        assert fingerprint == f"<b>fingerprint {grouped(waiting['hash'])}</b>"
        assert line == markup_escape('text: "<b>ok</b> & \'q\' \\"x\\""')
        assert "<" not in line and "'" not in line
        assert buttons(shown) == ["Approve", "Reject"]  # shown whole, nothing marked

    run(loop, scenario, apps)


@pytest.mark.guarantee("G-APP-1")
def test_a_request_decided_from_the_terminal_takes_its_notification_off_and_its_dialog_says_so(
    service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps, qtbot: QtBot
) -> None:
    async def scenario() -> None:
        tray = apps.start()
        held = HeldCall(rig, "write_note", {"text": "decided elsewhere"})
        try:
            [shown] = await until(service.snapshot, "the app's Notify")
            [waiting] = rig.pending()
            await until(lambda: tray.notifier.sent, "the app to know what it showed")
            dialog = tray.open_dialog(waiting["id"])
            assert dialog is not None and dialog.approve_button.isEnabled()

            await asyncio.to_thread(rig.signoff, "reject", waiting["id"], "--reason", "no")
            assert "rejected" in await held.wait()
            await until(lambda: (shown.id, 3) in service.closed, "the notification taken off")
            await until(lambda: not dialog.approve_button.isEnabled(), "the dialog to follow")
            assert not dialog.reject_button.isEnabled()
            assert "Rejected by operator:" in dialog.banner.text()
            with qtbot.assertNotEmitted(dialog.decided):
                qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)

            # A press that reaches the app after the request went (a slow daemon) says so,
            # and decides nothing.
            service.invoke(shown.id, shown.action("Approve"))
            await until(lambda: tray.said, "the app to say the request was already decided")
            assert tray.said[-1][0] == "Signoff: nothing decided"
            assert tray.said[-1][1].startswith("Rejected by operator:")
        finally:
            held.join()
        assert approval_row(tray.store, waiting["id"])[0] == "rejected"

    run(loop, scenario, apps)


@pytest.mark.guarantee("G-APP-1")
def test_a_request_decided_while_its_notification_is_being_sent_is_taken_off_once_shown(
    service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps
) -> None:
    service.hold = threading.Event()  # the daemon answers Notify only when told

    async def scenario() -> None:
        tray = apps.start()
        held = HeldCall(rig, "write_note", {"text": "decided mid-send"})
        try:
            await until(service.holding.is_set, "the app's Notify, held by the daemon")
            [waiting] = rig.pending()
            await asyncio.to_thread(rig.signoff, "reject", waiting["id"])
            assert "rejected" in await held.wait()
            await until(lambda: not tray.model.pending, "the app to see it decided")
            service.hold.set()  # the daemon answers now: the notification is on the screen
            [shown] = await until(service.snapshot, "the Notify answered")
            await until(lambda: (shown.id, 3) in service.closed, "the notification taken off")
        finally:
            held.join()

    run(loop, scenario, apps)


@pytest.mark.guarantee("G-APP-1")
def test_approve_on_the_notification_leaves_no_live_dialog_behind(
    service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps, notes: Path
) -> None:
    async def scenario() -> None:
        tray = apps.start()
        held = HeldCall(rig, "write_note", {"text": "from the notification"})
        try:
            [shown] = await until(service.snapshot, "the app's Notify")
            [waiting] = rig.pending()
            await until(lambda: tray.notifier.sent, "the app to know what it showed")
            dialog = tray.open_dialog(waiting["id"])
            assert dialog is not None
            service.invoke(shown.id, shown.action("Approve"))
            assert await held.wait() == "wrote 'from the notification'"
            await until(lambda: not dialog.reject_button.isEnabled(), "the dialog to follow")
            assert "Approved" in dialog.banner.text()
        finally:
            held.join()
        assert notes.read_text() == "from the notification\n"

    run(loop, scenario, apps)


@pytest.mark.guarantee("G-APP-1")
def test_a_button_signal_sent_by_another_program_presses_nothing(
    service: NotificationService, loop: qasync.QEventLoop, rig: Rig, apps: Apps
) -> None:
    """Only the connection owning org.freedesktop.Notifications can press a button."""

    async def scenario() -> None:
        tray = apps.start()
        held = HeldCall(rig, "write_note", {"text": "forged"})
        try:
            [shown] = await until(service.snapshot, "the app's Notify")
            [waiting] = rig.pending()
            await until(lambda: tray.notifier.sent, "the app to know what it showed")
            forger = await MessageBus().connect()
            try:
                signal = DBusMessage.new_signal(
                    "/org/freedesktop/Notifications", "org.freedesktop.Notifications",
                    "ActionInvoked", "us", [shown.id, shown.action("Approve")],
                )  # fmt: skip
                await forger.send(signal)
                # A round trip after the signal: the bus has delivered it before the reply.
                await forger.call(DBusMessage(destination="org.freedesktop.DBus",
                                              path="/org/freedesktop/DBus",
                                              interface="org.freedesktop.DBus.Peer",
                                              member="Ping"))  # fmt: skip
            finally:
                forger.disconnect()
            service.invoke(shown.id, shown.action("Reject"))  # the daemon: the real press
            assert "rejected" in await held.wait()
        finally:
            held.join()
        assert approval_row(tray.store, waiting["id"])[0] == "rejected"

    run(loop, scenario, apps)


def test_a_failed_send_is_tried_again_on_the_native_path(
    loop: qasync.QEventLoop, rig: Rig, apps: Apps
) -> None:
    need(session_bus_available(), NO_BUS)

    async def scenario() -> None:
        with NotificationService(refuse=1) as flaky:
            tray = apps.start()
            held = HeldCall(rig, "write_note", {"text": "second try"}, hold=0.1)
            await held.wait()
            [shown] = await until(flaky.snapshot, "the Notify tried again")
            [waiting] = rig.pending()
            await until(lambda: tray.notifier.sent, "the app to know what it showed")
            assert tray.notifier.sent == [(waiting["id"], "native")]
            assert shown.body.splitlines()[2] == 'text: "second try"'
            await apps.stop(tray)

    run(loop, scenario, apps)


def test_a_restarted_daemon_is_followed_and_its_old_ids_forgotten(
    loop: qasync.QEventLoop, rig: Rig, apps: Apps
) -> None:
    """Ids are per daemon: after a restart the old ones may name another program's
    notifications, and only the new owner of the name can press a button."""
    need(session_bus_available(), NO_BUS)

    async def scenario() -> None:
        with NotificationService() as first:
            tray = apps.start()
            await HeldCall(rig, "write_note", {"text": "one"}, hold=0.1).wait()
            await until(first.snapshot, "the first daemon's Notify")
            await until(lambda: tray.notifier.shown, "the app to know what it showed")
        with NotificationService() as second:
            await until(lambda: not tray.notifier.shown, "the first daemon's ids forgotten")
            held = HeldCall(rig, "write_note", {"text": "two"})
            try:
                [shown] = await until(second.snapshot, "the second daemon's Notify")
                await until(lambda: len(tray.notifier.sent) == 2, "the app to know it")
                second.invoke(shown.id, shown.action("Approve"))
                assert await held.wait() == "wrote 'two'"
            finally:
                held.join()
            await apps.stop(tray)

    run(loop, scenario, apps)


def test_notification_centre_numbers_are_never_reused(
    service: NotificationService, loop: qasync.QEventLoop
) -> None:
    """macOS' and Windows' path (desktop-notifier), run here over its D-Bus backend: a number
    given to one request's notification never names another's, even after one is withdrawn."""
    notifier = Notifier(None, native=False)
    notifier._native = _Centre(notifier)

    def pending(n: int) -> Pending:
        return Pending(
            f"approval-{n}", f"run-{n}", "notes", "write_note", f'{{"text":"{n}"}}', "ab" * 32,
            "approval", "local_mutation", "2026-01-01T00:00:00.000000Z", "", "Append a line",
        )  # fmt: skip

    async def scenario() -> None:
        for n in (1, 2, 3):
            notifier.notify(pending(n))
        await until(lambda: len(notifier.sent) == 3, "three sends")
        notifier.withdraw("approval-1")
        notifier.notify(pending(4))
        await until(lambda: len(notifier.sent) == 4, "the fourth send")
        await until(lambda: not notifier._tasks, "the sends to finish")

    loop.run_until_complete(asyncio.wait_for(scenario(), DEADLINE))
    assert sorted(notifier.shown) == ["approval-2", "approval-3", "approval-4"]
    assert len(set(notifier.shown.values())) == 3
    notifier.close()


# --- asking the bus itself ---------------------------------------------------------------------


@contextlib.asynccontextmanager
async def bus_daemon() -> AsyncIterator[tuple[MessageBus, Any]]:
    """A connection of our own to the session bus, and the bus daemon's interface."""
    bus = await MessageBus().connect()
    try:
        introspection = await bus.introspect("org.freedesktop.DBus", "/org/freedesktop/DBus")
        proxy = bus.get_proxy_object("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     introspection)  # fmt: skip
        yield bus, proxy.get_interface("org.freedesktop.DBus")
    finally:
        bus.disconnect()
        await bus.wait_for_disconnect()


async def activatable(name: str) -> bool:
    async with bus_daemon() as (_, dbus):
        return name in await dbus.call_list_activatable_names()


async def own_connections() -> int:
    """How many connections this process has on the session bus (besides the one asking)."""
    async with bus_daemon() as (bus, dbus):
        mine = 0
        for name in await dbus.call_list_names():
            if name.startswith(":") and name != bus.unique_name:
                try:
                    pid = await dbus.call_get_connection_unix_process_id(name)
                except DBusError:  # the connection went away meanwhile
                    continue
                mine += pid == os.getpid()
        return mine


async def connections_are(count: int) -> bool:
    return await own_connections() == count
