"""The history window, offscreen: filters in SQL, lazy pages, the exact request, the chain
banner, the re-check, pending rows and the export."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from PySide6.QtCore import QDateTime, Qt
from PySide6.QtWidgets import QApplication, QComboBox

from app.history import HistoryWindow
from app.history_model import DECIDED, PAGE, TOOL
from app.tray import TrayApp
from core import export
from core.approvals import reject
from core.decisions import Decision
from core.gate import VerdictOutcome
from core.heads import HeadStore, KeyringHeadStore, MemoryHeadStore
from core.operator_key import MemoryKeyStore, OperatorKey
from core.policy import rules
from core.policy.policy import ConfigPolicy
from core.policy.rules import ArgumentRule, Effect
from core.store import Store, format_time
from core.transitions import CallLabel
from tests.app.pending import LINKED, RELATIVE, TOOLS, make_pending
from tests.builders import T0, record_runs
from tests.core.gatekit import make_gate


def allowed_read(store: Store, run_id: str = "read-1", server: str = "files") -> None:
    """A read-only call the default policy allows, as a proxy records it (for a host)."""
    gate = make_gate(store, TOOLS)
    label = CallLabel(server, "read", "r" * 64, "h" * 64, "host-a 1.0 (process 4242)")
    session = gate.begin(run_id, "goal", call=label)
    step = session.step()
    assert step is not None
    verdict = step.propose(Decision.tool_call("read", {"path": "/etc/motd"}))
    assert verdict.outcome == VerdictOutcome.ALLOWED
    asyncio.run(step.execute())
    session.close()


def open_window(store: Store, home: Path, qtbot, heads: HeadStore | None = None) -> HistoryWindow:
    window = HistoryWindow(store, heads or MemoryHeadStore(), home / "config.toml")
    qtbot.addWidget(window)
    return window


def ids(window: HistoryWindow) -> list[str]:
    while window.model.canFetchMore():
        window.model.fetchMore()
    return [r.id for r in window.model.rows]


def choose(box: QComboBox, value: str | None) -> None:
    index = box.findData(value)
    assert index >= 0, f"{value!r} is not offered"
    box.setCurrentIndex(index)


def store_ids(store: Store, where: str = "1", params: tuple = ()) -> list[str]:
    rows = store._conn.execute(
        f"SELECT id FROM runs WHERE {where} ORDER BY created_at DESC, rowid DESC",
        params,
    ).fetchall()
    return [r[0] for r in rows]


def test_filters_and_search_narrow_the_rows_as_the_store_says(
    store: Store, home: Path, qtbot
) -> None:
    record_runs(store, 5, steps=1)
    pending = make_pending(store)
    allowed_read(store)
    window = open_window(store, home, qtbot)
    assert ids(window) == store_ids(store)
    assert len(ids(window)) == 7

    choose(window.server_box, "srv")
    assert ids(window) == store_ids(store, "server = ?", ("srv",)) == [pending.run_id]
    choose(window.server_box, None)

    choose(window.outcome_box, "pending")
    assert ids(window) == ["r1"]
    assert window.model.rows[0].approval_id == pending.id
    choose(window.outcome_box, "completed")
    assert ids(window) == store_ids(store, "status = 'COMPLETED'")
    choose(window.outcome_box, None)

    choose(window.class_box, "read_only")
    assert ids(window) == ["read-1"]
    choose(window.class_box, None)

    choose(window.tool_box, "write_file")
    assert ids(window) == [f"run-{n}" for n in range(5, 0, -1)]
    choose(window.tool_box, None)

    window.search.setText("/tmp/run-3/")
    window.apply_filters()
    assert ids(window) == ["run-3"]
    window.search.setText("push")
    window.apply_filters()
    assert ids(window) == ["r1"]
    window.search.setText("50%_")  # LIKE's wildcards are searched for literally
    window.apply_filters()
    assert ids(window) == []
    window.search.setText("")
    window.apply_filters()

    since, until = T0 + timedelta(seconds=150), T0 + timedelta(hours=1)
    window.since.setDateTime(QDateTime.fromMSecsSinceEpoch(int(since.timestamp() * 1000)))
    window.until.setDateTime(QDateTime.fromMSecsSinceEpoch(int(until.timestamp() * 1000)))
    window.time_range.setChecked(True)
    expected = store_ids(
        store, "created_at >= ? AND created_at <= ?", (format_time(since), format_time(until))
    )
    assert ids(window) == expected == ["run-5", "run-4"]


def test_runs_are_read_a_page_at_a_time_newest_first(store: Store, home: Path, qtbot) -> None:
    record_runs(store, 600, steps=0)
    window = open_window(store, home, qtbot)
    model = window.model
    assert model.rowCount() == PAGE == 200
    assert model.rows[0].id == "run-600"
    assert model.canFetchMore()
    model.fetchMore()
    assert model.rowCount() == 400
    model.fetchMore()
    assert model.rowCount() == 600
    model.fetchMore()
    assert model.rowCount() == 600
    assert not model.canFetchMore()
    assert [r.id for r in model.rows] == [f"run-{n}" for n in range(600, 0, -1)]


def test_sorting_by_a_column_is_done_in_sql_and_pages_on(store: Store, home: Path, qtbot) -> None:
    """Sorted by tool, ascending, across pages: every run once, in the store's own order."""
    record_runs(store, 450, steps=0)
    for n in range(3):
        make_pending(store, tool=["write", "push", "delete"][n], run_id=f"p{n}")
    window = open_window(store, home, qtbot)
    model = window.model
    window.table.sortByColumn(2, Qt.SortOrder.AscendingOrder)
    while model.canFetchMore():
        model.fetchMore()
    got = [r.id for r in model.rows]
    expected = [
        row[0]
        for row in store._conn.execute(
            "SELECT r.id FROM runs r LEFT JOIN steps s ON s.run_id = r.id AND s.idx = 0"
            " ORDER BY COALESCE(r.tool, s.tool_name, ''), r.rowid"
        )
    ]
    assert len(got) == len(set(got)) == 453
    assert got == expected
    window.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
    assert model.rows[0].id == "p2"  # made now, after the builders' runs (dated T0 onwards)


