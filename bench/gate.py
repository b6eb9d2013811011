"""Benchmark: the gate's cost per allowed call, in synced commits measured in the same run.

Two paths, each timed over N allowed read-only calls:

- the proxy's (one run per call, as `signoff proxy` makes): ``Gate.begin_with`` writes the run,
  its step, the decision with its policy evaluation and the tool's start in one synced commit,
  and ``execute`` the outcome with the run's end in a second (decision 0035);
- the library's (a loop's steps in one long run): step + propose + execute, the step's start,
  the decision with its policy evaluation, the tool's start and its outcome, each a synced
  commit with its events (the seed's Propose/Execute).

The baseline is a bare synced SQLite transaction (BEGIN IMMEDIATE, one small INSERT, COMMIT) on
a database with the same settings in the same directory.

Prints calls per second, commits per second, and the ratios. Goal (issue 20): at most 3 commits'
worth per allowed call on the proxy's path.

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


async def proxy_path_calls(path: Path, count: int, *, synced: bool = True) -> float:
    """One run per call, begun with its step started (``Gate.begin_with``), as the proxy does."""
    store = Store.open(path)
    if not synced:
        store._conn.execute("PRAGMA synchronous = OFF")
    tool = Tool("read", "read the counter", SCHEMA, SideEffect.READ_ONLY, lambda a: a["n"],
                terminal=True)  # fmt: skip
    gate = Gate(GateConfig(store=store, tools=[tool]))
    limits = Limits(max_steps=2, loop_repeats=None, max_consecutive_failures=None)
    t = time.perf_counter()
    for n in range(count):
        session, verdict = gate.begin_with(
            f"call-{n}", "read", limits, Decision.tool_call("read", {"n": n})
        )
        assert verdict.outcome == VerdictOutcome.ALLOWED
        step = session.current()
        assert step is not None
        await step.execute()
        session.close()
    elapsed = time.perf_counter() - t
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    best_gate = best_bare = best_cpu = best_proxy = best_proxy_cpu = float("inf")
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        for i in range(args.repeat):
            d = Path(tmp)
            best_bare = min(best_bare, bare_commits(d / f"bare-{i}.db", args.calls))
            best_proxy = min(
                best_proxy, asyncio.run(proxy_path_calls(d / f"proxy-{i}.db", args.calls))
            )
            best_gate = min(best_gate, asyncio.run(gate_calls(d / f"gate-{i}.db", args.calls)))
            best_proxy_cpu = min(
                best_proxy_cpu,
                asyncio.run(proxy_path_calls(d / f"pcpu-{i}.db", args.calls, synced=False)),
            )
            best_cpu = min(
                best_cpu, asyncio.run(gate_calls(d / f"cpu-{i}.db", args.calls, synced=False))
            )
    n = args.calls
    ratio = best_proxy / best_bare
    print(
        f"bare synced commits:  {n / best_bare:,.0f} commits/s ({best_bare / n * 1000:.2f} ms each)"
    )
    print("the proxy's path (one run per call, decision 0035): 2 synced commits per call")
    print(
        f"  allowed calls:      {n / best_proxy:,.0f} calls/s ({best_proxy / n * 1000:.2f} ms each)"
    )
    print(f"  same calls, no fsync: {best_proxy_cpu / n * 1000:.2f} ms each (the CPU part)")
    print(f"  ratio call/commit:  {ratio:.2f} commits' worth per allowed call")
    print(f"  of which CPU:       {best_proxy_cpu / best_bare:.2f}")
    print("the library's step + propose + execute (one long run): 4 synced commits per call")
    print(
        f"  allowed calls:      {n / best_gate:,.0f} calls/s ({best_gate / n * 1000:.2f} ms each)"
    )
    print(f"  same calls, no fsync: {best_cpu / n * 1000:.2f} ms each (the CPU part)")
    print(f"  ratio call/commit:  {best_gate / best_bare:.2f} commits' worth per allowed call")
    print(f"  of which CPU:       {best_cpu / best_bare:.2f}")
    met = "met" if ratio <= 3 else "NOT met"
    print(f"goal (issue 20): the proxy's path <= 3 commits' worth: {met}")


if __name__ == "__main__":
    main()
