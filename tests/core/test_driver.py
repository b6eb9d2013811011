"""One implementation of the sequence: the Driver and a loop written outside the runtime
write the same rows, events, payloads, transaction boundaries and clock readings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core import canonical
from core.approvals import approve
from core.decisions import Decision
from core.driver import Driver
from core.gate import Gate, VerdictOutcome
from core.store import Store
from core.testkit import ScriptedAgent
from tests.core.gatekit import Calls, FakeClock, make_gate, standard_tools

PLAN = [
    Decision.tool_call("read", {"n": 1}, "look first"),
    Decision.tool_call("read", {"wrong": 1}, origin="model"),  # invalid: denied
    Decision.tool_call("push", {"n": 7}, "publish"),
    Decision.tool_call("read", {"n": 2}),
    Decision.complete('{"pushed":7}'),
]


async def _external_loop(g: Gate, store: Store, clock: FakeClock) -> None:
    """A caller's own loop: decides by index, as the scripted agent does."""
    s = g.begin("run-1", "publish", None)
    while True:
        step = s.step()
        if step is None:
            return
        s.input()  # the Driver hands its agent the input; read it here too
        v = step.propose(PLAN[step.index])
        if v.outcome == VerdictOutcome.ALLOWED:
            await step.execute()
        elif v.outcome == VerdictOutcome.PENDING:
            s.close()
            approve(store, "run-1", v.approval.id, "operator", "ok", now=clock())
            s, v = g.attach("run-1")
            await s.current().execute()
        elif v.outcome == VerdictOutcome.ENDED:
            s.close()
            return


async def _driver(g: Gate, store: Store, clock: FakeClock) -> None:
    driver = Driver(g, ScriptedAgent(PLAN))
    run = await driver.start("run-1", "publish", None)
    assert run.status == "WAITING_FOR_APPROVAL"
    approval_id = store._conn.execute("SELECT id FROM approvals").fetchone()[0]
    approve(store, "run-1", approval_id, "operator", "ok", now=clock())
    run = await driver.resume("run-1")
    assert run.status == "COMPLETED"


def _record(store: Store) -> dict[str, Any]:
    conn = store._conn
    tables = {
        t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
        for t in ("steps", "approvals", "tool_specs")
    }
    tables["runs"] = conn.execute(
        "SELECT id, goal, status, end_reason, result, limits, step_count, consecutive_failures,"
        " active_seconds, created_at, updated_at FROM runs"
    ).fetchall()
    tables["events"] = [
        (*row[:4], _unsigned(row[3], row[4]), row[5])
        for row in conn.execute(
            "SELECT seq, run_id, step_idx, kind, payload, at FROM events ORDER BY seq"
        )
    ]
    return tables


def _unsigned(kind: str, payload: str) -> Any:
    """A payload without the MAC and key id of a decision: each database has its own key."""
    value = canonical.loads(payload)
    if kind == "approval.decided":
        assert isinstance(value, dict) and len(value.pop("mac")) == 64 and value.pop("key")
    if kind == "operator.keyed":
        assert isinstance(value, dict) and value.pop("key")
    return value


def _run(tmp_path: Path, name: str, loop) -> tuple[dict[str, Any], list, list]:
    clock = FakeClock()
    with Store.open(tmp_path / f"{name}.db") as store:
        store.trace = []
        g = make_gate(store, standard_tools(Calls()), clock=clock)
        asyncio.run(loop(g, store, clock))
        return _record(store), store.trace, clock.readings


def test_an_external_loop_matches_the_driver(tmp_path: Path) -> None:
    driver_record, driver_trace, driver_clock = _run(tmp_path, "driver", _driver)
    loop_record, loop_trace, loop_clock = _run(tmp_path, "loop", _external_loop)
    for table in driver_record:
        assert loop_record[table] == driver_record[table], table
    assert loop_trace == driver_trace
    assert loop_clock == driver_clock
    assert driver_record["runs"][0][2] == "COMPLETED"


def test_the_driver_records_an_agent_that_raises_as_a_failed_run(gate_store: Store) -> None:
    class Broken:
        def decide(self, step):
            raise RuntimeError("the model is down")

    g = make_gate(gate_store, standard_tools(Calls()))
    run = asyncio.run(Driver(g, Broken()).start("r", "goal"))
    assert (run.status, run.end_reason) == ("FAILED", "agent_error")


def test_the_scripted_agent_is_handed_copies_of_the_record(gate_store: Store) -> None:
    agent = ScriptedAgent([Decision.tool_call("read", {"n": 1}), Decision.complete()])
    g = make_gate(gate_store, standard_tools(Calls()))
    asyncio.run(Driver(g, agent).start("r", "goal"))
    assert [s.step for s in agent.seen] == [0, 1]
    assert agent.seen[1].steps[0].status == "done"
