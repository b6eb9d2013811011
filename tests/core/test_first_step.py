"""A run begun with its first step proposed and started in one transaction (core/first_step.py).

The proxy's path: an allowed call is two synced commits, with the same events in the same order
as the library's begin, step, propose and execute; a process that dies between the two leaves a
started step, which the takeover handles as it does for the library's path.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core import canonical
from core.decisions import Decision
from core.errors import RunExists
from core.gate import VerdictOutcome
from core.limits import Limits
from core.policy.policy import ConfigPolicy, Rule
from core.store import Store
from core.tools import SideEffect
from core.verify import verify
from tests.core.gatekit import Calls, counter_tool, make_gate

ONE_CALL = Limits(max_steps=2, loop_repeats=None, max_consecutive_failures=None)


def _events(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    rows = store._conn.execute(
        "SELECT step_idx, kind, payload FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
    ).fetchall()
    # The times differ between the two paths (one clock reading here), and the run's id;
    # nothing else may.
    return [(step, kind, payload.replace(run_id, "RUN")) for step, kind, payload in rows]


def _state(store: Store, run_id: str) -> tuple[Any, ...]:
    run = store._conn.execute(
        "SELECT goal, status, end_reason, result, step_count, consecutive_failures, server"
        " FROM runs WHERE id = ?",
        (run_id,),
    ).fetchone()
    steps = store._conn.execute(
        "SELECT idx, status, decision, tool_name, tool_spec_hash, arguments, request_hash,"
        " observation FROM steps WHERE run_id = ? ORDER BY idx",
        (run_id,),
    ).fetchall()
    return tuple(run), [tuple(s) for s in steps]


def test_an_allowed_call_is_two_commits_with_the_events_of_the_four_separate_calls(
    gate_store: Store,
) -> None:
    calls = Calls()
    g = make_gate(gate_store, [counter_tool("read", SideEffect.READ_ONLY, calls, terminal=True)])
    decision = Decision.tool_call("read", '{ "n" : 1 }', origin="model")

    async def separate() -> None:
        s = g.begin("separate", "read once", ONE_CALL)
        step = s.step()
        assert step is not None
        assert step.propose(decision).outcome == VerdictOutcome.ALLOWED
        await step.execute()
        s.close()

    async def combined() -> None:
        s, verdict = g.begin_with("combined", "read once", ONE_CALL, decision)
        assert verdict.outcome == VerdictOutcome.ALLOWED
        step = s.current()
        assert step is not None
        await step.execute()
        s.close()

    assert gate_store.trace is not None
    asyncio.run(separate())
    before = len(gate_store.trace)
    asyncio.run(combined())
    combined_commits = gate_store.trace[before:]
    assert [purpose for purpose, _ in combined_commits] == ["state", "state"]
    assert combined_commits[0][1] == (
        "run.started", "step.started", "step.decided", "step.policy", "step.tool_started",
    )  # fmt: skip
    assert combined_commits[1][1] == ("step.observed", "run.ended")
    assert len(gate_store.trace[:before]) == 5
    assert _events(gate_store, "combined") == _events(gate_store, "separate")
    assert _state(gate_store, "combined")[1] == _state(gate_store, "separate")[1]
    assert calls.made == [("read", {"n": 1}), ("read", {"n": 1})]
    assert verify(gate_store).head.seq == gate_store.head().seq


@pytest.mark.parametrize(
    ("rule", "outcome", "kinds"),
    [
        (Rule.DENY, VerdictOutcome.DENIED, ("step.policy", "step.observed")),
        (Rule.APPROVE, VerdictOutcome.PENDING, ("step.policy", "approval.requested")),
    ],
)
def test_a_call_that_is_not_allowed_is_one_commit_and_starts_nothing(
    gate_store: Store, rule: Rule, outcome: VerdictOutcome, kinds: tuple[str, ...]
) -> None:
    calls = Calls()
    tool = counter_tool("write", SideEffect.LOCAL_MUTATION, calls, terminal=True)
    g = make_gate(gate_store, [tool], policy=ConfigPolicy({SideEffect.LOCAL_MUTATION: rule}))
    assert gate_store.trace is not None
    s, verdict = g.begin_with("r", "write once", ONE_CALL, Decision.tool_call("write", {"n": 2}))
    assert verdict.outcome == outcome
    assert [k for _, k in gate_store.trace] == [
        ("run.started", "step.started", "step.decided", *kinds)
    ]
    assert s.current() is None
    s.close()
    assert calls.made == []


def test_a_decision_parsed_by_its_caller_is_not_parsed_again_and_records_the_same(
    gate_store: Store,
) -> None:
    """The proxy parses the host's arguments once, for its call key, and hands the value on."""
    calls = Calls()
    g = make_gate(gate_store, [counter_tool("read", SideEffect.READ_ONLY, calls, terminal=True)])
    text = '{"n":3}'
    parsed = canonical.Canonical.parse(text)
    s, verdict = g.begin_with(
        "r", "read", ONE_CALL, Decision.tool_call("read", text, origin="model")
    )
    s2, verdict2 = g.begin_with(
        "r2", "read", ONE_CALL, Decision("tool_call", "read", text, origin="model", parsed=parsed)
    )
    assert verdict.request is not None and verdict2.request is not None
    assert verdict2.request.parsed is parsed
    assert verdict2.request.arguments == verdict.request.arguments == parsed.text
    assert verdict2.request.request_hash == verdict.request.request_hash
    s.close()
    s2.close()


