"""The run lease: renewed on its own connection, lost when taken over, settled on takeover."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from core import canonical
from core.approvals import approve
from core.decisions import Decision
from core.errors import LeaseLost, RunLeased
from core.gate import Reconciled, Request, VerdictOutcome
from core.lease import Holding
from core.policy.policy import ConfigPolicy, Rule
from core.store import Store
from core.tools import SideEffect, Tool
from tests.core.gatekit import COUNTER_SCHEMA, Calls, make_gate, standard_tools
from tests.waiting import wait_for


def _lease(store: Store) -> tuple[str | None, float | None]:
    with Store.open(store.path) as other:  # another connection, as another process reads it
        return other._conn.execute("SELECT lease_owner, lease_expires_at FROM runs").fetchone()


def test_two_gates_configured_alike_never_share_an_owner(gate_store: Store) -> None:
    a = make_gate(gate_store, [], owner="laptop")
    b = make_gate(gate_store, [], owner="laptop")
    assert a.owner != b.owner
    assert a.owner.startswith("laptop-") and b.owner.startswith("laptop-")


@pytest.mark.guarantee("G-CRASH-2")
def test_a_tool_whose_session_lost_the_lease_finishes_but_its_outcome_is_not_recorded(
    gate_store: Store,
) -> None:
    wall = [1000.0]
    calls = Calls()
    holder: dict[str, Any] = {}

    def taken_over_meanwhile(args: dict[str, Any]) -> str:
        wall[0] += 60  # this call outlives the lease, and another process takes the run
        holder["other"].attach("r")
        calls.made.append(("ran", args))
        return "finished anyway"

    tool = Tool("write", "d", COUNTER_SCHEMA, SideEffect.LOCAL_MUTATION, taken_over_meanwhile)
    policy = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    first = make_gate(gate_store, [tool], policy=policy, wall_clock=lambda: wall[0])
    holder["other"] = make_gate(gate_store, [tool], policy=policy, wall_clock=lambda: wall[0])
    s = first.begin("r", "goal")
    step = s.step()
    step.propose(Decision.tool_call("write", {"n": 1}))
    with pytest.raises(LeaseLost):
        asyncio.run(step.execute())
    assert calls.made == [("ran", {"n": 1})]
    row = gate_store._conn.execute("SELECT status, observation FROM steps").fetchone()
    assert row == ("pending", None)  # the new owner paused it: started, outcome unknown
    kind = gate_store._conn.execute("SELECT kind FROM approvals").fetchone()[0]
    assert kind == "interrupted_side_effect"
    with pytest.raises(LeaseLost):
        s.step()


# A TTL the lease keeper renews every 0.4 s: a renewal may land 0.8 s late before the lease
# lapses, room enough on a busy machine; the tests below watch the lease over more than one TTL.
TTL = 1.2


def _watch_the_lease(store: Store, owner: str, heartbeat: Holding, renewals: int) -> list[float]:
    """Read the lease from another connection, as another process would, until the keeper has
    renewed it ``renewals`` more times; the times it was seen lapsed (it stops at the first)."""
    lapsed: list[float] = []
    enough = heartbeat.renewals + renewals

    def renewed_or_lapsed() -> bool:
        holder, expires = _lease(store)
        now = time.time()
        if holder != owner or expires is None or expires <= now:
            lapsed.append(now)
        return bool(lapsed) or heartbeat.renewals >= enough

    started = time.monotonic()
    wait_for(renewed_or_lapsed, f"{renewals} renewals")
    assert lapsed or time.monotonic() - started > TTL, "watched for less than a TTL"
    return lapsed


@pytest.mark.guarantee("G-CRASH-2")
def test_the_heartbeat_renews_while_the_main_connection_holds_a_long_read(
    gate_store: Store,
) -> None:
    g = make_gate(gate_store, standard_tools(Calls()), lease_ttl=TTL)
    s = g.begin("r", "goal")
    heartbeat = s._heartbeat
    assert heartbeat is not None
    with gate_store.snapshot() as conn:  # a consumer reading, for longer than the TTL
        conn.execute("SELECT * FROM runs").fetchall()
        lapsed = _watch_the_lease(gate_store, g.owner, heartbeat, 5)
    assert lapsed == [], "the lease was seen expired while the main connection was reading"
    assert s.step() is not None
    s.close()


@pytest.mark.guarantee("G-CRASH-2")
def test_a_tool_call_longer_than_the_ttl_keeps_its_lease_and_its_outcome(
    gate_store: Store,
) -> None:
    """Read from another connection all through a call lasting over a TTL, the lease is never
    seen lapsed: it is renewed before it runs out, not only now and then."""
    holder: dict[str, Any] = {}

    def long_call(args: dict[str, Any]) -> str:
        heartbeat = holder["session"]._heartbeat
        holder["lapsed"] = _watch_the_lease(gate_store, g.owner, heartbeat, 5)
        return "finished"

    tool = Tool("slow", "d", {"type": "object"}, SideEffect.READ_ONLY, long_call)
    g = make_gate(gate_store, [tool], lease_ttl=TTL)
    s = holder["session"] = g.begin("r", "goal")
    step = s.step()
    step.propose(Decision.tool_call("slow", {}))
    assert asyncio.run(step.execute()).summary == "finished"
    assert holder["lapsed"] == [], "the lease was seen expired while the tool ran"
    status = gate_store._conn.execute("SELECT status FROM steps").fetchone()[0]
    assert status == "done"
    s.close()


@pytest.mark.guarantee("G-CRASH-2")
def test_a_lost_lease_found_by_the_heartbeat_stops_the_session(gate_store: Store) -> None:
    g = make_gate(gate_store, standard_tools(Calls()), lease_ttl=0.3)
    s = g.begin("r", "goal")
    with Store.open(gate_store.path) as other:
        other._conn.execute("UPDATE runs SET lease_owner = 'someone-else'")
    holding = s._heartbeat
    assert holding is not None
    wait_for(holding.lost.is_set, "the loss")
    with pytest.raises(LeaseLost):
        s.step()
    with Store.open(gate_store.path) as other:
        other._conn.execute("UPDATE runs SET lease_owner = NULL")


def _started_then_abandoned(store: Store, tools: list[Tool], wall: list[float], **kw: Any):
    """A run whose session died with the tool's start written and no outcome."""
    policy = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    g = make_gate(store, tools, policy=policy, wall_clock=lambda: wall[0])
    s = g.begin("r", "goal")
    step = s.step()
    step.propose(Decision.tool_call("write", {"n": 5}))
    with store.transaction() as tx:  # what execute writes before it calls the tool
        step._start(tx, step._request, {"tool": "write"}, None, "2026-11-30T09:00:00.000000Z")
    s._die()
    wall[0] += 60
    return make_gate(store, tools, policy=policy, wall_clock=lambda: wall[0], **kw)


