"""Each limit ends the run at step start, with a named reason."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.decisions import Decision
from core.gate import VerdictOutcome
from core.limits import Finished, Limits, exceeded
from core.store import Store
from core.tools import SideEffect
from tests.core.gatekit import Calls, FakeClock, counter_tool, make_gate, standard_tools


def _session(store: Store, limits: Limits, clock: FakeClock | None = None, tools=None):
    calls = Calls()
    g = make_gate(store, tools or standard_tools(calls), clock=clock)
    return g.begin("r", "goal", limits), calls


def _read(session, n: int) -> None:
    step = session.step()
    assert step is not None
    assert step.propose(Decision.tool_call("read", {"n": n})).outcome == VerdictOutcome.ALLOWED
    asyncio.run(step.execute())


def _ended(session, reason: str) -> None:
    assert session.step() is None
    assert session.done()
    assert (session.run().status, session.run().end_reason) == ("FAILED", reason)


def test_the_step_limit(gate_store: Store) -> None:
    s, _ = _session(gate_store, Limits(max_steps=2))
    _read(s, 1)
    _read(s, 2)
    _ended(s, "limit_steps")


def test_the_consecutive_failure_limit_and_a_success_resets_it(gate_store: Store) -> None:
    s, _ = _session(gate_store, Limits(max_consecutive_failures=2))
    s.step().propose(Decision.tool_call("read", {"bad": 1}))
    _read(s, 1)  # resets
    s.step().propose(Decision.tool_call("read", {"bad": 1}))
    s.step().propose(Decision.tool_call("read", {"bad": 2}))
    _ended(s, "limit_consecutive_failures")


def test_the_same_call_with_the_same_observation_is_a_loop(gate_store: Store) -> None:
    s, _ = _session(gate_store, Limits(loop_repeats=3))
    for _ in range(3):
        _read(s, 1)
    _ended(s, "limit_loop")


def test_the_same_call_with_a_changed_result_is_progress(gate_store: Store) -> None:
    counter = iter(range(100))
    calls = Calls()
    tools = [counter_tool("read", SideEffect.READ_ONLY, calls, result=lambda a: next(counter))]
    s, _ = _session(gate_store, Limits(loop_repeats=3, max_steps=6), tools=tools)
    for _ in range(6):
        _read(s, 1)
    _ended(s, "limit_steps")


def test_active_time_counts_work_not_waiting(gate_store: Store) -> None:
    clock = FakeClock()
    slow_clock_tools = standard_tools(Calls())
    s, _ = _session(gate_store, Limits(max_active_seconds=10), clock=clock, tools=slow_clock_tools)
    step = s.step()
    clock.advance(6)
    step.propose(Decision.tool_call("read", {"n": 1}))
    asyncio.run(step.execute())
    step = s.step()
    clock.advance(6)
    step.propose(Decision.tool_call("read", {"n": 2}))
    asyncio.run(step.execute())
    _ended(s, "limit_active_time")


def test_elapsed_time_counts_since_the_run_began(gate_store: Store) -> None:
    clock = FakeClock()
    s, _ = _session(gate_store, Limits(max_elapsed_seconds=60, max_active_seconds=None),
                    clock=clock)  # fmt: skip
    _read(s, 1)
    clock.advance(61)
    _ended(s, "limit_elapsed_time")


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"step_count": 5}, "limit_steps"),
        ({"consecutive_failures": 3}, "limit_consecutive_failures"),
        ({"recent": [Finished("h", "o")] * 3}, "limit_loop"),
        ({"recent": [Finished("h", "o"), Finished("h", "p"), Finished("h", "o")]}, None),
        ({"recent": [Finished(None, None)] * 3}, None),
        ({"active_seconds": 10.0}, "limit_active_time"),
        ({"elapsed_seconds": 20.0}, "limit_elapsed_time"),
        ({}, None),
    ],
)
def test_the_limit_rules(kw: dict[str, Any], expected: str | None) -> None:
    limits = Limits(max_steps=5, max_consecutive_failures=3, loop_repeats=3,
                    max_active_seconds=10, max_elapsed_seconds=20)  # fmt: skip
    args: dict[str, Any] = {"step_count": 0, "consecutive_failures": 0, "recent": [],
                            "active_seconds": 0.0, "elapsed_seconds": 0.0}  # fmt: skip
    args.update(kw)
    assert exceeded(limits, **args) == expected


def test_limits_round_trip_through_the_record() -> None:
    limits = Limits(max_steps=3, grant_ttl_seconds=1.5)
    assert Limits.from_json(limits.as_json()) == limits
    with pytest.raises(ValueError, match="not a set of limits"):
        Limits.from_json({"max_stepz": 3})