def test_selecting_a_run_shows_its_exact_arguments_request_hash_and_call_hash(
    store: Store, home: Path, qtbot
) -> None:
    record_runs(store, 2, steps=1)
    make_pending(store, arguments={"text": "héllo\nworld", "n": 1.5, "z": [1, {"a": None}]})
    arguments, call_hash = store._conn.execute(
        "SELECT arguments, request_hash FROM steps WHERE run_id = 'r1'"
    ).fetchone()
    (request_hash,) = store._conn.execute(
        "SELECT request_hash FROM approvals WHERE run_id = 'r1'"
    ).fetchone()
    assert request_hash != call_hash
    window = open_window(store, home, qtbot)
    window.table.selectRow(window.model.row_of("r1"))
    assert window.selected_run_id == "r1"
    assert window.request_view.toPlainText() == arguments
    assert window.hash_label.text().startswith(f"Request hash: {request_hash} (fingerprint ")
    assert window.call_hash_label.text() == f"Call hash: {call_hash}"
    assert "not the hash you approve" in window.call_hash_label.toolTip()
    detail = window.detail.toPlainText()
    assert (
        "step.policy" in detail and "ap-r1" in detail
    )  # the approval's id (tests.app.pending names it after the run)
    assert "the rule for remote_mutation: approve" in detail
    window.copy_request.click()
    assert QApplication.clipboard().text() == arguments
    window.copy_hash.click()
    assert QApplication.clipboard().text() == request_hash


