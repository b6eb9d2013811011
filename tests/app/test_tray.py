"""The tray app's states and menu, and the pending → notified → decided path, offscreen."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox, QSystemTrayIcon

from app.notifier import message_of
from app.tray import ACCEPT_DATABASE, TrayApp, shown_path
from core import canonical
from core.anchor import Anchor
from core.approvals import request_hash, request_value
from core.canonical import JSONValue
from core.heads import MemoryHeadStore
from core.policy.meaning import Reading
from core.present import markup_escape
from core.records import read_approval, read_step
from core.store import Store
from tests.app.pending import LINKED, OWN_FOLDER, RELATIVE, make_pending


def _texts(tray: TrayApp) -> list[str]:
    return [a.text() for a in tray.menu.actions()]


def test_idle_then_pending_then_decided(store: Store, tray: TrayApp, qtbot) -> None:
    assert tray.model.state == "idle"
    assert "Nothing waits" in _texts(tray)
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert "1 waiting for you" in _texts(tray)
    assert [sent[0] for sent in tray.notifier.sent] == [approval.id]
    assert tray.decide(approval.id, approval.request_hash, "approve", "fine")
    assert tray.model.state == "idle"
    status = store._conn.execute("SELECT status FROM approvals").fetchone()[0]
    assert status == "approved"


def test_a_pending_approval_is_notified_once_even_after_a_restart(
    store: Store, home: Path, tray: TrayApp, qtbot
) -> None:
    make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    tray.refresh()
    assert len(tray.notifier.sent) == 1
    again = TrayApp(store, MemoryHeadStore(), home, native=False)
    again.start()
    assert again.model.state == "pending"  # still waiting (not expired by its start's sweep)
    assert again.notifier.sent == []
    again.stop()


def test_pausing_stops_notifying(store: Store, tray: TrayApp, qtbot) -> None:
    tray._pause(True)
    make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert tray.notifier.sent == []


@pytest.mark.guarantee("G-APP-1")
def test_a_destructive_request_is_not_approved_from_the_notification(
    store: Store, tray: TrayApp, qtbot
) -> None:
    approval = make_pending(store, tool="delete")
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert not tray.decide(approval.id, approval.request_hash, "approve", "from the notification")
    assert approval.id in tray.dialogs
    status = store._conn.execute("SELECT status FROM approvals").fetchone()[0]
    assert status == "pending"
    tray.dialogs[approval.id].close()


@pytest.mark.parametrize("kind", ["interrupted_side_effect", "duplicate"])
@pytest.mark.guarantee("G-APP-1")
def test_a_call_that_may_have_run_or_already_ran_is_never_approved_from_its_notification(
    store: Store, tray: TrayApp, qtbot, kind: str
) -> None:
    approval = make_pending(store, tool="push", kind=kind)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    [shown] = tray.model.pending
    # A remote mutation with one short argument: only its kind keeps Approve off it.
    assert shown.kind == kind and shown.side_effect == "remote_mutation" and shown.view.whole()
    assert message_of(shown).buttons == (("review", "Review…"),)
    tray.notifier.approve.emit(approval.id, shown.request_hash)  # pressed on it anyway
    dialog = tray.dialogs.get(approval.id)
    assert dialog is not None and dialog.isVisible()
    assert approval_status(store, approval.id) == "pending"
    dialog.close()


@pytest.mark.guarantee("G-FILES-2")
@pytest.mark.parametrize("tool", ["read", "write"])
def test_a_request_touching_signoffs_own_files_is_never_approved_from_its_notification(
    store: Store, tray: TrayApp, qtbot, tool: str
) -> None:
    """Allowed by the policy, read-only or not, one short path shown whole: only what it
    touches keeps Approve off its notification, and a press on one anyway opens the dialog."""
    approval = make_pending(store, tool=tool, kind="own_files",
                            arguments={"path": f"{OWN_FOLDER}/signoff.db"})  # fmt: skip
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    [shown] = tray.model.pending
    assert shown.kind == "own_files" and shown.view.whole()
    message = message_of(shown)
    assert message.buttons == (("review", "Review…"),)
    assert "touches Signoff's own files" in message.head[0]
    tray.notifier.approve.emit(approval.id, shown.request_hash)  # pressed on it anyway
    dialog = tray.dialogs.get(approval.id)
    assert dialog is not None and dialog.isVisible()
    assert approval_status(store, approval.id) == "pending"
    dialog.close()


@pytest.mark.guarantee("G-RULES-1")
@pytest.mark.parametrize(
    ("reading", "said"),
    [(LINKED, '"/srv/link/id" resolves to /home/me/.ssh/id'),
     (RELATIVE, '"notes/id" is a relative path, and the folder it is read against is not known')],
    ids=["resolves-elsewhere", "not-one-thing"],
)  # fmt: skip
def test_a_request_whose_value_means_other_than_it_says_is_never_approved_from_its_notification(
    store: Store, tray: TrayApp, qtbot, reading: Reading, said: str
) -> None:
    """A remote mutation with one short argument shown whole: only what its value means keeps
    Approve off its notification, which says the spelling and the meaning; a press on Approve
    anyway opens the dialog."""
    approval = make_pending(store, tool="push", arguments={"path": reading.spelling},
                            read=(reading,))  # fmt: skip
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    [shown] = tray.model.pending
    assert shown.read == (reading,) and shown.kind == "remote_mutation" and shown.view.whole()
    message = message_of(shown)
    assert message.buttons == (("review", "Review…"),)
    assert message.lines == (f'path: "{reading.spelling}"',)
    assert message.body(markup=False).splitlines()[-1] == f"→ {said}"
    assert message.body(markup=True).splitlines()[-1] == f"→ {markup_escape(said)}"
    tray.notifier.approve.emit(approval.id, shown.request_hash)  # pressed on it anyway
    dialog = tray.dialogs.get(approval.id)
    assert dialog is not None and dialog.isVisible()
    assert approval_status(store, approval.id) == "pending"
    dialog.close()


@pytest.mark.guarantee("G-APP-1")
def test_the_notification_shows_the_fixed_values_marked_set_by_signoff(
    store: Store, tray: TrayApp, qtbot
) -> None:
    make_pending(store, tool="push", arguments={"to": "origin"}, fixed={"account": "ops"})
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    [shown] = tray.model.pending
    message = message_of(shown)
    assert message.lines == ('to: "origin"', 'account: "ops" (set by Signoff)')
    assert message.buttons == (("approve", "Approve"), ("reject", "Reject"))  # shown whole
    assert message.body(markup=False).endswith('\naccount: "ops" (set by Signoff)')


@pytest.mark.parametrize("reread", [False, True], ids=["before-a-re-read", "after-a-re-read"])
@pytest.mark.guarantee("G-APP-1")
def test_an_approve_for_a_request_changed_since_it_was_shown_is_refused_and_decides_nothing(
    store: Store, tray: TrayApp, qtbot, reread: bool
) -> None:
    """The request behind the id is rewritten, hashes and all, between the notification and the
    press: the decision names the hash the operator was shown, so it is refused, whether or not
    the app re-read the record in between (it re-reads on every change)."""
    approval = make_pending(store, tool="push", arguments={"to": "origin"})
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    [shown] = tray.model.pending
    assert shown.request_hash == approval.request_hash
    assert message_of(shown).buttons == (("approve", "Approve"), ("reject", "Reject"))
    rewrite_request(store, approval.id, {"to": "attacker"})
    if reread:
        tray.refresh()
        assert tray.model.pending[0].request_hash != shown.request_hash
    tray.notifier.approve.emit(approval.id, shown.request_hash)  # the hash it was notified with
    assert approval_status(store, approval.id) == "pending"
    assert tray.said[-1][0] == "Signoff: not decided"
    with store.snapshot() as conn:
        decided = conn.execute("SELECT count(*) FROM events WHERE kind = 'approval.decided'")
        assert decided.fetchone()[0] == 0


def approval_status(store: Store, approval_id: str) -> str:
    with store.snapshot() as conn:
        approval = read_approval(conn, approval_id)
    assert approval is not None
    return approval.status


def rewrite_request(store: Store, approval_id: str, arguments: dict[str, JSONValue]) -> None:
    """What a writer of the database could do: give the approval other arguments, with its
    step's arguments, its stored request and its hash all agreeing, so that the record still
    binds the approval to a request; only the hash the operator was shown differs."""
    with store.snapshot() as conn:
        approval = read_approval(conn, approval_id)
        assert approval is not None
        step = read_step(conn, approval.run_id, approval.step)
    assert step is not None and step.tool is not None and step.tool_spec_hash is not None
    request = request_value(spec_hash=step.tool_spec_hash, tool=step.tool, arguments=arguments,
                            run_id=step.run_id, step=step.index, kind=approval.kind)  # fmt: skip
    with closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute(
            "UPDATE steps SET arguments = ? WHERE run_id = ? AND idx = ?",
            (canonical.dumps_text(arguments), step.run_id, step.index),
        )
        conn.execute(
            "UPDATE approvals SET request = ?, request_hash = ? WHERE id = ?",
            (canonical.dumps_text(request), request_hash(request), approval_id),
        )


def test_an_edited_record_turns_the_icon_to_alarm_until_acknowledged(
    store: Store, tray: TrayApp, qtbot
) -> None:
    make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE events SET payload = '{}' WHERE seq = 3")
    conn.commit()
    conn.close()
    tray.witness.check_all()  # on the witness's thread; its answer comes back as a signal
    qtbot.waitUntil(lambda: tray.model.state == "alarm", timeout=5000)
    assert any(t.startswith("Alarm: event 3") for t in _texts(tray))


def test_an_alarm_found_at_start_is_shown(store: Store, home: Path, qtbot) -> None:
    make_pending(store)
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE events SET payload = '{}' WHERE seq = 3")
    conn.commit()
    conn.close()
    app = TrayApp(store, MemoryHeadStore(), home, native=False)
    shown: list[tuple[str, bool]] = []  # (title, whether the icon was visible to show it)
    show_message = app.tray.showMessage
    app.tray.showMessage = lambda title, *rest: (  # type: ignore[method-assign]
        shown.append((title, app.tray.isVisible())),
        show_message(title, *rest),
    )
    app.start()
    try:
        qtbot.waitUntil(lambda: app.model.state == "alarm", timeout=5000)
        assert ("Signoff: the record does not verify", True) in shown
    finally:
        app.stop()


@pytest.mark.guarantee("G-KEY-2")
def test_another_database_where_one_was_anchored_is_accepted_only_from_the_alarm_menu(
    home: Path, qtbot
) -> None:
    heads = MemoryHeadStore()
    database = home / "signoff.db"
    with Store.open(database) as first:
        make_pending(first)
        Anchor(heads).advance(first, first.head())
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    with Store.open(database) as fresh:
        app = TrayApp(fresh, heads, home, native=False)
        app.start()
        try:
            qtbot.waitUntil(lambda: app.model.state == "alarm", timeout=5000)
            [accept] = [a for a in app.menu.actions() if a.text() == ACCEPT_DATABASE]
            accept.trigger()
            box = app._confirming
            assert box is not None and "another database lies where one was" in box.text()
            box.button(QMessageBox.StandardButton.Cancel).click()  # cancelled: nothing changes
            app.witness.drain()
            assert app.model.state == "alarm" and heads.load(fresh.database_id) is None
            accept.trigger()
            box = app._confirming
            [yes] = [b for b in box.buttons() if b.text() == "Accept this database"]
            yes.click()
            qtbot.waitUntil(lambda: app.model.state != "alarm", timeout=5000)
            assert heads.load(fresh.database_id) == fresh.head()
            assert ACCEPT_DATABASE not in _texts(app)
        finally:
            app.stop()


def test_a_left_click_opens_what_waits_or_else_the_history(
    store: Store, tray: TrayApp, qtbot
) -> None:
    click = QSystemTrayIcon.ActivationReason.Trigger
    tray.tray.activated.emit(click)
    assert tray.history is not None and tray.history.isVisible()
    qtbot.addWidget(tray.history)
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    tray.tray.activated.emit(click)
    dialog = tray.dialogs.get(approval.id)
    assert dialog is not None and dialog.isVisible()
    dialog.close()


@pytest.mark.guarantee("G-APP-1")
def test_a_request_not_shown_whole_is_not_approved_from_the_notification(
    store: Store, tray: TrayApp, qtbot
) -> None:
    approval = make_pending(store, tool="write", arguments={"text": "x" * 300, "to": "a"})
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert not tray.model.pending[0].view.whole()
    assert not tray.decide(approval.id, approval.request_hash, "approve", "from the notification")
    assert approval.id in tray.dialogs
    status = store._conn.execute("SELECT status FROM approvals").fetchone()[0]
    assert status == "pending"
    tray.dialogs[approval.id].close()


def test_without_a_keyring_the_menu_says_not_anchored(store: Store, home: Path, qtbot) -> None:
    from keyring.backends import fail

    from core.heads import KeyringHeadStore

    app = TrayApp(store, KeyringHeadStore(fail.Keyring()), home, native=False)
    app.start()
    assert any("not anchored" in t for t in _texts(app))
    assert app.model.state == "idle"
    app.stop()


def test_the_dialog_leads_to_the_run_in_the_history(store: Store, tray: TrayApp, qtbot) -> None:
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    dialog = tray.open_dialog(approval.id)
    assert dialog is not None
    dialog.history_button.click()
    assert tray.history is not None and tray.history.selected_run_id == approval.run_id
    tray.history.close()
    dialog.close()


def test_the_settings_entry_opens_the_settings_window(tray: TrayApp, qtbot) -> None:
    entry = next(a for a in tray.menu.actions() if a.text() == "Settings…")
    assert entry.isEnabled()
    entry.trigger()
    assert tray.settings is not None and tray.settings.isVisible()
    qtbot.addWidget(tray.settings)


def test_with_notifications_set_to_tray_only_nothing_pops_up(
    store: Store, tray: TrayApp, home: Path, qtbot
) -> None:
    from core import paths
    from core.proxy import manage

    manage.set_setting(paths.config_path(), "notifications", "tray")
    settings = tray.open_settings()
    qtbot.addWidget(settings)
    settings.state.reload()
    settings.state.changed.emit()  # as the window does after a save
    make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert tray.notifier.sent == []
    assert "1 waiting for you" in _texts(tray)


def test_menu_labels_are_written_for_the_tray_that_draws_them(
    store: Store, tray: TrayApp, qtbot
) -> None:
    """Under a StatusNotifierItem tray "_" is dbusmenu's mnemonic (app/labels.py)."""
    approval = make_pending(store, server="my_notes")
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    fingerprint = tray.model.pending[0].fingerprint
    said = "(Changes things elsewhere) fingerprint"  # the class in words (app/words.py)
    assert f"my_notes/push {said} {fingerprint}" in _texts(tray)
    tray.dbus_menu = True
    tray._rebuild()
    assert f"my__notes/push {said} {fingerprint}" in _texts(tray)
    assert approval.id


