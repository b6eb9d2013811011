"""The sweeper brings abandoned proxy calls to an end or to the operator, and expires old
approvals, each with its events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.decisions import Decision
from core.gate import VerdictOutcome
from core.policy.policy import ConfigPolicy, Rule
from core.store import Store
from core.sweep import sweep
from core.tools import SideEffect
from core.transitions import CallLabel
from tests.core.gatekit import Calls, make_gate, standard_tools


def _abandoned(store: Store, tool: str, *, started: bool, call: bool = True) -> None:
    wall = [1000.0]
    policy = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    g = make_gate(store, standard_tools(Calls()), policy=policy, wall_clock=lambda: wall[0])
    label = CallLabel("srv", tool, "k" * 64) if call else None
    s = g.begin("r", "goal", call=label)
    step = s.step()
    assert step.propose(Decision.tool_call(tool, {"n": 1})).outcome == VerdictOutcome.ALLOWED
    if started:
        with store.transaction() as tx:
            step._start(tx, step._request, {"tool": tool}, None, "2026-11-30T09:00:00.000000Z")
    s._die()


def test_an_abandoned_mutation_reaches_the_operator(gate_store: Store) -> None:
    _abandoned(gate_store, "write", started=True)
    assert len(sweep(gate_store, wall_clock=lambda: 10_000.0)) == 1
    kind = gate_store._conn.execute("SELECT kind, status FROM approvals").fetchone()
    assert kind == ("interrupted_side_effect", "pending")
    assert gate_store._conn.execute("SELECT status FROM runs").fetchone() == (
        "WAITING_FOR_APPROVAL",
    )


def test_an_abandoned_proxy_call_that_started_nothing_ends_interrupted(gate_store: Store) -> None:
    _abandoned(gate_store, "read", started=False)
    sweep(gate_store, wall_clock=lambda: 10_000.0)
    row = gate_store._conn.execute("SELECT status, end_reason FROM runs").fetchone()
    assert row == ("FAILED", "interrupted")


def test_a_library_run_is_left_for_its_owner(gate_store: Store) -> None:
    _abandoned(gate_store, "read", started=False, call=False)
    assert sweep(gate_store, wall_clock=lambda: 10_000.0) == []
    assert gate_store._conn.execute("SELECT status FROM runs").fetchone() == ("RUNNING",)


def test_a_live_lease_is_left_alone(gate_store: Store) -> None:
    _abandoned(gate_store, "write", started=True)
    assert sweep(gate_store, wall_clock=lambda: 1001.0) == []


def test_a_pending_approval_nobody_decided_expires(gate_store: Store) -> None:
    g = make_gate(gate_store, standard_tools(Calls()))
    s = g.begin("r", "goal")
    s.step().propose(Decision.tool_call("push", {"n": 1}))
    later = datetime.now(UTC) + timedelta(days=2)
    assert len(sweep(gate_store, now=lambda: later)) == 1
    assert gate_store._conn.execute("SELECT status FROM approvals").fetchone() == ("expired",)
    row = gate_store._conn.execute("SELECT status, end_reason FROM runs").fetchone()
    assert row == ("CANCELLED", "approval_expired")
