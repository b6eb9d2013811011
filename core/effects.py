"""Whether a call may have taken effect: one rule, in one place (seed 000, decisions 6 and 8;
docs/decisions/0020-may-have-taken-effect.md). Pure code.

Rules:

1. A tool is *repeatable* when the spec recorded for the step says it is ``read_only`` or
   ``idempotent``; a spec that cannot be read is not. Running a repeatable tool again is
   harmless, so an interruption of one is settled without the operator. This is the rule the
   takeover (core/takeover.py) and the sweeper (core/sweep.py) both apply.
2. A call *may have taken effect* once its tool was started: a completed run, and every run
   whose outcome is unknown (the server died, its answer was over the size limit, unreadable or
   not an answer, the call timed out or was cancelled with no result, the process was killed,
   the outcome could not be written), whatever the operator later decided about it and whether
   it expired. Only a run that Signoff knows never reached the server did not: refused by the
   policy or the operator before it started, or a request that could not be written to a
   server that was not running.
3. An unknown outcome that the operator rejects, or that nobody decides in time, ends its run
   ``CANCELLED`` with the end reason ``NOT_REPEATED``: the call may have run, and the operator
   chose not to run it again (or was not there to). Its step keeps the unknown outcome in its
   observation (``UNKNOWN``), with who ruled and why.
4. The duplicate rule covers every run that may have taken effect (``MAY_HAVE_RUN_SQL``): the
   next identical mutating call waits for the operator as a ``duplicate``, within the window
   counted from the later of the run's last moment and the operator's ruling on it, which is
   the run's ``updated_at`` in both cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_REPEATED = "not_repeated"  # a run's end reason (rule 3)
UNKNOWN = "outcome_unknown"  # a step's observation error (rule 3)
# Rule 4, over the columns of ``runs``: written once here, used where runs are looked up.
MAY_HAVE_RUN_SQL = f"(status = 'COMPLETED' OR end_reason = '{NOT_REPEATED}')"


def repeatable(spec: object) -> bool:
    """Rule 1: whether running the tool of this recorded spec again is harmless."""
    if not isinstance(spec, Mapping):
        return False
    return spec.get("side_effect") == "read_only" or bool(spec.get("idempotent"))


def not_repeated_observation(by: str, reason: str) -> dict[str, Any]:
    """The observation of a step whose unknown outcome was ruled not to be repeated (rule 3)."""
    return {"error": UNKNOWN, "may_have_run": True, "not_repeated_by": by, "reason": reason}


def not_repeated_text(tool: str, why: str) -> str:
    """What the model is told of a call ended by rule 3: never that it did not run."""
    return (
        f"This call ({tool}) was cut off and may have taken effect; its outcome is unknown. The"
        f" operator chose not to run it again ({why}). Do not assume it did or did not happen:"
        " check its effect before making it again; an identical call now waits for the"
        " operator as a duplicate."
    )
