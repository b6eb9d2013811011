"""Helpers for testing a consumer of the gate: a scripted agent that decides by step index."""

from __future__ import annotations

from collections.abc import Sequence

from core.decisions import Decision
from core.gate import StepInput


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
