"""Where the gate, the lease, re-check and the configuration met the seeds only partly: an
abandoned session on the same gate, a policy that raises, the proxy's duplicate rule under
re-check, a reconcile hook's ``done`` for a terminal tool, and TTLs that cannot work."""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Iterator
from typing import Any

import pytest

from core import canonical
from core.approvals import approve
from core.decisions import Decision
from core.errors import LeaseLost, RunLeased, RunStateError, TTLRefused
from core.gate import GateConfig, Reconciled, VerdictOutcome
from core.policy.policy import (
    ConfigPolicy,
    DefaultPolicy,
    Outcome,
    PolicyDecision,
    PolicyRequest,
    Rule,
    behind_duplicate_rule,
)
from core.proxy.server import ProxyRules
from core.recheck import recheck
from core.store import Store
from core.tools import SideEffect, Tool
from tests.core.gatekit import COUNTER_SCHEMA, Calls, counter_tool, make_gate, standard_tools


def _events(store: Store, kind: str) -> list[Any]:
    rows = store._conn.execute(
        "SELECT payload FROM events WHERE kind = ? ORDER BY seq", (kind,)
    ).fetchall()
    return [canonical.loads(text) for (text,) in rows]


def _run(store: Store) -> tuple[str, str | None, str | None]:
    row = store._conn.execute("SELECT status, end_reason, result FROM runs").fetchone()
    return (row[0], row[1], row[2])


