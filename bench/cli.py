"""Benchmark: an operator's command, whole process, against a bare Python in the same run.

Times the whole process of ``signoff --help``, ``signoff pending``, ``signoff runs`` and
``signoff verify`` on a small database (a run of 20 calls, one approval pending), from spawn
to exit, and the baseline ``python -c "import sqlite3, json"`` with the same interpreter. The
commands take turns with the baseline, round after round, so that a noisy machine slows all
alike. Each command runs once before timing, with bytecode writing allowed, as an installed
Signoff has its modules compiled.

``verify --no-keyring`` is timed too: the keyring package finds its backend anew in each
process, loading every backend it has (on Linux the macOS one too, which looks for the macOS
frameworks' libraries), and that is most of ``verify``'s time.

Prints the median and p95 wall time of each, its median CPU time (user + system: what the
process itself spent, which a loaded machine does not inflate), and the ratio of the medians to
the baseline's. Goal (issue 20): at most 0.15 s median and at most 5x the baseline.

    python bench/cli.py [--times N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.decisions import Decision
from core.gate import Gate, GateConfig, VerdictOutcome
from core.limits import Limits
from core.operator_key import MemoryKeyStore, OperatorKey
from core.store import Store
from core.tools import SideEffect, Tool

SIGNOFF = Path(sys.executable).with_name("signoff")
BASELINE = [sys.executable, "-c", "import sqlite3, json"]
# verify --no-keyring: the same check without the keyring, whose package finds its backend
# anew in each process (most of verify's time; the keyring package's, not Signoff's).
COMMANDS = (("--help",), ("pending",), ("runs",), ("verify",), ("verify", "--no-keyring"))
GOAL_MEDIAN_S = 0.15
GOAL_RATIO = 5.0
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
ALLOWED = VerdictOutcome.ALLOWED


def build(home: Path, calls: int = 20) -> None:
    """A small database, written by the gate: ``calls`` allowed read-only calls in one run, and
    a write in another waiting for the operator's approval."""
    read = Tool("read", "read a note", SCHEMA, SideEffect.READ_ONLY, lambda a: a["n"])
    write = Tool("write", "write a note", SCHEMA, SideEffect.LOCAL_MUTATION, lambda a: "written")
    with Store.open(home / "signoff.db") as store:
        # A key in memory and no anchor: building needs no keyring (verify reads none of it).
        gate = Gate(GateConfig(store, [read, write], operator=OperatorKey(MemoryKeyStore()),
                               anchor=None))  # fmt: skip
        session = gate.begin("reads", "read", Limits(max_steps=None, loop_repeats=None))
        for n in range(calls):
            step = session.step()
            assert step is not None
            assert step.propose(Decision.tool_call("read", {"n": n})).outcome == ALLOWED
            asyncio.run(step.execute())
        session.close()
        waiting = gate.begin("write", "write", None).step()
        assert waiting is not None
        assert waiting.propose(Decision.tool_call("write", {"n": 1})).approval is not None


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds from spawn to exit, and the CPU seconds the process spent."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode().strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def p95(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[94]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=30, help="runs of each command")
    args = parser.parse_args()
    if args.times < 1:
        parser.error("--times is at least 1")

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        home.chmod(0o700)
        build(home)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["SIGNOFF_HOME"] = str(home)
        runs = {"baseline": BASELINE} | {
            " ".join(("signoff", *c)): [str(SIGNOFF), *c] for c in COMMANDS
        }
        for argv in runs.values():
            timed(argv, env)  # compiles each module once, as an installed Signoff has them
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.times):
            for name, argv in runs.items():
                wall, cpu = timed(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    base = statistics.median(walls["baseline"])
    base_cpu = statistics.median(cpus["baseline"])
    print(f"runs of each:                {args.times} (taking turns with the baseline)")
    print(f"{'':28} {'median':>8} {'p95':>8} {'cpu':>8} {'ratio':>7}")
    for name in runs:
        median = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        line = (
            f"{name:28} {median * 1000:6.0f}ms {p95(walls[name]) * 1000:6.0f}ms"
            f" {cpu * 1000:6.0f}ms {median / base:6.2f}x"
        )
        if name != "baseline":
            ok = median <= GOAL_MEDIAN_S and median / base <= GOAL_RATIO
            line += f"  {met(ok)}"
        print(line)
    worst = max((n for n in runs if n != "baseline"), key=lambda n: statistics.median(walls[n]))
    slowest = statistics.median(walls[worst])
    print(f"baseline:                    {' '.join(BASELINE[1:])} (the same interpreter)")
    print(
        f"ratio command/baseline: {slowest / base:.2f}x at most ({worst}); in CPU time"
        f" {statistics.median(cpus[worst]) / base_cpu:.2f}x"
    )
    print(
        f"goal: median <= {GOAL_MEDIAN_S} s and <= {GOAL_RATIO:g}x the baseline, each command:"
        f" {met(slowest <= GOAL_MEDIAN_S and slowest / base <= GOAL_RATIO)}"
    )


if __name__ == "__main__":
    main()
