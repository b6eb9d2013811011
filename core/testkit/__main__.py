"""``python -m core.testkit``: one side of the harness's SIGKILL form, in a child process.

``crash`` begins the run and drives the loop until it kills itself at ``--crash-at``; ``resume``
attaches to the run and drives the loop to the end. The last line printed is canonical JSON: the
run's status, or the loop's mistake by name (exit 4).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from core import canonical
from core.errors import RunLeased
from core.limits import Limits
from core.store import Store
from core.testkit.harness import drive
from core.testkit.mistakes import LoopMistake
from core.testkit.scenario import Crasher, CrashPoint, Scenario, gate_for
from core.tools import SideEffect


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.testkit")
    parser.add_argument("role", choices=["crash", "resume"])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--effects", type=Path, required=True)
    parser.add_argument("--side-effect", required=True)
    parser.add_argument("--loop", default="core.testkit.scenario:until_done")
    parser.add_argument("--render", default=None)
    parser.add_argument("--model", default=None, help="module:attr of a ModelConfig factory")
    parser.add_argument("--limits", default=None, help="the run's limits, as JSON")
    parser.add_argument("--tool-name", default="effect")
    parser.add_argument("--run-id", default="run-1")
    parser.add_argument("--inputs", type=Path, default=None, help="append renders here")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--reject-interrupted", action="store_true")
    parser.add_argument("--policy-allows", action="store_true")
    parser.add_argument("--crash-at", default=None)
    parser.add_argument("--ttl", type=float, default=1.0)
    parser.add_argument("--hold", action="store_true", help="attach, say so, wait for a line")
    args = parser.parse_args(argv)
    scenario = Scenario(
        SideEffect(args.side_effect), args.idempotent, args.effects,
        approve_interrupted=not args.reject_interrupted, policy_allows=args.policy_allows,
        run_id=args.run_id, loop=args.loop, render=args.render, tool_name=args.tool_name,
        model=args.model, limits=None if args.limits is None else Limits.from_json(
            canonical.loads(args.limits)),
    )  # fmt: skip
    crasher = Crasher(CrashPoint(args.crash_at) if args.crash_at else None, _sigkill)

    def note(step: int, text: str) -> None:
        if args.inputs is not None:
            with args.inputs.open("a") as f:  # written at once: a SIGKILL loses nothing noted
                f.write(canonical.dumps_text({"step": step, "render": text}) + "\n")

    with Store.open(args.db) as store:
        gate = gate_for(store, scenario, crasher, lease_ttl=args.ttl)
        opened = None
        if args.role == "resume":
            try:
                opened = gate.attach(scenario.run_id)
            except RunLeased:
                print("leased", flush=True)
                return 3
            if args.hold:
                print("attached", flush=True)
                sys.stdin.readline()
        try:
            run = asyncio.run(drive(gate, scenario, crasher, opened, note))
        except LoopMistake as e:
            print(canonical.dumps_text({"mistake": type(e).__name__, "detail": str(e)}))
            return 4
        print(canonical.dumps_text({"status": run.status, "reason": run.end_reason}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