@pytest.mark.parametrize(
    "written",
    ["not json", "[1, 2]", '{"owner": ":1.9", "ids": {"a": true}}', '{"ids": {"a": -4}}'],
)
def test_a_tampered_list_of_shown_notifications_closes_nothing(
    tmp_path: Path, written: str, qtbot
) -> None:
    """The file of ids a dead app left is written behind Signoff's back: no id from it that is
    not a positive integer given by the same daemon connection is ever closed."""
    from app.notifier import Notifier

    shown = tmp_path / "notifications.json"
    shown.write_text(written)
    assert Notifier(None, native=False, shown_file=shown)._load() == {}


@pytest.mark.guarantee("G-KEY-1")
def test_unauthenticated_decisions_are_said_in_the_menu_and_tooltip_every_time(
    store: Store, tray: TrayApp, qtbot
) -> None:
    from core.operator_key import choose_mode

    assert not any(t.startswith("Decisions unauthenticated") for t in _texts(tray))
    choose_mode(store, unauthenticated=True, by="operator", reason="no keyring here")
    make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert any(t.startswith("Decisions unauthenticated (your choice)") for t in _texts(tray))
    assert "decisions UNAUTHENTICATED" in tray.tray.toolTip()


def test_the_tooltip_and_the_menu_name_the_database_the_app_watches(
    store: Store, tray: TrayApp
) -> None:
    """Two apps on two homes are two icons (issue 21, item 7): each says which database."""
    where = shown_path(store.path)
    assert where.endswith("/home/signoff.db")
    assert tray.tray.toolTip().startswith(f"Signoff on {where}:")
    assert f"On {where}" in _texts(tray)  # not the platform's own folder: the menu says so too
