"""An approval nobody gave is never executed, and a database restored from before an approved
side effect executes nothing (core/operator_key.py, core/anchor.py).

The attacker here can write Signoff's files (the database, with the sqlite3 module or the
store's own append) but cannot read the OS keyring: the operator key and the kept head live
there. Each test builds the attack, then shows that the tool was not called, and why.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from core import canonical, operator_key
from core.anchor import Anchor
from core.approvals import approve, reject
from core.decisions import Decision
from core.errors import (
    DatabaseRestored,
    DecisionUnauthenticated,
    GrantUsed,
    HeadUnavailable,
    NotAnchored,
    OperatorKeyUnavailable,
    StateDisagrees,
)
from core.gate import Gate, VerdictOutcome
from core.heads import KeyringHeadStore
from core.limits import Limits
from core.operator_key import KeyringKeyStore, OperatorKey
from core.records import read_approval
from core.replay import check_state
from core.store import Store, format_time
from core.verify import verify
from tests.conftest import ROOT, KeyringUnderTest
from tests.core.gatekit import Calls, FakeClock, make_gate, standard_tools
from tests.forgery import FORGED_MACS, event, forged_mac, rewrite_event


class Operator:
    """The operator's side, over a real keyring backend: the key and the kept head."""

    def __init__(self, keyring: KeyringUnderTest) -> None:
        self.key = OperatorKey(KeyringKeyStore(keyring.backend))  # type: ignore[arg-type]
        self.heads = KeyringHeadStore(keyring.backend)  # type: ignore[arg-type]
        self.anchor = Anchor(self.heads)


@pytest.fixture
def operator(keyring_under_test: KeyringUnderTest) -> Operator:
    return Operator(keyring_under_test)


def gate(store: Store, operator: Operator, calls: Calls, **kw: object) -> Gate:
    return make_gate(store, standard_tools(calls), operator=kw.pop("key", operator.key),
                     anchor=kw.pop("anchor", operator.anchor), **kw)  # fmt: skip


def pending(g: Gate, run_id: str = "r", n: int = 7) -> str:
    """A write waiting for the operator; its approval id."""
    s = g.begin(run_id, "goal", None)
    v = s.step().propose(Decision.tool_call("write", {"n": n}))
    assert v.outcome == VerdictOutcome.PENDING and v.approval is not None
    return v.approval.id


def attach_and_execute(g: Gate, run_id: str = "r") -> object:
    s, v = g.attach(run_id)
    assert v is not None and v.outcome == VerdictOutcome.ALLOWED, v
    return asyncio.run(s.current().execute())


def sql(store: Store, statement: str, params: tuple = ()) -> None:
    """A write to the database file from outside Signoff, as an agent's file tool could."""
    conn = sqlite3.connect(store.path)
    conn.execute(statement, params)
    conn.commit()
    conn.close()


def forge_decision(store: Store, approval_id: str, **payload: object) -> None:
    """An ``approval.decided`` event appended with a chain hash that verifies (the chain is not
    keyed), and the approvals row set to match: all a file writer can do."""
    with store.snapshot() as conn:
        approval = read_approval(conn, approval_id)
    assert approval is not None
    body = {"approval": approval_id, "status": "approved", "by": "operator", "reason": "",
            "request_hash": approval.request_hash, "key": None, "mac": None, **payload}  # fmt: skip
    with store.transaction() as tx:
        tx.execute("UPDATE approvals SET status = 'approved', decided_by = 'operator',"
                   " decided_at = created_at WHERE id = ?", (approval_id,))  # fmt: skip
        tx.append_event(kind="approval.decided", payload=body, at=approval.created_at,
                        run_id=approval.run_id, step=approval.step)  # fmt: skip


def still_waiting(store: Store, run_id: str = "r") -> bool:
    with store.snapshot() as conn:
        (status,) = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    return bool(status == "WAITING_FOR_APPROVAL")


# --- a grant is executed only on an authenticated decision ---------------------------------


