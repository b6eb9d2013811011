"""The reference loop: a Driver runs an Agent on the gate, the same code any other loop uses.

An ``Agent`` decides the next step from what ``Session.input()`` hands it; the Driver steps,
proposes, executes what is allowed, and stops when the run pauses on an approval, ends, or
hits a limit. ``resume`` attaches to a run (after an approval, or a crash) and goes on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Protocol

from core.decisions import Decision
from core.gate import Gate, Session, StepInput, Verdict, VerdictOutcome
from core.limits import Limits
from core.records import RunView


class Agent(Protocol):
    def decide(self, step: StepInput) -> Decision | Awaitable[Decision]: ...


class Driver:
    def __init__(self, gate: Gate, agent: Agent) -> None:
        self.gate = gate
        self.agent = agent

    async def start(self, run_id: str, goal: str, limits: Limits | None = None) -> RunView:
        return await self._drive(self.gate.begin(run_id, goal, limits), None)

    async def resume(self, run_id: str) -> RunView:
        session, verdict = self.gate.attach(run_id)
        return await self._drive(session, verdict)

    async def _drive(self, session: Session, verdict: Verdict | None) -> RunView:
        try:
            if verdict is not None:
                if verdict.outcome in (VerdictOutcome.PENDING, VerdictOutcome.ENDED):
                    return session.run()
                current = session.current()
                if verdict.outcome == VerdictOutcome.ALLOWED and current is not None:
                    await current.execute()
            while not session.done():
                step = session.step()
                if step is None:
                    break
                try:
                    decided = self.agent.decide(session.input())
                    decision = await decided if inspect.isawaitable(decided) else decided
                except Exception as e:  # the agent's failure ends the run, recorded
                    step.fail(f"{type(e).__name__}: {e}")
                    break
                verdict = step.propose(decision)
                if verdict.outcome == VerdictOutcome.ALLOWED:
                    await step.execute()
                elif verdict.outcome in (VerdictOutcome.PENDING, VerdictOutcome.ENDED):
                    break
            return session.run()
        finally:
            session.close()
