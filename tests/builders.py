"""Builds databases the way the runtime writes them: each state change with its events, in
one transaction. Used by the tests and the benchmarks (no gate is needed to exercise the
store and the chain)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.chain import Head
from core.store import Store, format_time

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def record_run(store: Store, run_id: str, *, steps: int = 2, start: datetime = T0) -> Head:
    """One run of ``steps`` allowed tool calls, ending COMPLETED; returns the chain head."""
    at = format_time(start)
    with store.transaction() as tx:
        tx.execute(
            "INSERT INTO runs (id, goal, status, limits, created_at, updated_at)"
            " VALUES (?, ?, 'RUNNING', '{}', ?, ?)",
            (run_id, f"goal of {run_id}", at, at),
        )
        tx.append_event(
            kind="run.started", payload={"goal": f"goal of {run_id}"}, at=at, run_id=run_id
        )
    for i in range(steps):
        at = format_time(start + timedelta(seconds=i + 1))
        args = {"path": f"/tmp/{run_id}/{i}", "n": i}
        with store.transaction() as tx:
            tx.execute(
                "INSERT INTO steps (run_id, idx, status, tool_name, arguments, started_at)"
                " VALUES (?, ?, 'executing', 'write_file', ?, ?)",
                (run_id, i, str(args), at),
            )
            tx.append_event(
                kind="step.tool_started",
                payload={"tool": "write_file", "args": args},
                at=at,
                run_id=run_id,
                step=i,
            )
        with store.transaction() as tx:
            tx.execute(
                "UPDATE steps SET status = 'done', ended_at = ? WHERE run_id = ? AND idx = ?",
                (at, run_id, i),
            )
            tx.append_event(
                kind="step.observed",
                payload={"ok": True, "summary": f"wrote {i}"},
                at=at,
                run_id=run_id,
                step=i,
            )
    at = format_time(start + timedelta(seconds=steps + 1))
    with store.transaction() as tx:
        tx.execute(
            "UPDATE runs SET status = 'COMPLETED', end_reason = 'completed', updated_at = ?"
            " WHERE id = ?",
            (at, run_id),
        )
        return tx.append_event(kind="run.completed", payload={"result": None}, at=at, run_id=run_id)


def record_runs(store: Store, count: int, *, steps: int = 2) -> Head:
    head = store.head()
    for n in range(count):
        head = record_run(store, f"run-{n + 1}", steps=steps, start=T0 + timedelta(minutes=n))
    return head


def events_per_run(steps: int) -> int:
    return 2 + 2 * steps