# --- 1. an abandoned session: one TTL, on the same gate as on another (decision 0009) -------


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    """Only reference counting frees objects: what a session leaves is freed when dropped, or
    waits for a collection that may not come for a long time."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_dropped_session_blocks_its_run_on_the_same_gate_for_one_ttl_only(
    gate_store: Store,
) -> None:
    wall = [1000.0]
    g = make_gate(gate_store, standard_tools(Calls()), wall_clock=lambda: wall[0])
    g.begin("r", "goal")  # nobody keeps the session, nobody closes it
    wall[0] += 29
    with pytest.raises(RunLeased):  # within the TTL: as after a crash
        g.attach("r")
    wall[0] += 2
    s, verdict = g.attach("r")  # past it: taken over, by the gate that left it
    assert verdict is None
    assert [p["previous_owner"] for p in _events(gate_store, "run.takeover")] == [g.owner]
    assert s.step() is not None
    s.close()


def test_a_dropped_session_with_an_allowed_step_stops_renewing_when_dropped(
    gate_store: Store, no_cycle_collector: None
) -> None:
    wall = [1000.0]
    calls = Calls()
    g = make_gate(gate_store, standard_tools(calls), wall_clock=lambda: wall[0])
    s = g.begin("r", "goal")
    step = s.step()
    assert step is not None
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    del s, step
    assert not g.leases.holds("r")  # nothing renews it: it lapses one TTL after its last write
    wall[0] += 31
    s2, verdict = g.attach("r")
    assert verdict is None
    status = gate_store._conn.execute("SELECT status FROM steps WHERE idx = 0").fetchone()[0]
    assert status == "interrupted"
    assert calls.made == []
    s2.close()


@pytest.mark.guarantee("G-CRASH-2")
def test_the_same_gate_takes_over_an_expired_lease_and_the_stalled_session_loses_it(
    gate_store: Store,
) -> None:
    wall = [1000.0]
    calls = Calls()
    g = make_gate(gate_store, standard_tools(calls), wall_clock=lambda: wall[0])
    s = g.begin("r", "goal")
    step = s.step()
    assert step is not None
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    s._stop_heartbeat()  # the loop stalls: no renewals, the session object lingers
    wall[0] += 60
    s2, verdict = g.attach("r")
    assert verdict is None
    with pytest.raises(LeaseLost):
        asyncio.run(step.execute())
    with pytest.raises(LeaseLost):
        s.step()
    s.close()  # the stalled session shares the gate's owner: it must not release the new lease
    owner = gate_store._conn.execute("SELECT lease_owner FROM runs").fetchone()[0]
    assert owner == g.owner
    assert calls.made == []
    assert s2.step() is not None
    s2.close()


@pytest.mark.guarantee("G-CRASH-2")
def test_a_tool_outliving_its_lease_on_the_same_gate_has_no_outcome_recorded(
    gate_store: Store,
) -> None:
    wall = [1000.0]
    calls = Calls()
    holder: dict[str, Any] = {}

    def taken_over_meanwhile(args: dict[str, Any]) -> str:
        wall[0] += 60  # this call outlives the lease, and the same gate takes the run over
        holder["s2"], _ = holder["gate"].attach("r")
        calls.made.append(("ran", args))
        return "finished anyway"

    tool = Tool("look", "d", COUNTER_SCHEMA, SideEffect.READ_ONLY, taken_over_meanwhile)
    g = holder["gate"] = make_gate(gate_store, [tool], wall_clock=lambda: wall[0])
    s = g.begin("r", "goal")
    step = s.step()
    assert step is not None
    step.propose(Decision.tool_call("look", {"n": 1}))
    s._stop_heartbeat()  # its heartbeat fails meanwhile (the test's clock outruns it anyway)
    with pytest.raises(LeaseLost):
        asyncio.run(step.execute())
    assert calls.made == [("ran", {"n": 1})]
    row = gate_store._conn.execute("SELECT status, observation FROM steps").fetchone()
    assert row == ("interrupted", None)  # read-only: the new session goes on without it
    assert _run(gate_store)[0] == "RUNNING"
    holder["s2"].close()


def test_a_live_session_of_the_same_gate_still_refuses_a_second_one(gate_store: Store) -> None:
    g = make_gate(gate_store, standard_tools(Calls()))
    s = g.begin("r", "goal")
    with pytest.raises(RunStateError):
        g.attach("r")
    assert s.step() is not None
    s.close()


# --- 2. a policy that raises: the decision is recorded, the failure is named, nothing runs --


class RaisingPolicy:
    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        raise LookupError("the rules file is gone")

    def identity(self) -> str:
        return "raising"


def test_a_policy_that_raises_ends_the_run_with_the_decision_recorded_and_nothing_run(
    gate_store: Store,
) -> None:
    calls = Calls()
    g = make_gate(gate_store, standard_tools(calls), policy=RaisingPolicy())
    s = g.begin("r", "goal")
    step = s.step()
    assert step is not None
    decision = Decision.tool_call("read", {"n": 1})
    verdict = step.propose(decision)
    assert verdict.outcome == VerdictOutcome.ENDED
    assert [p["decision"] for p in _events(gate_store, "step.decided")] == [decision.record()]
    assert _run(gate_store)[:2] == ("FAILED", "policy_error")
    [observed] = _events(gate_store, "step.observed")
    assert observed["observation"]["error"] == "policy_error"
    assert observed["observation"]["exception"] == "LookupError"
    assert _events(gate_store, "step.policy") == []  # no decision of the policy to re-check
    with pytest.raises(RunStateError):
        asyncio.run(step.execute())
    assert calls.made == []
    assert s.done()


def test_a_policy_answering_something_else_is_a_failure_of_the_policy(gate_store: Store) -> None:
    class Mumbling:
        def evaluate(self, request: PolicyRequest) -> Any:
            return "allow"

    calls = Calls()
    g = make_gate(gate_store, standard_tools(calls), policy=Mumbling())
    s = g.begin("r", "goal")
    step = s.step()
    assert step is not None
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ENDED
    assert _run(gate_store)[:2] == ("FAILED", "policy_error")
    assert calls.made == []


def test_a_policy_that_raises_at_attach_ends_the_run_and_runs_nothing(gate_store: Store) -> None:
    calls = Calls()
    first = make_gate(gate_store, standard_tools(calls))
    s = first.begin("r", "goal")
    step = s.step()
    assert step is not None
    verdict = step.propose(Decision.tool_call("push", {"n": 1}))
    assert verdict.approval is not None
    approve(gate_store, "r", verdict.approval.id, "operator")
    second = make_gate(gate_store, standard_tools(calls), policy=RaisingPolicy())
    s2, verdict = second.attach("r")
    assert verdict is not None and verdict.outcome == VerdictOutcome.ENDED
    assert _run(gate_store)[:2] == ("FAILED", "policy_error")
    status = gate_store._conn.execute("SELECT status FROM approvals").fetchone()[0]
    assert status == "superseded"
    [observed] = _events(gate_store, "step.observed")
    assert observed["observation"]["exception"] == "LookupError"
    assert calls.made == []
    assert s2.done()


# --- 3. re-check leaves the proxy's duplicate rule alone (decision 0012) -------------------


class FlippingPolicy:
    """Reads outside state: the same identity, a different answer once flipped."""

    def __init__(self) -> None:
        self.flipped = False

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        if self.flipped:
            return PolicyDecision(Outcome.DENY, "flipped")
        return ConfigPolicy().evaluate(request)

    def identity(self) -> str:
        return "flipping-v1"


def _proxied_write(store: Store, inner: Any, *, duplicate_of: str | None) -> None:
    rule = ProxyRules(inner)
    rule.duplicate_of = duplicate_of
    g = make_gate(store, standard_tools(Calls()), policy=rule)
    s = g.begin("r", "goal")
    step = s.step()
    assert step is not None
    step.propose(Decision.tool_call("write", {"n": 1}))


def test_the_proxys_duplicate_identity_is_the_one_recheck_knows() -> None:
    inner = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    assert ProxyRules(inner).identity() == behind_duplicate_rule(inner.identity())


def test_recheck_does_not_report_the_proxys_duplicate_rule_as_a_difference(
    gate_store: Store,
) -> None:
    _proxied_write(gate_store, DefaultPolicy(), duplicate_of="2026-11-30T09:00:00Z")
    [evaluation] = _events(gate_store, "step.policy")
    assert evaluation["decision"]["kind"] == "duplicate"
    result = recheck(gate_store, "r", DefaultPolicy())
    assert result.evaluations == 1
    assert result.differences == ()


def test_recheck_reports_a_duplicate_the_policy_would_now_deny(gate_store: Store) -> None:
    _proxied_write(gate_store, DefaultPolicy(), duplicate_of="2026-11-30T09:00:00Z")
    today = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.DENY})
    [difference] = recheck(gate_store, "r", today).differences
    assert (difference.then.kind, difference.now.outcome) == ("duplicate", Outcome.DENY)


def test_recheck_compares_the_policy_behind_the_duplicate_rule(gate_store: Store) -> None:
    policy = FlippingPolicy()
    _proxied_write(gate_store, policy, duplicate_of=None)
    policy.flipped = True
    [difference] = recheck(gate_store, "r", policy).differences
    assert difference.then_policy == difference.now_policy == "flipping-v1"


# --- 4. a reconcile hook's done for a terminal tool ends the run (decision 0010) -----------


def test_a_reconcile_hook_answering_done_for_a_terminal_tool_completes_the_run(
    gate_store: Store,
) -> None:
    wall = [1000.0]
    calls = Calls()
    tools = [counter_tool("write", SideEffect.LOCAL_MUTATION, calls, terminal=True)]
    policy = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    first = make_gate(gate_store, tools, policy=policy, wall_clock=lambda: wall[0])
    s = first.begin("r", "goal")
    step = s.step()
    assert step is not None
    step.propose(Decision.tool_call("write", {"n": 5}))
    with gate_store.transaction() as tx:  # what execute writes before it calls the tool
        assert step._request is not None
        step._start(tx, step._request, {"tool": "write"}, None, "2026-11-30T09:00:00.000000Z")
    s._die()
    wall[0] += 60
    second = make_gate(
        gate_store, tools, policy=policy, wall_clock=lambda: wall[0],
        reconcile=lambda request: Reconciled.done({"wrote": 5}),
    )  # fmt: skip
    s2, verdict = second.attach("r")
    status = gate_store._conn.execute("SELECT status FROM steps").fetchone()[0]
    assert status == "done"
    assert _run(gate_store) == ("COMPLETED", "completed", '{"wrote":5}')
    assert verdict is not None and verdict.outcome == VerdictOutcome.ENDED
    assert s2.done()
    assert calls.made == []


# --- 5. a lease TTL that cannot work is refused ----------------------------------------------


@pytest.mark.parametrize("ttl", [0, 0.0, -1.0, math.nan, math.inf])
def test_a_lease_ttl_that_is_not_a_positive_number_is_refused(
    gate_store: Store, ttl: float
) -> None:
    with pytest.raises(TTLRefused):
        GateConfig(store=gate_store, tools=[], lease_ttl=ttl)


def test_a_small_positive_lease_ttl_is_accepted(gate_store: Store) -> None:
    assert GateConfig(store=gate_store, tools=[], lease_ttl=0.3).lease_ttl == 0.3
