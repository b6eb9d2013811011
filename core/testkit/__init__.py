"""Testing a consumer of the gate: a scripted agent, and the crash and resume harness.

The harness runs a caller's own loop on a gate (``Scenario(loop=...)``, a ``Loop``: an async
callable taking the session and the verdict ``Gate.attach`` returned), makes it die at a named
crash point, resumes the run from another gate (another process, in the SIGKILL form), and
checks the record:

- no side effect ran twice without an operator's approval in between (the tool appends to a
  real file, so a second run is visible outside the database);
- every state change has its events (the events rebuild the state tables) and the chain
  verifies;
- the run ends as the contract says: COMPLETED, or CANCELLED when the operator rejects an
  interrupted side effect.

The loop's own mistakes are reported by name (``core.testkit.mistakes``): rendering a step
differently after a resume, calling after its session is over, ignoring the approved step
attach handed it, stopping mid-step or before the end, raising. The built-in loop, ``UntilDone``
(``until_done``), is the default. Modules: ``scenario`` (the tool, the loop type, the checks),
``watch`` (the session as the loop sees it), ``harness`` (``crash_and_resume``), ``mistakes``;
``python -m core.testkit`` is one side of the SIGKILL form.
"""

from core.testkit.harness import (
    Death,
    Result,
    child_args,
    crash_and_resume,
    drive,
    wait_for_the_lease_to_expire,
)
from core.testkit.mistakes import (
    IgnoredTheGrant,
    LoopMistake,
    LoopNotImportable,
    LoopRaised,
    ProposedAfterTheEnd,
    RendersDiffer,
    StoppedBeforeTheEnd,
    StoppedMidStep,
)
from core.testkit.scenario import (
    Crash,
    Crasher,
    CrashPoint,
    Loop,
    Scenario,
    ScriptedAgent,
    UntilDone,
    check,
    gate_for,
    until_done,
)

__all__ = [
    "Crash",
    "CrashPoint",
    "Crasher",
    "Death",
    "IgnoredTheGrant",
    "Loop",
    "LoopMistake",
    "LoopNotImportable",
    "LoopRaised",
    "ProposedAfterTheEnd",
    "RendersDiffer",
    "Result",
    "Scenario",
    "ScriptedAgent",
    "StoppedBeforeTheEnd",
    "StoppedMidStep",
    "UntilDone",
    "check",
    "child_args",
    "crash_and_resume",
    "drive",
    "gate_for",
    "until_done",
    "wait_for_the_lease_to_expire",
]