def ruled_call(store: Store, run_id: str, tool: str, policy: ConfigPolicy) -> VerdictOutcome:
    """A call of ``tool`` on the files under /home/u/notes, evaluated by ``policy``."""
    gate = make_gate(store, TOOLS, policy=policy)
    session = gate.begin(run_id, "goal", call=CallLabel("files", tool, "k" * 64))
    step = session.step()
    assert step is not None
    verdict = step.propose(Decision.tool_call(tool, {"path": "/home/u/notes/a.md"}))
    if verdict.outcome == VerdictOutcome.ALLOWED:
        asyncio.run(step.execute())
    session.close()
    return verdict.outcome


def test_a_run_a_rule_decided_says_which_rule_in_its_row(store: Store, home: Path, qtbot) -> None:
    notes = rules.on_arguments([("path", rules.under_folder("/home/u/notes"))])
    allow = ArgumentRule.make("files", "write", Effect.ALLOW, notes)
    reject = ArgumentRule.make("files", "push", Effect.REJECT, notes)
    policy = ConfigPolicy(rules={"write": [allow], "push": [reject]})
    assert ruled_call(store, "by-allow", "write", policy) == VerdictOutcome.ALLOWED
    assert ruled_call(store, "by-reject", "push", policy) == VerdictOutcome.DENIED
    assert ruled_call(store, "asked", "push", ConfigPolicy()) == VerdictOutcome.PENDING
    window = open_window(store, home, qtbot)
    model = window.model

    def decided(run_id: str) -> str:
        return model.data(model.index(model.row_of(run_id), DECIDED))

    assert decided("by-allow") == f"allowed by rule {allow.id}"
    assert decided("by-reject") == f"rejected by rule {reject.id}"
    assert decided("asked") == "waiting for you"


@pytest.mark.guarantee("G-RULES-1")
def test_a_decided_run_shows_what_its_values_meant_beside_how_they_were_written(
    store: Store, home: Path, qtbot
) -> None:
    """Read for the page at once, from the runs' policy evaluations: in the row beside the
    tool, and in the detail under the evaluation that read them; a run whose values meant what
    they said shows its tool alone."""
    linked = make_pending(store, arguments={"path": "/srv/link/id"}, read=(LINKED,))
    reject(store, "r1", linked.id, "operator:test", "not my keys",
           operator=OperatorKey(MemoryKeyStore()))  # fmt: skip
    make_pending(store, tool="write", arguments={"to": "notes/id"}, run_id="r2",
                 read=(RELATIVE,))  # fmt: skip
    allowed_read(store)
    window = open_window(store, home, qtbot)
    model = window.model

    def tool(run_id: str) -> str:
        return model.data(model.index(model.row_of(run_id), TOOL))

    said = '"/srv/link/id" resolves to /home/me/.ssh/id'
    unsure = '"notes/id" is a relative path, and the folder it is read against is not known'
    assert tool("r1") == f"push · {said}"
    assert tool("r2") == f"write · {unsure}"
    assert tool("read-1") == "read"
    tip = model.data(model.index(model.row_of("r1"), TOOL), Qt.ItemDataRole.ToolTipRole)
    assert tip.splitlines() == ["push", said]
    window.table.selectRow(model.row_of("r1"))
    assert f"    read: {said}" in window.detail.toPlainText().splitlines()


@pytest.mark.guarantee("G-APP-1")
def test_a_run_shows_the_values_signoff_set_apart_from_its_arguments(
    store: Store, home: Path, qtbot
) -> None:
    make_pending(store, arguments={"to": "origin"}, fixed={"account": "ops", "dryRun": True})
    allowed_read(store)  # a tool with nothing fixed
    window = open_window(store, home, qtbot)
    window.show()
    window.table.selectRow(window.model.row_of("r1"))
    assert window.request_view.toPlainText() == '{"to":"origin"}'  # as stored, as hashed
    shown = 'Set by Signoff (fixed, sent with the arguments): {"account":"ops","dryRun":true}'
    assert window.fixed_label.isVisible() and window.fixed_label.text() == shown
    assert f"  {shown}" in window.detail.toPlainText().splitlines()
    window.copy_request.click()
    assert QApplication.clipboard().text() == '{"to":"origin"}'
    window.table.selectRow(window.model.row_of("read-1"))
    assert not window.fixed_label.isVisible()
    assert "Set by Signoff" not in window.detail.toPlainText()


