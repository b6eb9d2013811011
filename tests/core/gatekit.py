"""What the gate tests share: a fake clock, example tools, and the record's own checks
(completeness: every state change writes events; consistency: the events rebuild the state)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from core import canonical
from core.gate import Gate, GateConfig
from core.policy.policy import DefaultPolicy, Policy
from core.replay import rebuild as core_rebuild
from core.store import Store
from core.tools import SideEffect, Tool

COUNTER_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


@dataclass
class FakeClock:
    """Moves only when told to (``advance``) plus ``tick`` per reading; records readings."""

    now: datetime = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    tick: timedelta = timedelta(milliseconds=1)
    readings: list[datetime] = field(default_factory=list)

    def __call__(self) -> datetime:
        self.now += self.tick
        self.readings.append(self.now)
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Calls:
    """What the example tools were called with, in order: a side effect seen from outside."""

    made: list[tuple[str, Any]] = field(default_factory=list)


def counter_tool(
    name: str,
    side_effect: SideEffect | None,
    calls: Calls,
    *,
    idempotent: bool = False,
    terminal: bool = False,
    result: Callable[[dict[str, Any]], Any] | None = None,
) -> Tool:
    def run(args: dict[str, Any]) -> Any:
        calls.made.append((name, args))
        return result(args) if result else f"echoed {name}"

    return Tool(
        name, f"{name} the counter", COUNTER_SCHEMA, side_effect, run,
        idempotent=idempotent, terminal=terminal,
    )  # fmt: skip


def standard_tools(calls: Calls) -> list[Tool]:
    return [
        counter_tool("read", SideEffect.READ_ONLY, calls),
        counter_tool("write", SideEffect.LOCAL_MUTATION, calls),
        counter_tool("push", SideEffect.REMOTE_MUTATION, calls),
        counter_tool("delete", SideEffect.DESTRUCTIVE, calls),
        counter_tool("unclassified", None, calls),
    ]


def approval_ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"ap-{next(counter)}"


def make_gate(
    store: Store,
    tools: Sequence[Tool],
    *,
    policy: Policy | None = None,
    clock: FakeClock | None = None,
    **config: Any,
) -> Gate:
    return Gate(
        GateConfig(
            store=store,
            tools=tools,
            policy=policy or DefaultPolicy(),
            clock=clock or FakeClock(),
            new_id=config.pop("new_id", None) or approval_ids(),
            **config,
        )
    )


# --- the record's own checks ------------------------------------------------------------


def check_completeness(store: Store) -> None:
    """Every committed state transaction appended at least one event.

    A test that edits the record itself says so by setting ``store.trace = None``.
    """
    if store.trace is None:
        return
    silent = [
        i for i, (purpose, kinds) in enumerate(store.trace) if purpose == "state" and not kinds
    ]
    assert not silent, f"transactions {silent} changed state without an event"


def rebuild(store: Store) -> dict[str, Any]:
    """The state of every run, approval and step, rebuilt from the events alone."""
    return core_rebuild(store._conn)


def check_consistency(store: Store) -> None:
    """The tables say what the events say."""
    rebuilt = rebuild(store)
    conn = store._conn
    for run_id, run in rebuilt["runs"].items():
        row = conn.execute(
            "SELECT status, end_reason, result, step_count, consecutive_failures FROM runs"
            " WHERE id = ?",
            (run_id,),
        ).fetchone()
        result = None if row[2] is None else canonical.loads(row[2])
        assert (row[0], row[1], result, row[3], row[4]) == (
            run["status"], run["end_reason"], run["result"], run["step_count"], run["failures"],
        ), run_id  # fmt: skip
    for (run_id, idx), step in rebuilt["steps"].items():
        row = conn.execute(
            "SELECT status, decision, observation FROM steps WHERE run_id = ? AND idx = ?",
            (run_id, idx),
        ).fetchone()
        decision = None if row[1] is None else canonical.loads(row[1])
        observation = None if row[2] is None else canonical.loads(row[2])
        assert (row[0], decision, observation) == (
            step["status"], step["decision"], step["observation"],
        ), (run_id, idx)  # fmt: skip
    for approval_id, approval in rebuilt["approvals"].items():
        row = conn.execute(
            "SELECT status, kind, request_hash FROM approvals WHERE id = ?", (approval_id,)
        ).fetchone()
        assert row == (approval["status"], approval["kind"], approval["hash"]), approval_id
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM steps),"
        " (SELECT count(*) FROM approvals)"
    ).fetchone()
    assert counts == (len(rebuilt["runs"]), len(rebuilt["steps"]), len(rebuilt["approvals"]))


def record_snapshot(store: Store) -> tuple[Any, ...]:
    """Everything in the state tables and the log, for 'changed nothing' comparisons."""
    conn = store._conn
    return tuple(
        conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
        for table in ("runs", "steps", "approvals", "events", "tool_specs")
    )