@pytest.mark.guarantee("G-KEY-1")
def test_an_approvals_row_set_to_approved_with_no_event_executes_nothing(
    home: Path, operator: Operator
) -> None:
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approval_id = pending(g)
        sql(store, "UPDATE approvals SET status = 'approved', decided_by = 'operator:me',"
                   " decided_at = created_at WHERE id = ?", (approval_id,))  # fmt: skip
        with pytest.raises(DecisionUnauthenticated, match="0 decisions"):
            g.attach("r")
        assert calls.made == [] and still_waiting(store)
        with pytest.raises(StateDisagrees) as e:
            check_state(store, operator.key)
        assert e.value.row == f"approvals {approval_id}"


@pytest.mark.guarantee("G-KEY-1")
@pytest.mark.parametrize("mac", [None, "0" * 64])
def test_a_forged_decision_event_executes_nothing(
    home: Path, operator: Operator, mac: str | None
) -> None:
    """No MAC, or a made-up one, on an event whose chain hash verifies."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        operator.key.key_for_deciding(store)  # the database has a key: a MAC is required
        approval_id = pending(g)
        forge_decision(store, approval_id, mac=mac, key=None if mac is None else "0" * 16)
        with pytest.raises(DecisionUnauthenticated, match=r"MAC|operator key"):
            g.attach("r")
        assert calls.made == [] and still_waiting(store)
        with pytest.raises(StateDisagrees):
            check_state(store, operator.key)


@pytest.mark.guarantee("G-KEY-1")
def test_a_decision_signed_by_another_databases_key_executes_nothing(
    home: Path, operator: Operator
) -> None:
    """The same request in another database, really approved there: its event, copied byte
    for byte, does not approve it here."""
    calls = Calls()
    other_home = home / "other"
    other_home.mkdir(mode=0o700)
    with Store.open(other_home / "signoff.db") as other:
        approval_id = pending(gate(other, operator, Calls()))
        approve(other, "r", approval_id, "operator", operator=operator.key)
        (copied,) = other._conn.execute(
            "SELECT payload FROM events WHERE kind = 'approval.decided'"
        ).fetchone()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        assert pending(g) == approval_id  # same id, run, step and request hash
        operator.key.key_for_deciding(store)
        forge_decision(store, approval_id, **canonical.loads(copied))  # type: ignore[arg-type]
        with pytest.raises(DecisionUnauthenticated, match="not authenticated"):
            g.attach("r")
        assert calls.made == [] and still_waiting(store)


@pytest.mark.guarantee("G-KEY-1")
def test_a_decision_copied_from_another_approval_executes_nothing(
    home: Path, operator: Operator
) -> None:
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        first = pending(g, "r1", n=1)
        second = pending(g, "r2", n=1)
        approve(store, "r1", first, "operator", operator=operator.key)
        (copied,) = store._conn.execute(
            "SELECT payload FROM events WHERE kind = 'approval.decided'"
        ).fetchone()
        payload = canonical.loads(copied)
        assert isinstance(payload, dict)
        with store.snapshot() as conn:
            wanted = read_approval(conn, second)
        assert wanted is not None  # the copy renamed for it, down to its request hash:
        forge_decision(store, second, **{**payload, "approval": second,
                                         "request_hash": wanted.request_hash})  # fmt: skip
        with pytest.raises(DecisionUnauthenticated, match="not authenticated"):
            g.attach("r2")
        assert calls.made == [] and still_waiting(store, "r2")
        attach_and_execute(g, "r1")  # the real one still runs
        assert calls.made == [("write", {"n": 1})]


def decision_of(store: Store, run_id: str) -> int:
    """The stored ``approval.decided`` event of run ``run_id``."""
    (seq,) = store._conn.execute(
        "SELECT seq FROM events WHERE kind = 'approval.decided' AND run_id = ?", (run_id,)
    ).fetchone()
    return int(seq)


def two_real_decisions(store: Store, g: Gate, operator: Operator) -> tuple[int, str, str]:
    """The operator approves run r's write and run r2's: r's decision (its event), its MAC,
    and r2's MAC (another record, signed with the same key)."""
    approve(store, "r", pending(g, "r", n=7), "operator", operator=operator.key)
    approve(store, "r2", pending(g, "r2", n=8), "operator", operator=operator.key)
    seq = decision_of(store, "r")
    mac = event(store.path, seq)[3]["mac"]
    other = event(store.path, decision_of(store, "r2"))[3]["mac"]
    assert isinstance(mac, str) and isinstance(other, str)
    return seq, mac, other