def test_a_run_that_asked_no_approval_shows_no_request_hash_and_copies_none(
    store: Store, home: Path, qtbot
) -> None:
    allowed_read(store)
    (call_hash,) = store._conn.execute(
        "SELECT request_hash FROM steps WHERE run_id = 'read-1'"
    ).fetchone()
    window = open_window(store, home, qtbot)
    window.table.selectRow(window.model.row_of("read-1"))
    assert window.hash_label.text().startswith("Request hash: - ")
    assert window.call_hash_label.text() == f"Call hash: {call_hash}"
    assert not window.copy_hash.isEnabled()  # the call hash is never offered as the one approved
    assert "asked by host-a 1.0 (process 4242)" in window.detail.toPlainText()


def verify(window: HistoryWindow, qtbot) -> None:
    window.verify_button.click()
    qtbot.waitUntil(lambda: not window.verifying, timeout=10_000)
    assert window.progress.value() == window.progress.maximum()


def test_the_banner_says_verified_and_anchored(store: Store, home: Path, qtbot) -> None:
    record_runs(store, 30, steps=2)
    heads = MemoryHeadStore()
    heads.save(store.head())
    window = open_window(store, home, qtbot, heads)
    verify(window, qtbot)
    assert window.banner_state == "anchored"
    n = store.head().seq
    assert f"verified up to event {n} and anchored in the keyring" in window.banner.text()


def test_without_a_keyring_the_banner_says_not_anchored(store: Store, home: Path, qtbot) -> None:
    from keyring.backends import fail

    record_runs(store, 3)
    window = open_window(store, home, qtbot, KeyringHeadStore(fail.Keyring()))
    verify(window, qtbot)
    assert window.banner_state == "not_anchored"
    assert "not anchored" in window.banner.text()


def test_an_edited_event_shows_the_chain_broken_there(store: Store, home: Path, qtbot) -> None:
    record_runs(store, 3)
    heads = MemoryHeadStore()
    heads.save(store.head())
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE events SET payload = '{}' WHERE seq = 3")
    conn.commit()
    conn.close()
    window = open_window(store, home, qtbot, heads)
    verify(window, qtbot)
    assert window.banner_state == "broken"
    assert window.banner.text().startswith("Record broken at event 3:")


def test_a_rewound_log_is_broken_against_the_kept_head(store: Store, home: Path, qtbot) -> None:
    record_runs(store, 3)
    heads = MemoryHeadStore()
    heads.save(store.head())
    last = store.head().seq
    conn = sqlite3.connect(store.path)
    conn.execute("DELETE FROM events WHERE seq = ?", (last,))
    conn.commit()
    conn.close()
    window = open_window(store, home, qtbot, heads)
    verify(window, qtbot)
    assert window.banner_state == "broken"
    assert f"event {last} was witnessed" in window.banner.text()


def test_recheck_lists_what_todays_policy_decides_differently(
    store: Store, home: Path, qtbot
) -> None:
    allowed_read(store)
    make_pending(store)
    record_runs(store, 2, steps=1)
    (home / "config.toml").write_text('[policy]\nread_only = "deny"\n')
    window = open_window(store, home, qtbot)

    window.table.selectRow(window.model.row_of("r1"))
    window.recheck_selected()
    qtbot.waitUntil(lambda: not window.rechecking, timeout=10_000)
    assert "the same decisions" in window.recheck_view.toPlainText()

    window.recheck_all()
    qtbot.waitUntil(lambda: not window.rechecking, timeout=10_000)
    text = window.recheck_view.toPlainText()
    assert "4 runs" in text and "1 differ" in text
    lines = [line for line in text.splitlines() if line.startswith("read-1 ")]
    assert len(lines) == 1
    assert "step 0: then allow" in lines[0] and "now deny" in lines[0]


