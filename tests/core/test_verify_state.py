"""``signoff verify`` rebuilds the runs, steps and approvals from the events and compares them
with the tables (core/replay.py): each edit of a state table behind the chain is found, and
the first row that disagrees is named; exit 1.

The record is a real gate's: a read allowed and completed, a write approved by the operator
(signed with the key in the real keyring) and run, a push rejected, a write still waiting.
Each case edits a copy of it with the sqlite3 module, as anybody who can write the file can.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from core import transitions
from core.anchor import Anchor
from core.approvals import approve, reject
from core.decisions import Decision
from core.errors import StateDisagrees
from core.gate import VerdictOutcome
from core.heads import KeyringHeadStore
from core.operator_key import KeyringKeyStore, OperatorKey
from core.replay import check_state
from core.store import Store
from tests.conftest import KeyringUnderTest, run_signoff
from tests.core.gatekit import Calls, make_gate, standard_tools

EDITS = {
    "a run's status": ("UPDATE runs SET status = 'CANCELLED' WHERE id = 'read'", "runs read"),
    "a run's result": ("UPDATE runs SET result = '\"other\"' WHERE id = 'read'", "runs read"),
    "a run's row deleted": ("DELETE FROM runs WHERE id = 'read'", "runs read"),
    "a run's row added": (
        "INSERT INTO runs (id, goal, status, limits, created_at, updated_at)"
        " VALUES ('made-up', 'g', 'COMPLETED', '{}', '2026-01-01', '2026-01-01')",
        "runs made-up",
    ),
    "a step's outcome": (
        'UPDATE steps SET observation = \'{"ok":true,"result":"other"}\' WHERE run_id = \'write\'',
        "steps write/0",
    ),
    "a step's status": ("UPDATE steps SET status = 'failed' WHERE run_id = 'wait'", "steps wait/0"),
    "an approval's status": (
        "UPDATE approvals SET status = 'approved' WHERE run_id = 'wait'",
        "approvals ap-3",
    ),
    "who decided an approval": (
        "UPDATE approvals SET decided_by = 'operator:someone-else' WHERE run_id = 'write'",
        "approvals ap-1",
    ),
    "a rejection made an approval": (
        "UPDATE approvals SET status = 'approved' WHERE run_id = 'push'",
        "approvals ap-2",
    ),
}


def build(home: Path, keyring: KeyringUnderTest) -> Path:
    operator = OperatorKey(KeyringKeyStore(keyring.backend))  # type: ignore[arg-type]
    anchor = Anchor(KeyringHeadStore(keyring.backend))  # type: ignore[arg-type]
    database = home / "signoff.db"
    with Store.open(database) as store:
        g = make_gate(store, standard_tools(Calls()), operator=operator, anchor=anchor)

        def start(run_id: str, tool: str) -> str | None:
            s = g.begin(run_id, "goal", None)
            v = s.step().propose(Decision.tool_call(tool, {"n": 1}))
            if v.outcome == VerdictOutcome.ALLOWED:
                asyncio.run(s.current().execute())
                s.step().propose(Decision.complete('"done"'))
                return None
            assert v.approval is not None
            return v.approval.id

        start("read", "read")
        approve(store, "write", start("write", "write") or "", "operator:me", operator=operator)
        s, _ = g.attach("write")
        asyncio.run(s.current().execute())
        reject(store, "push", start("push", "push") or "", "operator:me", "no", operator=operator)
        start("wait", "write")
    return database


@pytest.mark.guarantee("G-CHAIN-3")
def test_each_edit_of_a_state_table_is_found_by_verify_naming_the_row(
    home: Path, tmp_path: Path, keyring_under_test: KeyringUnderTest
) -> None:
    database = build(home, keyring_under_test)
    pristine = tmp_path / "pristine.db"
    shutil.copyfile(database, pristine)
    verified = run_signoff("verify", "--json", home=home, env=keyring_under_test.env)
    result = json.loads(verified.stdout)
    assert (result["ok"], result["decisions_checked"]) == (True, 2), result
    found = {}
    for case, (statement, _) in EDITS.items():
        shutil.copyfile(pristine, database)
        conn = sqlite3.connect(database)
        conn.execute(statement)
        conn.commit()
        conn.close()
        done = run_signoff("verify", "--json", home=home, env=keyring_under_test.env)
        answer = json.loads(done.stdout)
        found[case] = (done.returncode, answer.get("error"), answer.get("row"))
    assert found == {case: (1, "StateDisagrees", row) for case, (_, row) in EDITS.items()}


def _old_form_decision(store: Store, approval_id: str) -> None:
    """A rejection as Signoff wrote it before decisions were signed: its event without
    request_hash, key or mac; the step and the run ended as a rejection ends them."""
    with store.snapshot() as conn:
        (run_id, step, created) = conn.execute(
            "SELECT run_id, step_idx, created_at FROM approvals WHERE id = ?", (approval_id,)
        ).fetchone()
    with store.transaction() as tx:
        tx.execute(
            "UPDATE approvals SET status = 'rejected', decided_by = 'operator',"
            " decided_reason = 'old', decided_at = ? WHERE id = ?",
            (created, approval_id),
        )
        payload = {"approval": approval_id, "status": "rejected", "by": "operator", "reason": "old"}
        tx.append_event(kind="approval.decided", payload=payload, at=created, run_id=run_id,
                        step=step)  # fmt: skip
        transitions.finish_step(tx, run_id, step, status="failed", active_seconds=0.0,
                                at=created, observation={"error": "rejected"})  # fmt: skip
        transitions.end_run(tx, run_id, status="CANCELLED", reason="rejected", at=created)


@pytest.mark.guarantee("G-CHAIN-3")
def test_decisions_from_before_signing_verify_only_before_the_first_signed_one(
    home: Path, keyring_under_test: KeyringUnderTest
) -> None:
    """A database older than the operator key holds unsigned decisions in the old form: they
    verify when they come first. The same form after a signed decision was made is a forgery."""
    operator = OperatorKey(KeyringKeyStore(keyring_under_test.backend))  # type: ignore[arg-type]
    with Store.open(home / "signoff.db") as store:
        g = make_gate(store, standard_tools(Calls()), operator=operator, anchor=None)

        def waiting(run_id: str) -> str:
            s = g.begin(run_id, "goal", None)
            v = s.step().propose(Decision.tool_call("write", {"n": 1}))
            assert v.approval is not None
            return v.approval.id

        _old_form_decision(store, waiting("old"))
        reject(store, "new", waiting("new"), "operator", "no", operator=operator)
        assert check_state(store, operator) == 1
        _old_form_decision(store, waiting("later"))
        with pytest.raises(StateDisagrees, match="before decisions were signed, after signed"):
            check_state(store, operator)
