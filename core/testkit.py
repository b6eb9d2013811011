"""Testing a consumer of the gate: a scripted agent, and the crash and resume harness.

The harness runs a caller's own loop on a gate, makes it die at a named crash point, resumes
the run from another gate (another process, in the SIGKILL form), and checks the record:

- no side effect ran twice without an operator's approval in between (the tool appends to a
  real file, so a second run is visible outside the database);
- every state change has its events (the events rebuild the state tables) and the chain
  verifies;
- the run ends as the contract says: COMPLETED, or CANCELLED when the operator rejects an
  interrupted side effect.

Two kinds of death: in-process (the session is abandoned, its heartbeat stops, and the resumer's
wall clock is moved past the lease) and a real ``SIGKILL`` of a child process
(``python -m core.testkit``), resumed by a second child once the lease has expired.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import canonical
from core.approvals import approve, reject
from core.decisions import Decision
from core.errors import RunLeased
from core.gate import Gate, GateConfig, Session, StepInput, Verdict, VerdictOutcome
from core.policy import ConfigPolicy, DefaultPolicy, Rule
from core.records import RunView, read_run
from core.store import Store
from core.tools import SideEffect, Tool
from core.verify import verify


class ScriptedAgent:
    """Decides ``plan[step]``; past the end of the plan it fails the run, saying so."""

    def __init__(self, plan: Sequence[Decision]) -> None:
        self.plan = list(plan)
        self.seen: list[StepInput] = []

    def decide(self, step: StepInput) -> Decision:
        self.seen.append(step)
        index = step.step if step.step is not None else len(step.steps)
        if index < len(self.plan):
            return self.plan[index]
        return Decision.fail(f"the script has no decision for step {index}")


class CrashPoint(enum.StrEnum):
    AFTER_STEP = "after_step"  # a step started, no decision yet
    AFTER_ALLOWED = "after_allowed"  # an allowed verdict, not executed
    TOOL_STARTED = "tool_started"  # the tool's start is written; it dies before its effect
    TOOL_DONE = "tool_done"  # the effect happened; its outcome is not written
    AFTER_ATTACH_ALLOWED = "after_attach_allowed"  # an approved grant allowed, not executed


class Crash(BaseException):
    """The simulated death of the process (a BaseException, so no handler swallows it)."""


@dataclass(frozen=True)
class Scenario:
    """One tool with a real side effect (a line appended to ``effects``), called until done."""

    side_effect: SideEffect
    idempotent: bool
    effects: Path
    approve_interrupted: bool = True  # the operator's answer to "started, outcome unknown"
    policy_allows: bool = False  # the policy allows the tool's class (no approval first)
    run_id: str = "run-1"

    def policy(self) -> ConfigPolicy:
        return (
            ConfigPolicy({self.side_effect: Rule.ALLOW}) if self.policy_allows else DefaultPolicy()
        )

    def tool(self, crash: Callable[[CrashPoint], None]) -> Tool:
        def effect(args: dict[str, Any]) -> str:
            crash(CrashPoint.TOOL_STARTED)
            with self.effects.open("a") as f:
                f.write(f"{args['n']}\n")
                f.flush()
                os.fsync(f.fileno())
            crash(CrashPoint.TOOL_DONE)
            return f"wrote {args['n']}"

        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        return Tool("effect", "append n to the effects file", schema, self.side_effect, effect,
                    idempotent=self.idempotent)  # fmt: skip


class UntilDone:
    """Decides from the record, as an agent does: call the tool until a call of it is done."""

    def decide(self, step: StepInput) -> Decision:
        if any(s.tool == "effect" and s.status == "done" for s in step.steps):
            return Decision.complete('"done"')
        return Decision.tool_call("effect", {"n": 1}, origin="model")


@dataclass
class Outcome:
    run: RunView
    crashed: bool  # whether the crash point was reached


class Crasher:
    """Dies (by ``how``) the first time the chosen point is reached; otherwise does nothing."""

    def __init__(self, at: CrashPoint | None, how: Callable[[], None]) -> None:
        self.at = at
        self.how = how
        self.reached = False

    def due(self, point: CrashPoint) -> bool:
        return point == self.at and not self.reached

    def __call__(self, point: CrashPoint) -> None:
        if self.due(point):
            self.reached = True
            self.how()


async def drive(
    gate: Gate,
    scenario: Scenario,
    crash: Crasher,
    opened: tuple[Session, Verdict | None] | None = None,
) -> RunView:
    """A caller's own loop on the gate, acting as the operator too when a run pauses.

    Begins the run, or goes on from ``opened`` (what ``attach`` returned).
    """
    store, run_id, agent = gate.store, scenario.run_id, UntilDone()
    if opened is None:
        session, verdict = gate.begin(run_id, "write the effect once"), None
    else:
        session, verdict = opened

    def point(at: CrashPoint) -> None:
        if crash.due(at):
            session._die()  # as the process would: no more renewals, nothing released
            crash(at)

    while True:
        if verdict is not None and verdict.outcome == VerdictOutcome.PENDING:
            approval = verdict.approval
            if approval is None:
                raise RuntimeError("a pending verdict without an approval")
            if approval.kind == "interrupted_side_effect" and not scenario.approve_interrupted:
                reject(store, run_id, approval.id, "operator", "checked: do not repeat")
                break  # a rejection ends the run
            approve(store, run_id, approval.id, "operator", "ok")
            session, verdict = gate.attach(run_id)
            continue
        if verdict is not None and verdict.outcome == VerdictOutcome.ALLOWED:
            point(CrashPoint.AFTER_ATTACH_ALLOWED)
            current = session.current()
            if current is None:
                raise RuntimeError("an allowed verdict without an open step")
            await current.execute()
            verdict = None
            continue
        if session.done():
            break
        step = session.step()
        if step is None:
            break
        point(CrashPoint.AFTER_STEP)
        verdict = step.propose(agent.decide(session.input()))
        if verdict.outcome == VerdictOutcome.ALLOWED:
            point(CrashPoint.AFTER_ALLOWED)
            await step.execute()
            verdict = None
        elif verdict.outcome == VerdictOutcome.ENDED:
            break
    session.close()
    with store.snapshot() as conn:
        run = read_run(conn, run_id)
    if run is None:
        raise RuntimeError("the run vanished")
    return run


def _raise_crash() -> None:
    raise Crash


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def check(store: Store, scenario: Scenario) -> dict[str, Any]:
    """The record's invariants after a crash and resume; returns what it found."""
    verify(store)
    lines = scenario.effects.read_text().split() if scenario.effects.exists() else []
    with store.snapshot() as conn:
        run = read_run(conn, scenario.run_id)
        interrupted_approved = conn.execute(
            "SELECT count(*) FROM approvals WHERE kind = 'interrupted_side_effect'"
            " AND status = 'consumed'"
        ).fetchone()[0]
        interrupted_rejected = conn.execute(
            "SELECT count(*) FROM approvals WHERE kind = 'interrupted_side_effect'"
            " AND status = 'rejected'"
        ).fetchone()[0]
        tool_starts = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()[0]
    if run is None:
        raise AssertionError("the run is missing")
    repeatable = scenario.side_effect is SideEffect.READ_ONLY or scenario.idempotent
    if not repeatable and len(lines) > 1 + interrupted_approved:
        raise AssertionError(
            f"the side effect ran {len(lines)} times with {interrupted_approved} operator"
            " approvals of a repeat"
        )
    if len(lines) > tool_starts:
        raise AssertionError(f"{len(lines)} effects but {tool_starts} recorded tool starts")
    expected = "CANCELLED" if interrupted_rejected else "COMPLETED"
    if run.status != expected:
        raise AssertionError(f"the run ended {run.status} ({run.end_reason}), not {expected}")
    if run.status == "COMPLETED" and not lines:
        raise AssertionError("the run completed but the effect never happened")
    return {
        "status": run.status,
        "effects": len(lines),
        "interrupted_approved": interrupted_approved,
        "interrupted_rejected": interrupted_rejected,
    }


def gate_for(store: Store, scenario: Scenario, crash: Callable[[CrashPoint], None],
             **config: Any) -> Gate:  # fmt: skip
    return Gate(
        GateConfig(store=store, tools=[scenario.tool(crash)], policy=scenario.policy(), **config)
    )


# --- the SIGKILL form: a child process per side ----------------------------------------------


def _child(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.testkit")
    parser.add_argument("role", choices=["crash", "resume"])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--effects", type=Path, required=True)
    parser.add_argument("--side-effect", required=True)
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
    )  # fmt: skip
    crasher = Crasher(CrashPoint(args.crash_at) if args.crash_at else None, _sigkill)
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
        run = asyncio.run(drive(gate, scenario, crasher, opened))
        print(canonical.dumps_text({"status": run.status, "reason": run.end_reason}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
