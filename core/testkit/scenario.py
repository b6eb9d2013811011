"""The harness's scenario: one tool with a real side effect, a policy, the loop under test, the
crash points, and the invariants of the record after a crash and resume.

The loop under test is a ``Loop``: an async callable taking the session and the verdict that
``Gate.attach`` returned (None on a new run or when attach found nothing to hand back). It calls
the gate's public API until the session is over (a pending or ended verdict, a terminal tool, a
limit) and returns; the harness acts as the operator between its calls. For the SIGKILL form the
child process imports the loop by name, ``"module:attr"``.

A loop that calls a model through ``OpenStep.model()`` names the gate's model configuration in
``Scenario.model``: a function returning a ``ModelConfig`` (or its ``"module:attr"``), called in
each process, as the child imports it too; ``Scenario.limits`` are the run's limits. A model
call's attempt is then part of the record the harness checks (``signoff verify`` rebuilds it).
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.decisions import Decision
from core.gate import Gate, GateConfig, Session, StepInput, Verdict, VerdictOutcome
from core.limits import Limits
from core.policy.policy import ConfigPolicy, DefaultPolicy, Rule
from core.prices import ModelConfig
from core.records import read_run
from core.replay import check_state
from core.store import Store
from core.tools import SideEffect, Tool
from core.verify import verify

Loop = Callable[[Session, Verdict | None], Awaitable[None]]
"""A caller's own loop: drives the session until it is over, then returns."""


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
    """One tool with a real side effect (a line appended to ``effects``), and the loop that
    calls it until done: ``loop`` is a ``Loop`` or its ``"module:attr"`` name.

    ``render``, when given, is how the loop renders a ``StepInput`` for its model; the harness
    applies it to each input the loop asks for with a step open (``Result.inputs``)."""

    side_effect: SideEffect
    idempotent: bool
    effects: Path
    approve_interrupted: bool = True  # the operator's answer to "started, outcome unknown"
    policy_allows: bool = False  # the policy allows the tool's class (no approval first)
    run_id: str = "run-1"
    loop: str | Loop = "core.testkit.scenario:until_done"
    render: str | Callable[[StepInput], str] | None = None
    tool_name: str = "effect"
    model: str | Callable[[], ModelConfig] | None = None  # the gate's, for OpenStep.model()
    limits: Limits | None = None  # the run's, given to Gate.begin

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
        return Tool(self.tool_name, "append n to the effects file", schema, self.side_effect,
                    effect, idempotent=self.idempotent)  # fmt: skip

    def the_loop(self) -> Loop:
        return resolve(self.loop)  # type: ignore[no-any-return]

    def the_model(self) -> ModelConfig | None:
        return None if self.model is None else resolve(self.model)()

    def the_render(self) -> Callable[[StepInput], str] | None:
        return None if self.render is None else resolve(self.render)


def resolve(named: Any) -> Any:
    """``"module:attr"`` imported; anything else as it is."""
    if not isinstance(named, str):
        return named
    module, _, attr = named.partition(":")
    value: Any = importlib.import_module(module)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def name_of(value: Any) -> str:
    """The ``"module:attr"`` a child process imports ``value`` by; ``LoopNotImportable`` when
    that name does not lead back to it."""
    from core.testkit.mistakes import LoopNotImportable

    if isinstance(value, str):
        return value
    name = f"{getattr(value, '__module__', '')}:{getattr(value, '__qualname__', '')}"
    try:
        found = resolve(name)
    except (ImportError, AttributeError, ValueError) as e:
        raise LoopNotImportable(f"{value!r} cannot be imported as {name!r}: {e}") from e
    if found is not value:
        raise LoopNotImportable(f"{name!r} names something else than {value!r}")
    return name


class UntilDone:
    """The default loop. Decides from the record, as an agent does: call the tool until a call of
    it is done, then complete."""

    def __init__(self, tool: str = "effect") -> None:
        self.tool = tool

    def decide(self, step: StepInput) -> Decision:
        if any(s.tool == self.tool and s.status == "done" for s in step.steps):
            return Decision.complete('"done"')
        return Decision.tool_call(self.tool, {"n": 1}, origin="model")

    async def __call__(self, session: Session, verdict: Verdict | None) -> None:
        if verdict is not None and verdict.outcome == VerdictOutcome.ALLOWED:
            current = session.current()
            if current is None:
                raise RuntimeError("an allowed verdict without an open step")
            await current.execute()  # the approved request, exactly
        while not session.done():
            step = session.step()
            if step is None:
                return  # a limit ended the run
            verdict = step.propose(self.decide(session.input()))
            if verdict.outcome == VerdictOutcome.ALLOWED:
                await step.execute()


until_done = UntilDone()


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


def check(store: Store, scenario: Scenario) -> dict[str, Any]:
    """The record's invariants after a crash and resume; returns what it found."""
    verify(store)
    check_state(store, None)  # the events rebuild the state tables
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
        GateConfig(store=store, tools=[scenario.tool(crash)], policy=scenario.policy(),
                   model=scenario.the_model(), **config)
    )  # fmt: skip