@pytest.mark.guarantee("G-KEY-1")
@pytest.mark.parametrize("how", FORGED_MACS)
def test_a_decision_whose_mac_is_forged_under_the_real_key_id_executes_nothing(
    home: Path, operator: Operator, how: str
) -> None:
    """The key id is in every signed event, so a database writer copies it: a real decision's
    MAC is rewritten, with the chain's hashes computed again (the chain verifies), to one near
    it. Only the comparison of the MAC can refuse it."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        seq, right, other = two_real_decisions(store, g, operator)
        key = event(store.path, seq)[3]["key"]
        rewrite_event(store.path, seq, mac=forged_mac(how, right, other))
        assert event(store.path, seq)[3]["key"] == key  # the real key id
        verify(store)  # the chain holds: only the MAC tells
        with pytest.raises(DecisionUnauthenticated):
            g.attach("r")
        assert calls.made == [] and still_waiting(store)
        attach_and_execute(g, "r2")  # the real one beside it runs
    assert calls.made == [("write", {"n": 8})]


@pytest.mark.guarantee("G-CHAIN-3")
@pytest.mark.parametrize("how", FORGED_MACS)
def test_verify_names_a_decision_whose_mac_is_forged_under_the_real_key_id(
    home: Path, operator: Operator, how: str
) -> None:
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, Calls())
        seq, right, other = two_real_decisions(store, g, operator)
        assert check_state(store, operator.key) == 2
        rewrite_event(store.path, seq, mac=forged_mac(how, right, other))
        approval_id = event(store.path, seq)[3]["approval"]
        with pytest.raises(StateDisagrees) as e:
            check_state(store, operator.key)
        assert e.value.row == f"approvals {approval_id}"


# What a decision's MAC covers (core/operator_key.py rule 2), each changed in the stored
# event, and in the tables to agree with it, by a writer of the database file. Its run and
# step are covered through its request hash too (the request names them), and its version and
# database are the code's and the key's own: no write to the file changes them.
def _edit_approval(store: Store, seq: int) -> None:
    (old,) = store._conn.execute("SELECT id FROM approvals WHERE run_id = 'r'").fetchone()
    renamed = ("UPDATE approvals SET id = 'ap-renamed' WHERE id = ?", (old,))
    rewrite_event(store.path, seq, approval="ap-renamed", sql=(renamed,))


def _edit_request(store: Store, seq: int) -> None:
    """The step's arguments, its request and the request hash, consistently: the binding holds."""
    (text,) = store._conn.execute("SELECT request FROM approvals WHERE run_id = 'r'").fetchone()
    request = canonical.loads(text)
    request["arguments"] = {"n": 666}
    new_hash = canonical.sha256_hex(request)
    rewrite_event(store.path, seq, request_hash=new_hash, sql=(
        ("UPDATE steps SET arguments = ? WHERE run_id = 'r'", ('{"n":666}',)),
        ("UPDATE approvals SET request = ?, request_hash = ? WHERE run_id = 'r'",
         (canonical.dumps_text(request), new_hash)),
    ))  # fmt: skip


def _edit_by(store: Store, seq: int) -> None:
    row = ("UPDATE approvals SET decided_by = 'operator:someone-else'", ())
    rewrite_event(store.path, seq, by="operator:someone-else", sql=(row,))


def _edit_reason(store: Store, seq: int) -> None:
    row = ("UPDATE approvals SET decided_reason = 'approved, said the agent'", ())
    rewrite_event(store.path, seq, reason="approved, said the agent", sql=(row,))


