"""Builds databases the way the runtime writes them: each state change with its events, in
one transaction. Used by the tests and the benchmarks (no gate is needed to exercise the
store and the chain)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core import canonical, transitions
from core.chain import Head
from core.limits import Limits
from core.store import Store, format_time

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def record_run(store: Store, run_id: str, *, steps: int = 2, start: datetime = T0) -> Head:
    """One run of ``steps`` tool calls, each started and done, ending COMPLETED, written through
    core.transitions (so its events rebuild its rows); returns the chain head."""
    at = format_time(start)
    with store.transaction() as tx:
        transitions.start_run(tx, run_id=run_id, goal=f"goal of {run_id}", limits=Limits(),
                              owner="builder", expires=0.0, at=at)  # fmt: skip
    for i in range(steps):
        at = format_time(start + timedelta(seconds=i + 1))
        args = {"path": f"/tmp/{run_id}/{i}", "n": i}
        with store.transaction() as tx:
            transitions.start_step(tx, run_id, i, at=at)
            tx.execute(
                "UPDATE steps SET tool_name = 'write_file', arguments = ? WHERE run_id = ?"
                " AND idx = ?",
                (canonical.dumps_text(args), run_id, i),
            )
        with store.transaction() as tx:
            transitions.finish_step(tx, run_id, i, status="done", active_seconds=0.0, at=at,
                                    observation={"ok": True, "result": f"wrote {i}"})  # fmt: skip
    at = format_time(start + timedelta(seconds=steps + 1))
    with store.transaction() as tx:
        transitions.end_run(tx, run_id, status="COMPLETED", reason="completed", at=at)
    return store.head()


def record_runs(store: Store, count: int, *, steps: int = 2) -> Head:
    head = store.head()
    for n in range(count):
        head = record_run(store, f"run-{n + 1}", steps=steps, start=T0 + timedelta(minutes=n))
    return head


def events_per_run(steps: int) -> int:
    return 2 + 2 * steps
