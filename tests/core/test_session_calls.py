"""A session's calls: ``input()`` as values kept by the session, and calls that wait their turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.decisions import Decision
from core.errors import RunStateError, SessionClosed
from core.gate import Session, VerdictOutcome
from core.records import read_run, read_steps
from core.store import Store
from core.tools import SideEffect, Tool
from tests.core.gatekit import COUNTER_SCHEMA, Calls, make_gate, standard_tools


def _statements(store: Store) -> list[str]:
    """Every statement the store's connection runs from now on."""
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    return seen


def test_input_reads_the_store_at_its_first_call_only(gate_store: Store) -> None:
    gate = make_gate(gate_store, standard_tools(Calls()))
    session = gate.begin("run-1", "read twice")
    step = session.step()
    assert step is not None
    first = session.input()
    seen = _statements(gate_store)
    assert session.input() == first
    assert seen == []  # nothing read, not even the run
    verdict = step.propose(Decision.tool_call("read", {"n": 1}))
    assert verdict.outcome == VerdictOutcome.ALLOWED
    asyncio.run(step.execute())
    del seen[:]
    after = session.input()
    assert seen == []
    assert after.step is None
    with gate_store.snapshot() as conn:  # what the session kept is what the store says
        assert after.steps == read_steps(conn, "run-1")
        assert after.run == read_run(conn, "run-1")
    gate_store._conn.set_trace_callback(None)
    session.close()


def test_input_with_a_step_open_is_that_step_and_the_steps_before(gate_store: Store) -> None:
    gate = make_gate(gate_store, standard_tools(Calls()))
    session = gate.begin("run-1", "read, then decide")
    assert session.input().steps == ()  # the first call, with no step open
    step = session.step()
    assert step is not None
    asyncio.run(_propose_and_execute(step, "read"))
    second = session.step()
    assert second is not None
    seen = _statements(gate_store)
    found = session.input()
    assert seen == []
    assert found.step == 1
    assert [(s.index, s.status, s.tool) for s in found.steps] == [
        (0, "done", "read"),
        (1, "deciding", None),
    ]
    gate_store._conn.set_trace_callback(None)
    session.close()


async def _propose_and_execute(step: Any, tool: str) -> None:
    verdict = step.propose(Decision.tool_call(tool, {"n": 1}))
    assert verdict.outcome == VerdictOutcome.ALLOWED
    await step.execute()


def test_input_refuses_once_the_session_is_over(gate_store: Store) -> None:
    gate = make_gate(gate_store, standard_tools(Calls()))
    session = gate.begin("run-1", "ask, then stop")
    session.input()
    session.close()
    with pytest.raises(SessionClosed):
        session.input()
    paused = gate.begin("run-2", "wait for the operator")
    step = paused.step()
    assert step is not None
    assert step.propose(Decision.tool_call("write", {"n": 1})).outcome == VerdictOutcome.PENDING
    with pytest.raises(RunStateError):
        paused.input()


class Held:
    """A read-only tool that holds its call until released: a call under way, for as long as
    the test wants."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.seen: list[BaseException] = []

    def tool(self) -> Tool:
        async def run(_args: dict[str, Any]) -> str:
            self.started.set()
            await self.release.wait()
            return "held"

        return Tool("held", "wait to be released", COUNTER_SCHEMA, SideEffect.READ_ONLY, run)


def _waiting(session: Session) -> int:
    return len(session._calls._waiters)


async def _until(condition: Any) -> None:
    """Yield to the event loop until ``condition()`` holds (bounded by the test's timeout)."""
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.001)


def test_a_second_execute_from_another_task_waits_then_is_refused_as_misuse(
    gate_store: Store,
) -> None:
    held = Held()
    gate = make_gate(gate_store, [held.tool()])
    session = gate.begin("run-1", "execute twice")
    step = session.step()
    assert step is not None
    assert step.propose(Decision.tool_call("held", {"n": 1})).outcome == VerdictOutcome.ALLOWED

    async def scenario() -> None:
        first = asyncio.create_task(step.execute())
        await held.started.wait()
        second = asyncio.create_task(step.execute())
        await _until(lambda: _waiting(session) == 1)
        assert not second.done()
        held.release.set()
        assert (await first).ok
        with pytest.raises(RunStateError):  # the step is over: nothing is executed twice
            await second

    asyncio.run(scenario())
    with gate_store.snapshot() as conn:
        started = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()[0]
    assert started == 1
    assert session.step() is not None  # the refusal left the session as it was
    session.close()


def test_a_call_from_inside_a_call_of_its_session_is_refused_not_deadlocked(
    gate_store: Store,
) -> None:
    caught: list[BaseException] = []
    box: list[Session] = []

    def calls_back(_args: dict[str, Any]) -> str:
        try:
            box[0].step()
        except RunStateError as e:
            caught.append(e)
        return "called back"

    tool = Tool("back", "call the session", COUNTER_SCHEMA, SideEffect.READ_ONLY, calls_back)
    gate = make_gate(gate_store, [tool])
    session = gate.begin("run-1", "call back")
    box.append(session)
    step = session.step()
    assert step is not None
    assert step.propose(Decision.tool_call("back", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    assert asyncio.run(step.execute()).ok
    assert len(caught) == 1
    session.close()


def test_a_plain_call_on_the_thread_of_a_task_under_way_is_refused_not_deadlocked(
    gate_store: Store,
) -> None:
    held = Held()
    gate = make_gate(gate_store, [held.tool()])
    session = gate.begin("run-1", "hold, then step on the same thread")
    step = session.step()
    assert step is not None
    assert step.propose(Decision.tool_call("held", {"n": 1})).outcome == VerdictOutcome.ALLOWED

    async def scenario() -> None:
        execute = asyncio.create_task(step.execute())
        await held.started.wait()
        with pytest.raises(RunStateError):
            session.step()  # would block the event loop the execute needs
        held.release.set()
        assert (await execute).ok

    asyncio.run(scenario())
    session.close()
