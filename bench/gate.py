"""Benchmark: the gate's cost per allowed call, in synced commits measured in the same run.

Three ways through the gate, each over N allowed read-only calls:

- the proxy's path (one run per call, as `signoff proxy` makes): ``Gate.begin_with`` writes the
  run, its step, the decision with its policy evaluation and the tool's start in one synced
  commit, and ``execute`` the outcome with the run's end in a second (decision 0036);
- the same runs through the separate calls the proxy made before decision 0036: ``begin``,
  ``step``, ``propose``, ``execute``, five synced commits;
- the library's loop (a loop's steps in one long run): step + propose + execute, the step's
  start, the decision with its policy evaluation, the tool's start and its outcome, four
  synced commits (the seed's Propose/Execute).

The baseline is a bare synced SQLite transaction (BEGIN IMMEDIATE, one small INSERT, COMMIT) on
a database with the same settings in the same directory. The four are interleaved in rounds of
a few calls each, so that a busy machine slows them alike; then each gate path once more with
no fsync, for its CPU part.

Prints calls per second, commits per second, and the ratios. Goal (issue 20): at most 3 commits'
worth per allowed call on the proxy's path.

    python bench/gate.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.decisions import Decision
from core.gate import Gate, GateConfig, Session, VerdictOutcome
from core.limits import Limits
from core.store import Store
from core.tools import SideEffect, Tool

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
ONE_CALL = Limits(max_steps=2, loop_repeats=None, max_consecutive_failures=None)
GOAL = 3.0

Calls = Callable[[int], Awaitable[None]]  # make this many allowed calls


class Bare:
    """Bare synced commits, the baseline."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("CREATE TABLE t (n INTEGER, payload TEXT)")
        self.n = 0

    async def __call__(self, count: int) -> None:
        for _ in range(count):
            self.n += 1
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO t VALUES (?, ?)", (self.n, '{"tool":"read","args":{"n":1}}')
            )
            self.conn.execute("COMMIT")


def _gate(path: Path, *, synced: bool, terminal: bool) -> Gate:
    store = Store.open(path)
    if not synced:
        # Breakdown only: the same calls with no fsync show the CPU part of the cost.
        store._conn.execute("PRAGMA synchronous = OFF")
    tool = Tool("read", "read the counter", SCHEMA, SideEffect.READ_ONLY, lambda a: a["n"],
                terminal=terminal)  # fmt: skip
    return Gate(GateConfig(store=store, tools=[tool]))


class ProxyPath:
    """One run per call, begun with its step started (``Gate.begin_with``)."""

    def __init__(self, path: Path, *, synced: bool = True) -> None:
        self.gate = _gate(path, synced=synced, terminal=True)
        self.n = 0

    async def __call__(self, count: int) -> None:
        for _ in range(count):
            self.n += 1
            session, verdict = self.gate.begin_with(
                f"call-{self.n}", "read", ONE_CALL, Decision.tool_call("read", {"n": self.n})
            )
            assert verdict.outcome == VerdictOutcome.ALLOWED
            step = session.current()
            assert step is not None
            await step.execute()
            session.close()


class SeparatePath:
    """One run per call through begin, step, propose and execute (the proxy before 0036)."""

    def __init__(self, path: Path, *, synced: bool = True) -> None:
        self.gate = _gate(path, synced=synced, terminal=True)
        self.n = 0

    async def __call__(self, count: int) -> None:
        for _ in range(count):
            self.n += 1
            session = self.gate.begin(f"call-{self.n}", "read", ONE_CALL)
            step = session.step()
            assert step is not None
            verdict = step.propose(Decision.tool_call("read", {"n": self.n}))
            assert verdict.outcome == VerdictOutcome.ALLOWED
            await step.execute()
            session.close()


class LibraryLoop:
    """A loop's steps in one long run: step + propose + execute."""

    def __init__(self, path: Path, *, synced: bool = True) -> None:
        self.gate = _gate(path, synced=synced, terminal=False)
        self.session: Session = self.gate.begin(
            "bench", "read", Limits(max_steps=None, loop_repeats=None)
        )
        self.n = 0

    async def __call__(self, count: int) -> None:
        for _ in range(count):
            self.n += 1
            step = self.session.step()
            assert step is not None
            verdict = step.propose(Decision.tool_call("read", {"n": self.n}))
            assert verdict.outcome == VerdictOutcome.ALLOWED
            await step.execute()


async def timed(calls: Calls, count: int) -> float:
    t = time.perf_counter()
    await calls(count)
    return time.perf_counter() - t


async def measure(d: Path, total: int, rounds: int) -> dict[str, float]:
    kinds: dict[str, Calls] = {
        "bare": Bare(d / "bare.db"),
        "proxy": ProxyPath(d / "proxy.db"),
        "separate": SeparatePath(d / "separate.db"),
        "library": LibraryLoop(d / "library.db"),
    }
    for calls in kinds.values():  # warm-up, not counted
        await calls(5)
    spent = dict.fromkeys(kinds, 0.0)
    per_round = max(1, total // rounds)
    for _ in range(rounds):
        for name, calls in kinds.items():
            spent[name] += await timed(calls, per_round)
    n = per_round * rounds
    result = {name: seconds / n for name, seconds in spent.items()}
    for name, cls in (("proxy", ProxyPath), ("separate", SeparatePath), ("library", LibraryLoop)):
        unsynced = cls(d / f"{name}-cpu.db", synced=False)
        await unsynced(5)
        result[f"{name}-cpu"] = await timed(unsynced, n) / n
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        r = asyncio.run(measure(Path(tmp), args.calls, min(args.rounds, args.calls)))
    bare = r["bare"]
    print(f"bare synced commits:  {1 / bare:,.0f} commits/s ({bare * 1000:.2f} ms each)")
    rows = (
        ("proxy", "the proxy's path (Gate.begin_with, decision 0036)", 2),
        ("separate", "the same runs through begin/step/propose/execute (before 0036)", 5),
        ("library", "the library's loop: step + propose + execute in one long run", 4),
    )
    for name, label, commits in rows:
        print(f"{label}: {commits} synced commits per call")
        print(f"  allowed calls:      {1 / r[name]:,.0f} calls/s ({r[name] * 1000:.2f} ms each)")
        print(f"  same, no fsync:     {r[name + '-cpu'] * 1000:.2f} ms each (the CPU part)")
        print(f"  ratio call/commit:  {r[name] / bare:.2f} commits' worth per allowed call")
        print(f"  of which CPU:       {r[name + '-cpu'] / bare:.2f}")
    ratio = r["proxy"] / bare
    met = "met" if ratio <= GOAL else "NOT met"
    print(f"goal (issue 20): the proxy's path <= {GOAL:g} commits' worth: {ratio:.2f}, {met}")


if __name__ == "__main__":
    main()