def _edit_at(store: Store, seq: int) -> None:
    later = format_time(datetime.fromisoformat(event(store.path, seq)[4]) + timedelta(seconds=1))
    rewrite_event(
        store.path, seq, at=later, sql=(("UPDATE approvals SET decided_at = ?", (later,)),)
    )


DECISION_FIELDS = {
    "approval": _edit_approval,
    "request_hash": _edit_request,
    "by": _edit_by,
    "reason": _edit_reason,
    "at": _edit_at,
}


@pytest.mark.guarantee("G-KEY-1")
@pytest.mark.parametrize("field", [*DECISION_FIELDS, "status"])
def test_a_real_decision_edited_in_any_field_its_mac_covers_executes_nothing(
    home: Path, operator: Operator, field: str
) -> None:
    """The MAC kept, one signed field changed (the status: a real rejection made an approval,
    the tables set back to waiting)."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approval_id = pending(g)
        if field == "status":
            reject(store, "r", approval_id, "operator", "no", operator=operator.key)
            rewrite_event(store.path, decision_of(store, "r"), status="approved", sql=(
                ("UPDATE approvals SET status = 'approved'", ()),
                ("UPDATE runs SET status = 'WAITING_FOR_APPROVAL', end_reason = NULL", ()),
                ("UPDATE steps SET status = 'pending', observation = NULL", ()),
            ))  # fmt: skip
        else:
            approve(store, "r", approval_id, "operator", operator=operator.key)
            DECISION_FIELDS[field](store, decision_of(store, "r"))
        verify(store)
        with pytest.raises(DecisionUnauthenticated):
            g.attach("r")
        assert calls.made == []


@pytest.mark.guarantee("G-KEY-1")
def test_an_approvals_row_edited_after_a_real_rejection_executes_nothing(
    home: Path, operator: Operator
) -> None:
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approval_id = pending(g)
        reject(store, "r", approval_id, "operator", "no", operator=operator.key)
        sql(store, "UPDATE approvals SET status = 'approved' WHERE id = ?", (approval_id,))
        sql(store, "UPDATE runs SET status = 'WAITING_FOR_APPROVAL', end_reason = NULL")
        sql(store, "UPDATE steps SET status = 'pending', observation = NULL")
        with pytest.raises(DecisionUnauthenticated, match="says 'rejected'"):
            g.attach("r")
        assert calls.made == []
        with pytest.raises(StateDisagrees) as e:
            check_state(store, operator.key)
        assert e.value.row == "runs r"


@pytest.mark.guarantee("G-KEY-1")
def test_a_request_rewritten_after_a_real_approval_executes_nothing(
    home: Path, operator: Operator
) -> None:
    """The step's arguments, the approval's request and its hash rewritten together, so the
    binding check passes: the authenticated decision names the old hash."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approval_id = pending(g)
        approve(store, "r", approval_id, "operator", operator=operator.key)
        with store.snapshot() as conn:
            approval = read_approval(conn, approval_id)
        assert approval is not None
        request = canonical.loads(approval.request)
        assert isinstance(request, dict)
        request["arguments"] = {"n": 666}
        new_hash = canonical.sha256_hex(request)
        sql(store, "UPDATE steps SET arguments = ? WHERE run_id = 'r'", ('{"n":666}',))
        sql(store, "UPDATE approvals SET request = ?, request_hash = ? WHERE id = ?",
            (canonical.dumps_text(request), new_hash, approval_id))  # fmt: skip
        with pytest.raises(DecisionUnauthenticated, match="another request"):
            g.attach("r")
        assert calls.made == []


