"""The crash harness over a caller's own loop: loops that break the contract of a loop are
reported, each by the name of its mistake. (The docs' example loop at every crash point, both
deaths: tests/test_docs.py.)"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from core.gate import Session, Verdict, VerdictOutcome
from core.prices import ModelConfig, Prices
from core.testkit import (
    CrashPoint,
    Death,
    IgnoredTheGrant,
    LoopMistake,
    LoopNotImportable,
    LoopRaised,
    ProposedAfterTheEnd,
    RendersDiffer,
    Scenario,
    StoppedBeforeTheEnd,
    StoppedMidStep,
    UntilDone,
    crash_and_resume,
)
from core.tools import SideEffect
from core.verdicts import StepInput
from tests.core.model_child import PRICES

decide = UntilDone().decide


async def ignores_the_grant(session: Session, verdict: Verdict | None) -> None:
    """Opens a new step when attach hands it the approved one."""
    while not session.done():
        step = session.step()
        if step is None:
            return
        if step.propose(decide(session.input())).outcome == VerdictOutcome.ALLOWED:
            await step.execute()


async def never_checks_done(session: Session, verdict: Verdict | None) -> None:
    """Goes on stepping after the run paused or ended."""
    if verdict is not None and verdict.outcome == VerdictOutcome.ALLOWED:
        await session.current().execute()  # type: ignore[union-attr]
    while True:
        step = session.step()
        if step is None:
            return
        if step.propose(decide(session.input())).outcome == VerdictOutcome.ALLOWED:
            await step.execute()


async def swallows_refusals(session: Session, verdict: Verdict | None) -> None:
    """Never checks done, and hides the refusal that follows."""
    with contextlib.suppress(Exception):  # the broken loop under test
        await never_checks_done(session, verdict)


async def stops_mid_step(session: Session, verdict: Verdict | None) -> None:
    session.step()


async def stops_before_the_end(session: Session, verdict: Verdict | None) -> None:
    return


async def raises(session: Session, verdict: Verdict | None) -> None:
    raise ValueError("the model is unreachable")


RENDERS = 0


async def models_after_the_end(session: Session, verdict: Verdict | None) -> None:
    """Keeps its step's model caller, and calls the model once the run is over, hiding the
    refusal: a call the gate never records, so only the harness can name it."""
    caller = None
    if verdict is not None and verdict.outcome == VerdictOutcome.ALLOWED:
        await session.current().execute()  # type: ignore[union-attr]
    while not session.done():
        step = session.step()
        if step is None:
            break
        caller = step.model()
        if step.propose(decide(session.input())).outcome == VerdictOutcome.ALLOWED:
            await step.execute()
    with contextlib.suppress(Exception):  # the broken loop under test
        assert caller is not None
        caller.begin("acme", "small", prompt="one more", max_output_tokens=10)


def priced() -> ModelConfig:
    return ModelConfig(Prices.from_mapping(PRICES))


def renders_with_a_counter(step: StepInput) -> str:
    """What its model sees depends on more than the record: a count kept in the process."""
    global RENDERS  # the broken render under test
    RENDERS += 1
    return f"step {step.step}, render {RENDERS}"


def _scenario(tmp_path: Path, loop: object, **more: object) -> Scenario:
    return Scenario(SideEffect.LOCAL_MUTATION, False, tmp_path / "effects.txt",
                    loop=loop, **more)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize(
    ("loop", "mistake", "allowed"),
    [
        (ignores_the_grant, IgnoredTheGrant, False),
        (never_checks_done, ProposedAfterTheEnd, True),
        (never_checks_done, ProposedAfterTheEnd, False),
        (swallows_refusals, ProposedAfterTheEnd, True),
        (stops_mid_step, StoppedMidStep, False),
        (stops_before_the_end, StoppedBeforeTheEnd, False),
        (raises, LoopRaised, False),
        (models_after_the_end, ProposedAfterTheEnd, True),
    ],
)
def test_a_broken_loop_is_reported_by_the_name_of_its_mistake(
    tmp_path: Path, loop: object, mistake: type[LoopMistake], allowed: bool
) -> None:
    scenario = _scenario(tmp_path, loop, policy_allows=allowed, model=priced)
    with pytest.raises(mistake):
        crash_and_resume(scenario, CrashPoint.TOOL_DONE, Death.IN_PROCESS, tmp_path)


def test_a_loop_that_raises_is_reported_with_its_exception(tmp_path: Path) -> None:
    with pytest.raises(LoopRaised) as raised:
        crash_and_resume(_scenario(tmp_path, raises), CrashPoint.AFTER_STEP, Death.IN_PROCESS,
                         tmp_path)  # fmt: skip
    assert isinstance(raised.value.__cause__, ValueError)


def test_a_render_that_differs_after_a_resume_is_reported(tmp_path: Path) -> None:
    """The approved step is rendered again after attach, in another session: a render that
    depends on more than the record shows it there."""
    scenario = _scenario(tmp_path, "core.testkit:until_done", render=renders_with_a_counter)
    with pytest.raises(RendersDiffer):
        crash_and_resume(scenario, CrashPoint.AFTER_STEP, Death.IN_PROCESS, tmp_path)


def test_a_render_from_the_record_alone_renders_each_step_the_same(tmp_path: Path) -> None:
    def from_the_record(step: StepInput) -> str:
        return " ".join(f"{s.tool}:{s.status}" for s in step.steps if s.index < (step.step or 0))

    scenario = _scenario(tmp_path, "core.testkit:until_done", render=from_the_record)
    result = crash_and_resume(scenario, CrashPoint.AFTER_STEP, Death.IN_PROCESS, tmp_path)
    assert result.crashed
    assert result.same_renders
    assert max(len(renders) for renders in result.inputs.values()) == 2  # rendered twice


@pytest.mark.slow
def test_a_broken_loop_in_a_child_process_is_reported_by_name(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, f"{__name__}:ignores_the_grant")
    with pytest.raises(IgnoredTheGrant):
        crash_and_resume(scenario, CrashPoint.TOOL_DONE, Death.SIGKILL, tmp_path)


def test_a_loop_a_child_cannot_import_is_refused_before_any_child_starts(tmp_path: Path) -> None:
    async def local(session: Session, verdict: Verdict | None) -> None:
        return

    with pytest.raises(LoopNotImportable):
        crash_and_resume(_scenario(tmp_path, local), CrashPoint.AFTER_STEP, Death.SIGKILL,
                         tmp_path)  # fmt: skip
    assert not (tmp_path / "signoff.db").exists()
