"""Benchmark: classifying a server's 50 tools in one command, against one command per tool.

One home (under the home directory, so that a commit's fsync is real) with a server of 50
tools (tests/proxy/fake_server.py serving a listing of 50), every tool pinned. Then, measured
in the same run as whole processes from start to exit, in turns so that a noisy machine slows
each alike:

- ``python -c pass``: what starting any Python process costs here;
- ``python -c "import core.cli"``: what every ``signoff`` command pays before it starts work;
- ``signoff classify bench tool_0 CLASS``: one tool, as each tool took before (the baseline);
- ``signoff classify bench tool_0=CLASS ... tool_49=CLASS``: the 50 tools named in one command;
- ``signoff classify bench --all CLASS``: the same 50 by ``--all``.

Each classification is a real one: one configuration write, recorded in the chain with the
operator key and its place kept in the OS keyring (with no keyring, the home is set to
unauthenticated mode first, as ``signoff demo`` does). Prints the medians, what 50 commands of
one tool each would take, and the ratio of one batch to one single-tool command. Goal (issue
20): the 50 tools in one command, in under 1 s.

    python bench/classify.py [--tools N] [--repeat K]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = Path(sys.executable).with_name("signoff")
FAKE_SERVER = ROOT / "tests" / "proxy" / "fake_server.py"
NAME = "bench"
GOAL_S = 1.0
CLASSES = ("read_only", "local_mutation", "remote_mutation", "destructive")


def listing(count: int) -> str:
    return json.dumps([
        {"name": f"tool_{n}", "description": f"Tool number {n}.",
         "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        for n in range(count)
    ])  # fmt: skip


def run(home: Path, argv: list[str]) -> float:
    """Seconds from start to exit of one process; exits the bench when it fails."""
    t = time.perf_counter()
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, "SIGNOFF_HOME": str(home)},
        timeout=300,
        check=False,
    )
    elapsed = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])} ... failed: {done.stderr.strip()}")
    return elapsed


def setup(home: Path, count: int) -> None:
    from core import operator_key
    from core.errors import OperatorKeyUnavailable
    from core.store import Store

    with Store.open(home / "signoff.db") as store:
        try:
            operator_key.default().key_for_deciding(store)
        except OperatorKeyUnavailable as e:
            operator_key.choose_mode(store, unauthenticated=True, by="bench/classify.py",
                                     reason=f"no OS keyring: {e}")  # fmt: skip
    script = home / "fake.json"
    script.write_text(json.dumps({"listing": listing(count)}))
    run(home, [str(SIGNOFF), "servers", "add", NAME, "--", sys.executable, str(FAKE_SERVER),
               str(script)])  # fmt: skip
    run(home, [str(SIGNOFF), "pin", NAME, "--accept"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5, help="median of this many each")
    args = parser.parse_args()
    if args.tools < 1 or args.repeat < 1:
        parser.error("--tools and --repeat are at least 1")
    times: dict[str, list[float]] = {"pass": [], "import": [], "one": [], "named": [], "all": []}
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        home = Path(tmp)
        home.chmod(0o700)
        setup(home, args.tools)
        for i in range(args.repeat):
            # A class that differs from the one before: every run changes and records.
            side = CLASSES[i % len(CLASSES)]
            named = [f"tool_{n}={side}" for n in range(args.tools)]
            times["pass"].append(run(home, [sys.executable, "-c", "pass"]))
            times["import"].append(run(home, [sys.executable, "-c", "import core.cli"]))
            times["one"].append(run(home, [str(SIGNOFF), "classify", NAME, "tool_0", side]))
            times["named"].append(run(home, [str(SIGNOFF), "classify", NAME, *named]))
            other = CLASSES[(i + 1) % len(CLASSES)]
            times["all"].append(run(home, [str(SIGNOFF), "classify", NAME, "--all", other]))
    median = {key: statistics.median(values) for key, values in times.items()}
    n = args.tools
    print(f"python -c pass:                     {median['pass']:.3f} s (median of {args.repeat})")
    print(f"python -c 'import core.cli':        {median['import']:.3f} s (every command's start)")
    print(f"one tool, one command (baseline):   {median['one']:.3f} s")
    print(f"{n} tools named in one command:     {median['named']:.3f} s")
    print(f"{n} tools by --all in one command:  {median['all']:.3f} s")
    print(f"{n} commands of one tool each:      ~{median['one'] * n:.1f} s ({n} x the baseline)")
    print(f"ratio batch/single:                 {median['named'] / median['one']:.2f}"
          f" (one command of {n} tools against one of 1)")  # fmt: skip
    worst = max(median["named"], median["all"])
    met = "met" if worst < GOAL_S else "NOT met"
    print(f"goal {n} tools in one command < {GOAL_S:.0f} s: {met} ({worst:.3f} s)")


if __name__ == "__main__":
    main()
