"""The loop's own mistakes, each reported by name.

The harness raises one of these when the loop under test, not the gate, broke the contract of a
loop (seed 002, "testkit.Scenario.Loop"). They are ``AssertionError``s, so a test fails on them;
they are raised after the loop returns or dies even when the loop catches and swallows the
gate's refusal, since the harness notes the mistake as it happens.
"""

from __future__ import annotations


class LoopMistake(AssertionError):
    """The loop under test broke the contract of a loop."""


class RendersDiffer(LoopMistake):
    """The loop rendered the same step's input differently in two sessions (before and after a
    resume): what its model sees depends on more than the record (``Result.same_renders``)."""


class ProposedAfterTheEnd(LoopMistake):
    """The loop went on calling (a step, a proposal, an execute, a model) after its session was
    over: the run paused or reached a terminal step."""


class IgnoredTheGrant(LoopMistake):
    """``Gate.attach`` handed the loop an approved step to execute, and it proposed something
    else, opened a new step, or returned without executing it."""


class StoppedMidStep(LoopMistake):
    """The loop returned with a step open (started or allowed, not finished)."""


class StoppedBeforeTheEnd(LoopMistake):
    """The loop returned with its session still live: the run neither paused nor ended."""


class LoopRaised(LoopMistake):
    """The loop raised (its exception is the cause)."""


class LoopNotImportable(LoopMistake):
    """The SIGKILL form runs the loop in a child process, which imports it by ``"module:attr"``;
    this loop has no such name."""


MISTAKES: dict[str, type[LoopMistake]] = {
    cls.__name__: cls
    for cls in (
        RendersDiffer,
        ProposedAfterTheEnd,
        IgnoredTheGrant,
        StoppedMidStep,
        StoppedBeforeTheEnd,
        LoopRaised,
        LoopNotImportable,
    )
}