def test_attach_while_the_lease_is_live_is_refused(gate_store: Store) -> None:
    wall = [1000.0]
    g = make_gate(gate_store, standard_tools(Calls()), wall_clock=lambda: wall[0])
    s = g.begin("r", "goal")
    s._die()
    wall[0] += 29
    with pytest.raises(RunLeased):
        make_gate(gate_store, standard_tools(Calls()), wall_clock=lambda: wall[0]).attach("r")
    wall[0] += 2
    _, verdict = make_gate(gate_store, standard_tools(Calls()),
                           wall_clock=lambda: wall[0]).attach("r")  # fmt: skip
    assert verdict is None


@pytest.mark.parametrize(
    ("answer", "step_status", "run_status"),
    [
        (Reconciled.done({"wrote": 5}), "done", "RUNNING"),
        (Reconciled.not_done(), "interrupted", "RUNNING"),
        (Reconciled.unknown(), "pending", "WAITING_FOR_APPROVAL"),
    ],
)
def test_a_reconcile_hook_is_asked_and_its_answer_recorded(
    gate_store: Store, answer: Reconciled, step_status: str, run_status: str
) -> None:
    asked: list[Request] = []

    def reconcile(request: Request) -> Reconciled:
        asked.append(request)
        return answer

    calls = Calls()
    wall = [1000.0]
    second = _started_then_abandoned(gate_store, standard_tools(calls), wall, reconcile=reconcile)
    second.attach("r")
    assert [(r.tool, r.args()) for r in asked] == [("write", {"n": 5})]
    conn = gate_store._conn
    assert conn.execute("SELECT status FROM steps").fetchone()[0] == step_status
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == run_status
    recorded = canonical.loads(
        conn.execute("SELECT payload FROM events WHERE kind = 'step.reconciled'").fetchone()[0]
    )
    assert recorded["answer"]["answer"] == answer.answer
    assert calls.made == []