def test_a_begin_refused_by_its_check_writes_nothing(gate_store: Store) -> None:
    calls = Calls()
    g = make_gate(gate_store, [counter_tool("read", SideEffect.READ_ONLY, calls, terminal=True)])

    def refuse(_: Any) -> None:
        raise RunExists("raced")

    with pytest.raises(RunExists):
        g.begin_with("r", "read", ONE_CALL, Decision.tool_call("read", {"n": 1}), check=refuse)
    assert gate_store._conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert g.leases.holds("r") is False


@pytest.mark.guarantee("G-CRASH-1")
def test_a_process_that_dies_after_the_first_commit_leaves_a_started_step_the_takeover_holds(
    gate_store: Store,
) -> None:
    """A mutating call whose process died between its two commits waits for the operator as
    "started, outcome unknown", as a library step that died after its tool's start does; the
    tool is not called again."""
    calls = Calls()
    wall = [1_000_000.0]
    tool = counter_tool("write", SideEffect.LOCAL_MUTATION, calls, terminal=True)
    allow = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    first = make_gate(gate_store, [tool], policy=allow, wall_clock=lambda: wall[0])
    s, verdict = first.begin_with("r", "write", ONE_CALL, Decision.tool_call("write", {"n": 4}))
    assert verdict.outcome == VerdictOutcome.ALLOWED
    s._die()  # the process dies with the tool started: nothing else is written
    wall[0] += 31  # past the 30 s lease
    second = make_gate(gate_store, [tool], policy=allow, wall_clock=lambda: wall[0])
    s2, ended = second.attach("r")
    assert ended is not None and ended.outcome == VerdictOutcome.PENDING
    assert ended.approval is not None and ended.approval.kind == "interrupted_side_effect"
    assert calls.made == []
    assert verify(gate_store).head.seq == gate_store.head().seq
    s2.close()


def test_a_limit_the_new_run_already_exceeds_ends_it_and_starts_no_step(gate_store: Store) -> None:
    calls = Calls()
    g = make_gate(gate_store, [counter_tool("read", SideEffect.READ_ONLY, calls, terminal=True)])
    assert gate_store.trace is not None
    s, verdict = g.begin_with(
        "r", "read", Limits(max_steps=0), Decision.tool_call("read", {"n": 1})
    )
    assert verdict.outcome == VerdictOutcome.ENDED
    assert s.done() and s.run().status == "FAILED"
    assert [k for _, k in gate_store.trace] == [("run.started", "run.ended")]
    assert calls.made == []


def test_a_value_parsed_from_other_arguments_is_not_the_one_checked_and_run() -> None:
    """A caller's ``parsed`` counts only when it was parsed from the decision's own arguments:
    what is recorded is what is checked, approved and run."""
    recorded = '{"path":"notes.txt"}'
    other = canonical.Canonical.parse('{"path":"/etc/passwd"}')
    decision = Decision("tool_call", "read", recorded, origin="model", parsed=other)
    assert decision.canonical_arguments().value == {"path": "notes.txt"}
    same = canonical.Canonical.parse(recorded)
    assert Decision("tool_call", "read", recorded, parsed=same).canonical_arguments() is same