@pytest.mark.guarantee("G-KEY-1")
def test_unsigned_decisions_run_only_in_the_unauthenticated_mode_the_operator_chose(
    home: Path, operator: Operator
) -> None:
    """No key in the keyring: an unsigned decision is refused until the operator chooses
    unauthenticated mode (recorded in the chain), then it runs, and verify can say so."""
    calls = Calls()
    failing = OperatorKey(KeyringKeyStore(_failing_backend()))
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls, key=failing, anchor=Anchor(KeyringHeadStore(
            _failing_backend())))  # fmt: skip
        approval_id = pending(g)
        with pytest.raises(OperatorKeyUnavailable):
            approve(store, "r", approval_id, "operator", operator=failing)
        assert calls.made == []
        forge_decision(store, approval_id)  # unsigned, before any choice
        with pytest.raises(DecisionUnauthenticated, match="did not choose"):
            g.attach("r")
        assert calls.made == []
    with Store.open(home / "second.db") as store:
        g = gate(store, operator, calls, key=failing, anchor=Anchor(KeyringHeadStore(
            _failing_backend())))  # fmt: skip
        approval_id = pending(g)
        assert operator_key.choose_mode(store, unauthenticated=True, by="operator", reason="x")
        approve(store, "r", approval_id, "operator", operator=failing)
        attach_and_execute(g)
        assert calls.made == [("write", {"n": 7})]
        assert check_state(store, failing) == 0  # nothing signed, nothing refused


@pytest.mark.guarantee("G-KEY-1")
def test_a_database_with_a_key_is_not_downgraded_by_an_appended_mode_event(
    home: Path, operator: Operator
) -> None:
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        operator.key.key_for_deciding(store)
        approval_id = pending(g)
        operator_key.choose_mode(store, unauthenticated=True, by="anybody")  # a file write
        forge_decision(store, approval_id)
        with pytest.raises(DecisionUnauthenticated, match="holds an operator key"):
            g.attach("r")
        assert calls.made == []


@pytest.mark.guarantee("G-KEY-1")
def test_an_appended_mode_event_runs_nothing_where_a_keyring_works_even_before_any_key(
    home: Path, operator: Operator
) -> None:
    """The mode event is unsigned: on a database no decision was signed on yet (so its
    keyring holds no key), a file writer appending it and an unsigned "approved" gets nothing
    run where a keyring works, since every decision there is signed."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approval_id = pending(g)
        assert operator.key.key(store.database_id) is None  # nothing signed here yet
        operator_key.choose_mode(store, unauthenticated=True, by="anybody")  # a file write
        forge_decision(store, approval_id)
        with pytest.raises(DecisionUnauthenticated, match="a keyring can keep an operator key"):
            g.attach("r")
        assert calls.made == []


# --- a database restored from before an approved side effect executes nothing --------------


def backup(store: Store, to: Path) -> None:
    """A consistent copy, with SQLite's own backup API (what a backup tool or a sync takes)."""
    target = sqlite3.connect(to)
    store._conn.backup(target)
    target.close()