def test_a_pending_row_opens_its_approval(store: Store, home: Path, qtbot) -> None:
    record_runs(store, 2)
    approval = make_pending(store)
    window = open_window(store, home, qtbot)
    completed = window.model.index(window.model.row_of("run-1"), 0)
    with qtbot.assertNotEmitted(window.open_approval):
        window.table.doubleClicked.emit(completed)
    pending = window.model.index(window.model.row_of("r1"), 4)
    assert pending.data() == "Pending"
    with qtbot.waitSignal(window.open_approval, timeout=1000) as blocker:
        window.table.doubleClicked.emit(pending)
    assert blocker.args == [approval.id]


def test_export_writes_a_file_the_verifier_accepts(
    store: Store, home: Path, tmp_path: Path, qtbot
) -> None:
    record_runs(store, 3)
    make_pending(store)
    window = open_window(store, home, qtbot)
    everything = tmp_path / "all.jsonl"
    assert window.export_to(everything) == 4
    assert export.verify_export(everything.read_text(encoding="utf-8").splitlines()) > 0
    window.table.selectRow(window.model.row_of("run-2"))
    chosen = tmp_path / "one.jsonl"
    assert window.export_to(chosen, window.selected_run_ids()) == 1
    assert export.verify_export(chosen.read_text(encoding="utf-8").splitlines()) > 0
    assert (chosen.stat().st_mode & 0o777) == 0o600


@pytest.mark.guarantee("G-CHAIN-2")
def test_the_tray_opens_one_history_window_and_keeps_it_fresh(
    store: Store, home: Path, qtbot
) -> None:
    tray = TrayApp(store, MemoryHeadStore(), home, native=False)
    tray.start()
    try:
        action = next(a for a in tray.menu.actions() if a.text() == "History…")
        assert action.isEnabled()
        action.trigger()
        window = tray.history
        assert window is not None and window.isVisible()
        # the witness anchors on its own thread: the banner follows it, whichever is first
        qtbot.waitUntil(lambda: window.banner_state == "anchored", timeout=10_000)
        next(a for a in tray.menu.actions() if a.text() == "History…").trigger()
        assert tray.history is window
        approval = make_pending(store)
        tray.refresh()
        assert [r.id for r in window.model.rows] == ["r1"]
        window.table.doubleClicked.emit(window.model.index(0, 0))
        assert approval.id in tray.dialogs
        tray.dialogs[approval.id].close()
        window.close()
    finally:
        tray.stop()


@pytest.mark.guarantee("G-CHAIN-2")
def test_a_history_opened_before_the_witness_anchors_says_so_once_it_has(
    store: Store, home: Path, qtbot
) -> None:
    """The banner follows the witness: "not anchored" while the keyring holds no head, then,
    once the witness has anchored the chain, "anchored", with no click."""
    tray = TrayApp(store, MemoryHeadStore(), home, native=False)
    try:
        window = tray.open_history()
        qtbot.waitUntil(lambda: window.banner_state == "not_anchored", timeout=10_000)
        assert "holds no head" in window.banner.text()
        tray.start()
        qtbot.waitUntil(lambda: window.banner_state == "anchored", timeout=10_000)
        window.close()
    finally:
        tray.stop()


@pytest.mark.guarantee("G-CHAIN-2")
def test_a_witness_that_anchors_during_a_verification_is_verified_again(
    store: Store, home: Path, qtbot
) -> None:
    """The kept head was read (none yet) and the chain is still being verified when the
    witness anchors it: the verification under way ends, then one more says "anchored"."""
    tray = TrayApp(store, MemoryHeadStore(), home, native=False)
    try:
        window = tray.open_history()  # verifying; its ticks wait for this test's event loop
        assert window.verifying
        assert window._kept is not None and window._kept.result(timeout=10) is None
        tray.start()
        tray.witness.drain()  # the witness anchored, and said so while the window verifies
        assert tray.model.witness.anchored and window.verifying
        qtbot.waitUntil(lambda: window.banner_state == "anchored", timeout=10_000)
        window.close()
    finally:
        tray.stop()
