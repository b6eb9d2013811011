"""The gate's verdicts, its refusals of misuse, and the seed's example, on real databases."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

from core import canonical
from core.approvals import approve
from core.decisions import Decision
from core.errors import (
    LeaseLost,
    RunExists,
    RunLeased,
    RunStateError,
    SchemaRefused,
    SessionClosed,
    UnknownRun,
)
from core.gate import VerdictOutcome
from core.policy.policy import Outcome, PolicyDecision, PolicyRequest
from core.store import Store
from core.tools import SideEffect, Tool
from core.verify import verify
from tests.core.gatekit import (
    Calls,
    FakeClock,
    counter_tool,
    make_gate,
    record_snapshot,
    standard_tools,
)


def test_the_seed_example_prints_what_the_seed_says(gate_store: Store, capsys) -> None:
    """ExampleGate: read allowed and run; push pending; approve; attach returns exactly the
    approved request; execute; complete."""
    calls = Calls()
    tools = [
        counter_tool("read", SideEffect.READ_ONLY, calls),
        counter_tool("push", SideEffect.REMOTE_MUTATION, calls),
    ]
    g = make_gate(gate_store, tools)
    plan = [
        Decision.tool_call("read", '{"n":1}', "look first"),
        Decision.tool_call("push", '{"n":7}', "publish the counter"),
        Decision.complete('{"pushed":7}'),
    ]

    async def example() -> None:
        s = g.begin("run-1", "publish the counter")
        v = None
        while v is None or v.outcome != VerdictOutcome.PENDING:
            step = s.step()
            assert step is not None
            v = step.propose(plan[step.index])
            print(step.index, v.outcome)
            if v.outcome == VerdictOutcome.ALLOWED:
                print((await step.execute()).summary)
        assert v.approval is not None
        print(v.run.status, v.approval.kind)

        approve(gate_store, "run-1", v.approval.id, "operator", "looks right")
        s, v = g.attach("run-1")
        assert v is not None and v.request is not None
        print(v.outcome, v.request.tool, v.request.arguments)
        current = s.current()
        assert current is not None
        print((await current.execute()).summary)

        step = s.step()
        assert step is not None
        v = step.propose(plan[step.index])
        print(step.index, v.outcome, v.run.status, v.run.result)

    asyncio.run(example())
    assert capsys.readouterr().out == (
        "0 allowed\n"
        "echoed read\n"
        "1 pending\n"
        "WAITING_FOR_APPROVAL remote_mutation\n"
        'allowed push {"n":7}\n'
        "echoed push\n"
        '2 ended COMPLETED {"pushed":7}\n'
    )
    assert calls.made == [("read", {"n": 1}), ("push", {"n": 7})]
    assert verify(gate_store).head.seq == gate_store.head().seq


def _open(gate_store: Store, **kw: Any):
    calls = Calls()
    g = make_gate(gate_store, standard_tools(calls), **kw)
    s = g.begin("r", "goal")
    return g, s, calls


def test_an_allowed_read_runs_and_is_observed(gate_store: Store) -> None:
    _, s, calls = _open(gate_store)
    step = s.step()
    v = step.propose(Decision.tool_call("read", {"n": 1}))
    assert v.outcome == VerdictOutcome.ALLOWED
    assert v.request is not None and v.request.args() == {"n": 1}
    obs = asyncio.run(step.execute())
    assert (obs.ok, obs.summary) == (True, "echoed read")
    assert calls.made == [("read", {"n": 1})]
    assert s.current() is None and not s.done()


def test_a_policy_denial_is_an_observation_and_the_session_goes_on(gate_store: Store) -> None:
    class DenyWrites:
        def evaluate(self, request: PolicyRequest) -> PolicyDecision:
            if request.side_effect is SideEffect.READ_ONLY:
                return PolicyDecision(Outcome.ALLOW)
            return PolicyDecision(Outcome.DENY, "no writes today")

    _, s, calls = _open(gate_store, policy=DenyWrites())
    v = s.step().propose(Decision.tool_call("write", {"n": 1}))
    assert (v.outcome, v.reason) == (VerdictOutcome.DENIED, "no writes today")
    assert calls.made == []
    assert s.run().consecutive_failures == 1
    step = s.step()
    assert step is not None and step.index == 1


@pytest.mark.parametrize(
    ("decision", "why"),
    [
        (Decision.tool_call("nope", {"n": 1}), "no tool"),
        (Decision.tool_call("unclassified", {"n": 1}), "no side-effect class"),
        (Decision.tool_call("read", '{"n": 9007199254740993}'), "IntegerOutOfRange"),
        (Decision.tool_call("read", '{"n": 1, "n": 2}'), "DuplicateKey"),
        (Decision.tool_call("read", '{"n": "one"}'), "schema"),
        (Decision.tool_call("read", "[1]"), "schema"),
        (Decision.tool_call("read", "{not json"), "MalformedJSON"),
        (Decision("dance"), "unknown decision kind"),
        (Decision.tool_call("read", {"n": 1}, origin="the model, honest"), "unknown origin"),
        (Decision.complete("NaN"), "not exact JSON"),
    ],
    ids=["unknown-tool", "unclassified-tool", "unsafe-integer", "duplicate-key", "wrong-type",
         "not-an-object", "malformed", "unknown-kind", "unknown-origin", "inexact-result"],
)  # fmt: skip
@pytest.mark.guarantee("G-GATE-2")
def test_an_invalid_decision_is_recorded_verbatim_and_denied(
    gate_store: Store, decision: Decision, why: str
) -> None:
    _, s, calls = _open(gate_store)
    step = s.step()
    v = step.propose(decision)
    assert v.outcome == VerdictOutcome.DENIED
    assert why in v.reason
    assert calls.made == []
    row = gate_store._conn.execute(
        "SELECT status, decision, observation FROM steps WHERE run_id = 'r' AND idx = 0"
    ).fetchone()
    assert row[0] == "failed"
    assert canonical.loads(row[1]) == decision.record()
    assert canonical.loads(row[2])["error"] == "invalid_decision"
    assert not s.done()


@pytest.mark.parametrize(
    ("tool", "side_effect"),
    [("write", "local_mutation"), ("push", "remote_mutation"), ("delete", "destructive")],
    ids=["local", "remote", "destructive"],
)
@pytest.mark.guarantee("G-GATE-2")
def test_by_default_a_mutation_of_every_class_pauses_the_run_on_an_approval_of_its_class(
    gate_store: Store, tool: str, side_effect: str
) -> None:
    _, s, calls = _open(gate_store)  # the default policy: the operator set no rule
    v = s.step().propose(Decision.tool_call(tool, {"n": 3}))
    assert v.outcome == VerdictOutcome.PENDING
    assert v.approval is not None and v.approval.kind == side_effect
    assert v.run.status == "WAITING_FOR_APPROVAL"
    assert v.run.lease_owner is None
    assert s.done() and calls.made == []


def test_complete_ends_the_run_with_its_result(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    v = s.step().propose(Decision.complete('{"ok":true}'))
    assert (v.outcome, v.run.status, v.run.result) == (
        VerdictOutcome.ENDED, "COMPLETED", '{"ok":true}',
    )  # fmt: skip
    assert s.done()


def test_fail_ends_the_run_failed(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    v = s.step().propose(Decision.fail("cannot find the file"))
    assert (v.outcome, v.run.status, v.run.end_reason) == (
        VerdictOutcome.ENDED, "FAILED", "agent_failed",
    )  # fmt: skip


def test_a_policy_abort_ends_the_run(gate_store: Store) -> None:
    class Abort:
        def evaluate(self, request: PolicyRequest) -> PolicyDecision:
            return PolicyDecision(Outcome.ABORT, "this run is not to be")

    _, s, calls = _open(gate_store, policy=Abort())
    v = s.step().propose(Decision.tool_call("read", {"n": 1}))
    assert (v.outcome, v.run.status, v.run.end_reason) == (
        VerdictOutcome.ENDED, "FAILED", "policy_abort",
    )  # fmt: skip
    assert calls.made == [] and s.done()


def test_a_terminal_tool_ends_the_run_at_execute(gate_store: Store) -> None:
    calls = Calls()
    tool = counter_tool("finish", SideEffect.READ_ONLY, calls, terminal=True,
                        result=lambda a: {"final": a["n"]})  # fmt: skip
    g = make_gate(gate_store, [tool])
    s = g.begin("r", "goal")
    step = s.step()
    assert step.propose(Decision.tool_call("finish", {"n": 4})).outcome == VerdictOutcome.ALLOWED
    asyncio.run(step.execute())
    assert s.done()
    assert (s.run().status, s.run().result) == ("COMPLETED", '{"final":4}')


def test_a_tool_that_raises_is_a_failure_observation(gate_store: Store) -> None:
    def broken(args: dict[str, Any]) -> Any:
        raise OSError("disk on fire")

    g = make_gate(gate_store, [Tool("read", "d", {"type": "object"}, SideEffect.READ_ONLY, broken)])
    s = g.begin("r", "goal")
    step = s.step()
    step.propose(Decision.tool_call("read", {}))
    obs = asyncio.run(step.execute())
    assert not obs.ok and "disk on fire" in (obs.error or "")
    assert s.run().consecutive_failures == 1 and not s.done()


def test_an_async_tool_is_awaited(gate_store: Store) -> None:
    async def slow(args: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return "awaited"

    g = make_gate(gate_store, [Tool("read", "d", {"type": "object"}, SideEffect.READ_ONLY, slow)])
    s = g.begin("r", "goal")
    step = s.step()
    step.propose(Decision.tool_call("read", {}))
    assert asyncio.run(step.execute()).summary == "awaited"


def test_the_tool_gets_a_copy_and_cannot_change_the_record(gate_store: Store) -> None:
    def meddle(args: dict[str, Any]) -> str:
        args["n"] = 999
        return "meddled"

    g = make_gate(gate_store, [Tool("read", "d", {"type": "object"}, SideEffect.READ_ONLY, meddle)])
    s = g.begin("r", "goal")
    step = s.step()
    v = step.propose(Decision.tool_call("read", {"n": 1}))
    asyncio.run(step.execute())
    assert v.request is not None and v.request.args() == {"n": 1}
    stored = gate_store._conn.execute("SELECT arguments FROM steps").fetchone()[0]
    assert stored == '{"n":1}'


# --- misuse: refused, and nothing changes -------------------------------------------------


def test_a_second_open_step_is_refused(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    s.step()
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        s.step()
    assert record_snapshot(gate_store) == before


@pytest.mark.guarantee("G-GATE-5")
def test_execute_without_an_allowed_verdict_is_refused(gate_store: Store) -> None:
    _, s, calls = _open(gate_store)
    step = s.step()
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        asyncio.run(step.execute())
    assert record_snapshot(gate_store) == before
    step.propose(Decision.tool_call("read", {"nope": 1}))  # invalid: denied
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        asyncio.run(step.execute())
    assert record_snapshot(gate_store) == before
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-5")
def test_proposing_twice_and_executing_twice_are_refused(gate_store: Store) -> None:
    _, s, calls = _open(gate_store)
    step = s.step()
    step.propose(Decision.tool_call("read", {"n": 1}))
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        step.propose(Decision.tool_call("read", {"n": 2}))
    assert record_snapshot(gate_store) == before
    asyncio.run(step.execute())
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        asyncio.run(step.execute())
    assert record_snapshot(gate_store) == before
    assert calls.made == [("read", {"n": 1})]


def test_fail_after_a_decision_is_refused(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    step = s.step()
    step.propose(Decision.tool_call("read", {"n": 1}))
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        step.fail("too late")
    assert record_snapshot(gate_store) == before


@pytest.mark.guarantee("G-GATE-5")
def test_a_session_that_paused_or_ended_refuses_every_call(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    step = s.step()
    step.propose(Decision.tool_call("push", {"n": 1}))
    before = record_snapshot(gate_store)
    for call in (s.step, lambda: step.propose(Decision.complete()), lambda: step.fail("x")):
        with pytest.raises(RunStateError):
            call()
    with pytest.raises(RunStateError):
        asyncio.run(step.execute())
    assert record_snapshot(gate_store) == before


def test_a_closed_session_refuses_every_call_and_releases_the_lease(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    s.close()
    assert gate_store._conn.execute("SELECT lease_owner FROM runs").fetchone() == (None,)
    before = record_snapshot(gate_store)
    with pytest.raises(SessionClosed):
        s.step()
    assert record_snapshot(gate_store) == before


def test_a_second_session_on_a_run_the_gate_holds_is_refused(gate_store: Store) -> None:
    g, s, _ = _open(gate_store)
    before = record_snapshot(gate_store)
    with pytest.raises(RunStateError):
        g.attach("r")
    with pytest.raises(RunExists):
        g.begin("r", "again")
    assert record_snapshot(gate_store) == before
    assert not s.done()


@pytest.mark.guarantee("G-GATE-5")
def test_attach_of_a_run_another_gate_leases_live_is_refused(gate_store: Store) -> None:
    _g, s, calls = _open(gate_store)
    other = make_gate(gate_store, standard_tools(calls))
    before = record_snapshot(gate_store)
    with pytest.raises(RunLeased):
        other.attach("r")
    assert record_snapshot(gate_store) == before
    assert s.step() is not None


def test_an_expired_lease_is_taken_over_and_the_old_session_loses_it(gate_store: Store) -> None:
    wall = [1000.0]
    calls = Calls()
    first = make_gate(gate_store, standard_tools(calls), wall_clock=lambda: wall[0], lease_ttl=5)
    s = first.begin("r", "goal")
    abandoned = s.step()
    wall[0] += 10
    second = make_gate(gate_store, standard_tools(calls), wall_clock=lambda: wall[0], lease_ttl=5)
    s2, verdict = second.attach("r")
    assert verdict is None
    status = gate_store._conn.execute("SELECT status FROM steps WHERE idx = 0").fetchone()[0]
    assert status == "interrupted"
    with pytest.raises(LeaseLost):
        abandoned.propose(Decision.tool_call("read", {"n": 1}))
    with pytest.raises(LeaseLost):
        s.step()
    step = s2.step()
    assert step is not None and step.index == 1
    kinds = [k for (k,) in gate_store._conn.execute("SELECT kind FROM events ORDER BY seq")]
    assert "run.takeover" in kinds


def test_attach_of_an_unknown_or_finished_run_is_refused(gate_store: Store) -> None:
    g, s, _ = _open(gate_store)
    s.step().propose(Decision.complete())
    with pytest.raises(UnknownRun):
        g.attach("nope")
    with pytest.raises(RunStateError):
        g.attach("r")


@pytest.mark.guarantee("G-GATE-2")
def test_tools_are_refused_at_registration_when_their_schema_is_unsafe(gate_store: Store) -> None:
    for schema in (
        {"$ref": "https://example.invalid/schema.json"},
        {"properties": {"a": {"$ref": "other.json#/a"}}},
        {"$schema": "https://example.invalid/my-dialect", "type": "object"},
        {"type": "no-such-type"},
        [],
    ):
        with pytest.raises(SchemaRefused):
            make_gate(gate_store, [Tool("t", "d", schema, SideEffect.READ_ONLY, print)])  # type: ignore[arg-type]
    calls = Calls()
    with pytest.raises(SchemaRefused):
        make_gate(gate_store, [counter_tool("t", SideEffect.READ_ONLY, calls)] * 2)


def test_a_local_reference_inside_the_schema_is_fine(gate_store: Store) -> None:
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/$defs/n"}},
    }
    calls = Calls()
    g = make_gate(gate_store, [Tool("t", "d", schema, SideEffect.READ_ONLY,
                                    lambda a: calls.made.append(a))])  # fmt: skip
    s = g.begin("r", "goal")
    assert s.step().propose(Decision.tool_call("t", {"n": "x"})).outcome == VerdictOutcome.DENIED
    assert s.step().propose(Decision.tool_call("t", {"n": 2})).outcome == VerdictOutcome.ALLOWED


def test_the_tool_spec_is_stored_once_by_hash(gate_store: Store) -> None:
    _, s, _ = _open(gate_store)
    for n in range(3):
        step = s.step()
        step.propose(Decision.tool_call("read", {"n": n}))
        asyncio.run(step.execute())
    rows = gate_store._conn.execute("SELECT hash, name, spec FROM tool_specs").fetchall()
    assert len(rows) == 1
    assert rows[0][0] == canonical.sha256_hex(canonical.loads(rows[0][2]))


def test_a_database_edit_under_a_live_session_is_still_the_gates_concern(
    gate_store: Store,
) -> None:
    """The lease is on the row: someone clearing it makes the session stop, not carry on."""
    _, s, _ = _open(gate_store)
    conn = sqlite3.connect(gate_store.path)
    conn.execute("UPDATE runs SET lease_owner = 'someone-else'")
    conn.commit()
    conn.close()
    with pytest.raises(LeaseLost):
        s.step()
    conn = sqlite3.connect(gate_store.path)
    conn.execute("UPDATE runs SET lease_owner = NULL")  # leave a record the checks accept
    conn.commit()
    conn.close()


def test_the_gate_reads_no_clock_but_its_own(gate_store: Store) -> None:
    clock = FakeClock()
    _, s, _ = _open(gate_store, clock=clock)
    step = s.step()
    step.propose(Decision.tool_call("read", {"n": 1}))
    asyncio.run(step.execute())
    times = {t for (t,) in gate_store._conn.execute("SELECT at FROM events")}
    assert times <= {r.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for r in clock.readings}