def restore(copy: Path, database: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(str(database) + suffix).unlink(missing_ok=True)
    shutil.copyfile(copy, database)


@pytest.mark.guarantee("G-KEY-2")
def test_a_database_restored_from_before_an_approved_write_does_not_run_it_again(
    home: Path, operator: Operator, tmp_path: Path
) -> None:
    calls = Calls()
    database = home / "signoff.db"
    with Store.open(database) as store:
        g = gate(store, operator, calls)
        approval_id = pending(g)
        approve(store, "r", approval_id, "operator", operator=operator.key)
        backup(store, tmp_path / "before.db")  # approved, not yet run
        attach_and_execute(g)
        kept = operator.heads.load(store.database_id)
        assert kept is not None and kept.seq < store.head().seq  # its start, anchored
    assert calls.made == [("write", {"n": 7})]
    restore(tmp_path / "before.db", database)
    with Store.open(database) as store:
        g = gate(store, operator, calls)
        s, v = g.attach("r")  # the grant looks valid: approved, signed, bound
        assert v is not None and v.outcome == VerdictOutcome.ALLOWED
        with pytest.raises(DatabaseRestored, match="ends before event"):
            asyncio.run(s.current().execute())
        assert not store._conn.execute(
            "SELECT 1 FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()  # nothing was written either
    assert calls.made == [("write", {"n": 7})]  # once


@pytest.mark.guarantee("G-KEY-2")
def test_a_database_restored_from_after_the_anchor_runs_normally(
    home: Path, operator: Operator, tmp_path: Path
) -> None:
    calls = Calls()
    database = home / "signoff.db"
    with Store.open(database) as store:
        g = gate(store, operator, calls)
        approve(store, "r", pending(g), "operator", operator=operator.key)
        attach_and_execute(g)
        backup(store, tmp_path / "after.db")
    restore(tmp_path / "after.db", database)
    with Store.open(database) as store:
        g = gate(store, operator, calls, new_id=lambda: "ap-after")
        approve(store, "r2", pending(g, "r2", n=8), "operator", operator=operator.key)
        attach_and_execute(g, "r2")
    assert calls.made == [("write", {"n": 7}), ("write", {"n": 8})]


@pytest.mark.guarantee("G-KEY-2")
def test_a_keyring_failing_after_the_start_fails_the_step_and_runs_nothing(
    home: Path, operator: Operator
) -> None:
    """The kept head read works, its write fails: the tool is not called, and the step says
    so (it is known not to have run, so it is not left as 'may have run')."""
    calls = Calls()

    class SaveFails(KeyringHeadStore):
        def save(self, head: object) -> None:
            raise HeadUnavailable("the keyring went away")

    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls, anchor=Anchor(SaveFails(operator.heads._backend)))
        approve(store, "r", pending(g), "operator", operator=operator.key)
        with pytest.raises(NotAnchored):
            attach_and_execute(g)
        assert calls.made == []
        row = store._conn.execute("SELECT status, end_reason FROM runs").fetchone()
        assert tuple(row) == ("FAILED", "not_anchored")
        check_state(store, operator.key)


@pytest.mark.guarantee("G-KEY-2")
def test_an_older_head_never_replaces_a_newer_one(home: Path, operator: Operator) -> None:
    """A writer that read the head before another moved it (a slow proxy) leaves it kept."""
    with Store.open(home / "signoff.db") as store:
        for i in range(3):
            with store.transaction() as tx:
                tx.append_event(kind="policy.changed", payload={"i": i}, at="t")
        older = store.head()
        with store.transaction() as tx:
            tx.append_event(kind="policy.changed", payload={"i": 3}, at="t")
        newer = store.head()
        assert operator.anchor.advance(store, newer) == newer
        slow = Anchor(operator.anchor.heads)  # another proxy's, which read the head earlier
        assert slow.advance(store, older) == newer
        assert operator.heads.load(store.database_id) == newer


WRITER = """
import sys
from core.anchor import Anchor
from core.heads import KeyringHeadStore
from core.store import Store

with Store.open(sys.argv[1]) as store:
    anchor = Anchor(KeyringHeadStore())
    for i in range(int(sys.argv[2])):
        with store.transaction() as tx:
            tx.append_event(kind="policy.changed", payload={"i": i}, at="t")
        anchor.advance(store, store.head())
"""


@pytest.mark.guarantee("G-KEY-2")
def test_anchoring_from_several_processes_at_once_never_moves_the_head_back(
    home: Path, operator: Operator, keyring_under_test: KeyringUnderTest
) -> None:
    """Three processes (as two proxies and the tray are), each appending and anchoring as fast
    as it can, with the real keyring; this one reads the kept head throughout: its sequence
    never decreases, and ends at the last event."""
    database = home / "signoff.db"
    with Store.open(database) as store:
        database_id = store.database_id
    env = {**os.environ, **keyring_under_test.env, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(database), "20"], env=env)
        for _ in range(3)
    ]
    seen: list[int] = []
    while any(w.poll() is None for w in writers):
        kept = operator.heads.load(database_id)
        if kept is not None:
            seen.append(kept.seq)
    assert [w.returncode for w in writers] == [0, 0, 0]
    kept = operator.heads.load(database_id)
    assert kept is not None and kept.seq == 60
    seen.append(kept.seq)
    assert seen == sorted(seen) and len(set(seen)) > 1


def _failing_backend() -> object:
    from keyring.backends import fail

    return fail.Keyring()


