"""The gate: any loop proposes an action; the gate decides whether it runs, runs it, records it.

The sequence, one implementation for every caller (the reference Driver runs on it too):

1. ``Session.step()`` checks the limits and starts a step (or ends the run on a limit).
2. ``OpenStep.propose(decision)`` records the decision verbatim, validates it (origin, tool,
   lossless arguments, schema), asks the policy about the canonical request, and answers a
   ``Verdict``: allowed, denied (an observation; the session goes on), pending (the run waits
   on a hash-bound approval; the session is over) or ended (the run is terminal). A policy that
   raises, or answers something that is not a decision, ends the run as ``policy_error``: the
   decision and the failure (by its type's name) are recorded, and nothing runs.
3. ``OpenStep.execute()`` runs exactly what an allowed verdict let through: it writes the
   tool's start (under the run's lease, checked by the wall clock), calls the tool, and writes
   the outcome, each with its events in one transaction.
4. ``Gate.attach(run_id)`` opens a session on an existing run. For a run waiting on an approval
   it returns the verdict for the recorded request, with the policy evaluated again on the same
   canonical request: a changed policy re-pauses (another kind), denies or aborts. A grant whose
   TTL ran out cancels the run as ``approval_expired`` (judged at attach and again at execute).
   A run leased live by another session raises ``RunLeased`` (``RunStateError`` when that
   session is this gate's own); an expired lease is taken over, whoever left it: a session
   dropped unclosed stops renewing as it is freed, and one whose lease lapsed unrenewed is
   fenced (it writes as this gate's owner too, so nothing else would stop it).
   Attaching a grant claims it (the run's lease, the run still waiting) until it executes, so
   a second session attaching the same grant meanwhile is refused and writes nothing.

``Gate.begin_with`` does steps 1 to 3's writes up to the tool's start for a new run's first
step in one transaction (``core.first_step``), for the proxy's one run per call.

Misuse (a second open step, execute without an allowed verdict, any call on a session that is
over) raises ``RunStateError`` and changes nothing. A session whose lease is gone refuses every
call with ``LeaseLost``; after ``close()`` or a failed call, with ``SessionClosed``.

Where each part lives, each module with its rules: ``core.gate_parts`` (what a gate is made of:
its tools, owner name, lease keeper, and how it asks the policy), ``core.hold`` (a session's
lease, calls and writes), ``core.session`` (``Session`` and ``OpenStep``), ``core.proposal``
(step 2), ``core.execution`` (step 3), ``core.waiting`` (pausing on an approval; attaching a
run that waits on one, step 4), ``core.takeover`` (taking over an expired lease, step 4) and
``core.verdicts`` (the vocabulary). This module opens the sessions.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Callable

from core import first_step, takeover, transitions, waiting
from core.decisions import Decision
from core.errors import RunStateError, UnknownRun
from core.gate_parts import GateParts
from core.hold import Hold
from core.lease import is_live
from core.limits import Limits
from core.records import RunView, read_run
from core.session import OpenStep, Session
from core.verdicts import (  # the gate's vocabulary, re-exported from here
    INTERRUPTED_REASON,
    OPERATOR_KINDS,
    GateConfig,
    Observation,
    Reconciled,
    Request,
    StepInput,
    Verdict,
    VerdictOutcome,
)

__all__ = [
    "INTERRUPTED_REASON",
    "OPERATOR_KINDS",
    "Gate",
    "GateConfig",
    "Observation",
    "OpenStep",
    "Reconciled",
    "Request",
    "Session",
    "StepInput",
    "Verdict",
    "VerdictOutcome",
]


class Gate(GateParts):
    """Holds the tools, the policy and the store; opens sessions on runs."""

    def __init__(self, config: GateConfig) -> None:
        super().__init__(config)
        # The session of this gate holding each run, if it is still reachable: one that was
        # dropped unclosed is not, and its run is then judged by the lease alone.
        self._held: weakref.WeakValueDictionary[str, Hold] = weakref.WeakValueDictionary()

    # --- opening sessions ---------------------------------------------------------------

    def begin(
        self,
        run_id: str,
        goal: str,
        limits: Limits | None = None,
        *,
        call: transitions.CallLabel | None = None,
        check: Callable[[sqlite3.Connection], None] | None = None,
    ) -> Session:
        """Create a run with the caller's id and open a session on it.

        ``check`` is called first in the transaction that creates the run, with the write lock
        held: whatever it raises leaves nothing written (the proxy makes sure there that no
        other process began a run for the same call since it looked)."""
        limits = limits or Limits()
        at = self._now_text()
        with self.store.transaction() as tx:
            first_step.create_run(self, tx, run_id, goal, limits, at, call=call, check=check)
        return self._open_session(run_id)

    def begin_with(
        self,
        run_id: str,
        goal: str,
        limits: Limits,
        decision: Decision,
        *,
        call: transitions.CallLabel | None = None,
        check: Callable[[sqlite3.Connection], None] | None = None,
    ) -> tuple[Session, Verdict]:
        """Create a run whose first step is ``decision``, proposed and, when allowed, started,
        in one transaction (``core.first_step``): the session's open step then only needs
        ``execute``, which calls the tool and writes its outcome. The proxy's path: two synced
        commits per allowed call instead of five. An allowed verdict's tool is recorded as
        started: the caller must ``execute`` it; a session closed instead leaves a started step,
        which a takeover sends to the operator as interrupted (it is never run on its own)."""
        return first_step.begin_with(
            self, self._held, run_id, goal, limits, decision, call=call, check=check
        )

    def attach(self, run_id: str) -> tuple[Session, Verdict | None]:
        """Open a session on an existing run; for a run waiting on an approval, the verdict."""
        with self.store.snapshot() as conn:
            run = read_run(conn, run_id)
        if run is None:
            raise UnknownRun(f"there is no run {run_id}")
        holder = self._held.get(run_id)
        if holder is not None:
            if run.lease_owner == self.owner and is_live(
                run.lease_owner, run.lease_expires_at, self.config.wall_clock()
            ):
                raise RunStateError(f"a session of this gate already holds run {run_id}")
            # Its lease lapsed unrenewed (a stalled loop): the run is judged by the lease alone,
            # as a dead process's is. That session writes as this gate's owner, so only this
            # mark keeps it from writing after the takeover.
            holder._fence()
        if run.terminal:
            raise RunStateError(f"run {run_id} is over ({run.status}, {run.end_reason})")
        if run.status == "RUNNING":
            ended = self._take_over(run)
            session = self._open_session(run_id)
            if ended is not None:
                session._finish("paused" if ended.outcome == VerdictOutcome.PENDING else "ended")
            return session, ended
        session = self._open_session(run_id)
        try:
            return session, waiting.attach(session)
        except BaseException:
            session._finish("closed")
            raise

    def _open_session(self, run_id: str) -> Session:
        return Session(self, run_id, self._held)  # it enters the registry, and leaves it

    def _take_over(self, run: RunView) -> Verdict | None:
        return takeover.take_over(self, run)