def test_without_a_hook_an_interrupted_mutation_waits_and_approving_runs_it_once(
    gate_store: Store,
) -> None:
    calls = Calls()
    wall = [1000.0]
    second = _started_then_abandoned(gate_store, standard_tools(calls), wall)
    s, verdict = second.attach("r")
    assert verdict is not None and verdict.outcome == VerdictOutcome.PENDING
    assert verdict.approval is not None
    assert (verdict.approval.kind, verdict.approval.policy_reason) == (
        "interrupted_side_effect", "started, outcome unknown",
    )  # fmt: skip
    approve(gate_store, "r", verdict.approval.id, "operator", "checked: it did not happen")
    s, verdict = second.attach("r")
    assert verdict is not None and verdict.outcome == VerdictOutcome.ALLOWED
    assert verdict.request is not None and verdict.request.step == 0
    asyncio.run(s.current().execute())
    assert calls.made == [("write", {"n": 5})]
    s.close()


@pytest.mark.parametrize("change", ["gone", "reworded", "schema"])
def test_an_interrupted_call_whose_tool_changed_fails_the_run_as_a_conflict(
    gate_store: Store, change: str
) -> None:
    calls = Calls()
    wall = [1000.0]
    tools = standard_tools(calls)
    if change == "gone":
        later = [t for t in tools if t.name != "write"]
    elif change == "reworded":
        reworded = Tool("write", "write, now reworded", COUNTER_SCHEMA, SideEffect.LOCAL_MUTATION,
                        tools[1].func)  # fmt: skip
        later = [reworded if t.name == "write" else t for t in tools]
    else:
        later = tools
    _started_then_abandoned(gate_store, tools, wall)
    if change == "schema":
        # The recorded arguments no longer pass: the record was edited under the tool (the
        # untraced store: this edit is the test's, not the gate's).
        gate_store._conn.execute("""UPDATE steps SET arguments = '{"n":"five"}'""")
        gate_store.trace = None
    third = make_gate(gate_store, later, wall_clock=lambda: wall[0])
    _, verdict = third.attach("r")
    assert verdict is not None and verdict.outcome == VerdictOutcome.ENDED
    assert (verdict.run.status, verdict.run.end_reason) == ("FAILED", "reconcile_conflict")
    assert calls.made == []


def test_an_abandoned_allowed_step_cannot_execute_once_another_session_holds_the_run(
    gate_store: Store,
) -> None:
    wall = [1000.0]
    calls = Calls()
    first = make_gate(gate_store, standard_tools(calls), wall_clock=lambda: wall[0])
    s = first.begin("r", "goal")
    step = s.step()
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    s._stop_heartbeat()  # the process stalls: no renewals, the session object lingers
    wall[0] += 60
    second = make_gate(gate_store, standard_tools(calls), wall_clock=lambda: wall[0])
    s2, _ = second.attach("r")
    assert gate_store._conn.execute("SELECT status FROM steps").fetchone()[0] == "interrupted"
    with pytest.raises(LeaseLost):
        asyncio.run(step.execute())
    assert calls.made == []
    s2.close()


def test_the_heartbeat_stops_when_the_lease_is_released_or_the_session_is_dropped(
    gate_store: Store,
) -> None:
    g = make_gate(gate_store, standard_tools(Calls()))
    s = g.begin("r", "goal")
    assert g.leases.holds("r")
    s.step().propose(Decision.tool_call("push", {"n": 1}))  # pauses: the lease is released
    assert not g.leases.holds("r")

    g.begin("r2", "goal")  # nobody keeps the session
    wait_for(lambda: not g.leases.holds("r2"), "the dropped session's lease to be let go")
