"""The session as the loop under test sees it: the gate's session, watched by the harness.

The harness hands the loop a ``WatchedSession`` in place of the ``Session``: the same calls,
passed through, with the harness's crash points between them (after a step starts, after an
allowed verdict) and the loop's mistakes noted as it makes them (``core.testkit.mistakes``).
What the loop rendered at each step is noted too, when the scenario says how it renders.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from core.decisions import Decision
from core.gate import OpenStep, Session, StepInput, Verdict, VerdictOutcome
from core.model_calls import ModelAttempt, ModelCaller
from core.records import RunView
from core.testkit.mistakes import IgnoredTheGrant, LoopMistake, ProposedAfterTheEnd
from core.testkit.scenario import Crasher, CrashPoint
from core.verdicts import Observation

Note = Callable[[int, str], None]
"""Where a render goes: ``note(step index, rendered text)``."""


class Watch:
    """What the harness sees of one call of the loop."""

    def __init__(
        self,
        session: Session,
        verdict: Verdict | None,
        crash: Crasher,
        render: Callable[[StepInput], str] | None,
        note: Note,
    ) -> None:
        self.session = session
        self.crash = crash
        self.render = render
        self.note = note
        self.mistake: LoopMistake | None = None
        # The approved step attach handed over, until the loop executes it.
        current = session.current()
        allowed = verdict is not None and verdict.outcome == VerdictOutcome.ALLOWED
        self.grant: int | None = current.index if allowed and current is not None else None

    def point(self, at: CrashPoint) -> None:
        if self.crash.due(at):
            self.session._die()  # as the process would: no more renewals, nothing released
            self.crash(at)

    def fault(self, mistake: LoopMistake) -> NoReturn:
        """Note the loop's mistake (the first one stands) and refuse the call."""
        if self.mistake is None:
            self.mistake = mistake
        raise mistake

    def live(self, what: str) -> None:
        if self.session.done():
            run = self.session.run()
            self.fault(ProposedAfterTheEnd(
                f"the loop called {what} after its session was over (run {run.status})"
            ))  # fmt: skip

    def rendered(self, step_input: StepInput) -> None:
        if self.render is not None and step_input.step is not None:
            self.note(step_input.step, self.render(step_input))


class WatchedSession:
    """A ``Session`` as the harness hands it to the loop (duck-typed: the same calls)."""

    def __init__(self, watch: Watch) -> None:
        self._watch = watch
        self.run_id = watch.session.run_id

    def step(self) -> WatchedStep | None:
        w = self._watch
        w.live("step()")
        if w.grant is not None:
            w.fault(IgnoredTheGrant(
                f"the loop opened a new step instead of executing approved step {w.grant}"
            ))  # fmt: skip
        step = w.session.step()
        if step is None:
            return None
        w.point(CrashPoint.AFTER_STEP)
        return WatchedStep(w, step)

    def current(self) -> WatchedStep | None:
        step = self._watch.session.current()
        return None if step is None else WatchedStep(self._watch, step)

    def input(self) -> StepInput:
        step_input = self._watch.session.input()
        self._watch.rendered(step_input)
        return step_input

    def done(self) -> bool:
        return self._watch.session.done()

    def run(self) -> RunView:
        return self._watch.session.run()

    def close(self) -> None:
        self._watch.session.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._watch.session, name)


class WatchedStep:
    """An ``OpenStep`` as the loop sees it."""

    def __init__(self, watch: Watch, step: OpenStep) -> None:
        self._watch = watch
        self._step = step
        self.index = step.index

    def _not_the_grant(self, what: str) -> None:
        if self._watch.grant == self.index:
            self._watch.fault(IgnoredTheGrant(
                f"the loop called {what} on approved step {self.index} instead of executing it"
            ))  # fmt: skip

    def propose(self, decision: Decision) -> Verdict:
        w = self._watch
        w.live("propose()")
        self._not_the_grant("propose()")
        verdict = self._step.propose(decision)
        if verdict.outcome == VerdictOutcome.ALLOWED:
            w.point(CrashPoint.AFTER_ALLOWED)
        return verdict

    async def execute(self, **kwargs: Any) -> Observation:
        w = self._watch
        w.live("execute()")
        if w.grant == self.index:
            w.grant = None
        return await self._step.execute(**kwargs)

    def model(self) -> WatchedCaller | None:
        """The step's accounting model caller, its calls the gate's, watched as the step is."""
        self._watch.live("model()")
        caller = self._step.model()
        return None if caller is None else WatchedCaller(self._watch, caller)

    def fail(self, error: str) -> None:
        self._watch.live("fail()")
        self._not_the_grant("fail()")
        self._step.fail(error)


class WatchedCaller:
    """A step's ``ModelCaller`` as the loop sees it: a call begun once the session is over is
    the loop's mistake too (the gate refuses it; a loop that swallows the refusal is named)."""

    def __init__(self, watch: Watch, caller: ModelCaller) -> None:
        self._watch = watch
        self._caller = caller
        self.step = caller.step

    def begin(
        self, provider: str, model: str, *, prompt: str, max_output_tokens: int
    ) -> ModelAttempt:
        self._watch.live("model().begin()")
        return self._caller.begin(provider, model, prompt=prompt,
                                  max_output_tokens=max_output_tokens)  # fmt: skip
