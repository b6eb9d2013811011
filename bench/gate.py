"""Benchmark: the gate's cost per allowed call, in synced commits measured in the same run.

An allowed read-only call through a session is step + propose + execute: the step's start, the
decision with its policy evaluation, the tool's start and its outcome, each a synced commit
with its events. The baseline is a bare synced SQLite transaction (BEGIN IMMEDIATE, one small
INSERT, COMMIT) on a database with the same settings in the same directory.

Prints calls per second, commits per second, and the ratio. Goal (issue 3): at most 4.

    python bench/gate.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from core.decisions import Decision
from core.gate import Gate, GateConfig, VerdictOutcome
from core.limits import Limits
from core.store import Store
from core.tools import SideEffect, Tool

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def bare_commits(path: Path, count: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (n INTEGER, payload TEXT)")
    t = time.perf_counter()
    for n in range(count):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?)", (n, '{"tool":"read","args":{"n":1}}'))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t
    conn.close()
    return elapsed


async def gate_calls(path: Path, count: int, *, synced: bool = True) -> float:
    store = Store.open(path)
    if not synced:
        # Breakdown only: the same calls with no fsync show the CPU part of the cost.
        store._conn.execute("PRAGMA synchronous = OFF")
    tool = Tool("read", "read the counter", SCHEMA, SideEffect.READ_ONLY, lambda a: a["n"])
    gate = Gate(GateConfig(store=store, tools=[tool]))
    session = gate.begin("bench", "read", Limits(max_steps=None, loop_repeats=None))
    t = time.perf_counter()
    for n in range(count):
        step = session.step()
        assert step is not None
        verdict = step.propose(Decision.tool_call("read", {"n": n}))
        assert verdict.outcome == VerdictOutcome.ALLOWED
        await step.execute()
    elapsed = time.perf_counter() - t
    session.close()
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    best_gate = best_bare = best_cpu = float("inf")
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        for i in range(args.repeat):
            d = Path(tmp)
            best_bare = min(best_bare, bare_commits(d / f"bare-{i}.db", args.calls))
            best_gate = min(best_gate, asyncio.run(gate_calls(d / f"gate-{i}.db", args.calls)))
            best_cpu = min(
                best_cpu, asyncio.run(gate_calls(d / f"cpu-{i}.db", args.calls, synced=False))
            )
    n = args.calls
    print(
        f"allowed calls:        {n / best_gate:,.0f} calls/s ({best_gate / n * 1000:.2f} ms each)"
    )
    print(
        f"bare synced commits:  {n / best_bare:,.0f} commits/s ({best_bare / n * 1000:.2f} ms each)"
    )
    print(f"same calls, no fsync: {best_cpu / n * 1000:.2f} ms each (the CPU part)")
    print(f"ratio call/commit:    {best_gate / best_bare:.2f} commits' worth per allowed call")
    print(f"  of which CPU:       {best_cpu / best_bare:.2f}; the contract's 4 synced commits: 4")


if __name__ == "__main__":
    main()