@pytest.mark.guarantee("G-KEY-2")
def test_an_allowed_read_only_call_touches_no_keyring(home: Path) -> None:
    """The operator key and the anchor are for approved side effects: a read the policy allows
    runs with a keyring whose every call fails the test."""

    class Untouchable:
        def get_password(self, service: str, username: str) -> None:
            raise AssertionError(f"the keyring was read: {username}")

        def set_password(self, service: str, username: str, password: str) -> None:
            raise AssertionError(f"the keyring was written: {username}")

    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = make_gate(store, standard_tools(calls),
                      operator=OperatorKey(KeyringKeyStore(Untouchable())),  # type: ignore[arg-type]
                      anchor=Anchor(KeyringHeadStore(Untouchable())))  # type: ignore[arg-type]  # fmt: skip
        s = g.begin("r", "goal", None)
        step = s.step()
        assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED
        observation = asyncio.run(step.execute())
    assert observation.ok and calls.made == [("read", {"n": 1})]


@pytest.mark.guarantee("G-KEY-1")
def test_a_used_grant_set_back_to_waiting_in_the_tables_does_not_run_again(
    home: Path, operator: Operator
) -> None:
    """After an approved write ran, its approval, step and run are set back to "approved,
    waiting" in the tables, no event written: the chain says the grant was used."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approve(store, "r", pending(g), "operator", operator=operator.key)
        attach_and_execute(g)
        sql(store, "UPDATE approvals SET status = 'approved'")
        sql(store, "UPDATE steps SET status = 'pending', observation = NULL")
        sql(store, "UPDATE runs SET status = 'WAITING_FOR_APPROVAL', lease_owner = NULL")
        with pytest.raises(GrantUsed, match="already used"):
            g.attach("r")
    assert calls.made == [("write", {"n": 7})]


@pytest.mark.guarantee("G-KEY-1")
def test_a_grant_ttl_removed_from_the_tables_still_lapses(home: Path, operator: Operator) -> None:
    """The TTL the run started with is in its run.started event: editing runs.limits (or
    decided_at) does not keep a stale grant alive."""
    calls = Calls()
    clock = FakeClock()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls, clock=clock)
        s = g.begin("r", "goal", Limits(grant_ttl_seconds=60))
        v = s.step().propose(Decision.tool_call("write", {"n": 7}))
        assert v.approval is not None
        approve(store, "r", v.approval.id, "operator", operator=operator.key, now=clock())
        clock.advance(3600)
        sql(store, "UPDATE runs SET limits = '{}'")
        sql(store, "UPDATE approvals SET decided_at = ?", (format_time(clock()),))
        _, verdict = g.attach("r")
    assert verdict is not None and verdict.outcome == VerdictOutcome.ENDED
    assert calls.made == []


class _Failing:
    """A keyring that is there but fails every call (locked, its daemon gone)."""

    def get_password(self, service: str, username: str) -> None:
        raise RuntimeError("the collection is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError("the collection is locked")


@pytest.mark.guarantee("G-KEY-1")
@pytest.mark.parametrize("keyring", ["no keyring at all", "a failing keyring"])
def test_a_keyed_database_is_not_downgraded_with_its_keyring_out_of_reach(
    home: Path, operator: Operator, keyring: str
) -> None:
    """Its first signed decision recorded operator.keyed: with the keyring then unreachable
    (keyring's own no-keyring backend, or one that fails), an appended mode event and an
    unsigned decision run nothing."""
    calls = Calls()
    with Store.open(home / "signoff.db") as store:
        g = gate(store, operator, calls)
        approve(store, "r1", pending(g, "r1", n=1), "operator", operator=operator.key)
        second = pending(g, "r2", n=2)
        backend = _failing_backend() if keyring == "no keyring at all" else _Failing()
        unreachable = OperatorKey(KeyringKeyStore(backend))  # type: ignore[arg-type]
        g = gate(store, operator, calls, key=unreachable, anchor=None)
        operator_key.choose_mode(store, unauthenticated=True, by="anybody")
        forge_decision(store, second)
        expected = (
            DecisionUnauthenticated if keyring == "no keyring at all" else OperatorKeyUnavailable
        )
        with pytest.raises(expected):
            g.attach("r2")
    assert calls.made == []
