"""A run begun with its first step proposed and, when allowed, started: one transaction.

The proxy makes one run per call (core/proxy/server.py). Through ``begin``, ``step``,
``propose`` and ``execute`` an allowed call is five synced commits; through this path it is two:
this one, and the outcome's (``OpenStep.execute``, which finds the tool started and calls it).
The library's separate calls stay as they are for any other loop
(docs/decisions/0036-two-commits-per-proxied-call.md).

Rules:

1. The same rows and the same events, in the same order, as ``begin``, ``step``, ``propose`` and
   ``execute`` write: ``run.started``, ``step.started``, ``step.decided``, then the verdict's
   (``step.policy`` and, when allowed, ``step.tool_started``). Only the commits between them
   are gone; one clock reading stamps them all.
2. Validation and the policy are done before the transaction, as propose's are
   (core/proposal.py rule 1): nothing is written until both are.
3. ``check`` runs first in the transaction, with the write lock held; whatever it raises leaves
   nothing written, as ``Gate.begin``'s.
4. A limit the new run already exceeds ends it ``FAILED`` in that transaction and no step
   starts, as ``Session.step`` does; the verdict is ``ended``.
5. An allowed verdict's tool start is written in the same transaction, under the lease the
   run was just given (so live by the wall clock, as core/execution.py rule 2 requires).
   The session returned holds the step open, allowed and started.
6. A process that dies after the commit leaves a started step, which the takeover handles as
   any started step (core/takeover.py). No state between a run's start and its tool's start
   (a run with no step, a step with no decision, an allowed step not started) is ever left
   behind by this path.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Callable

from core import execution, proposal, transitions
from core.decisions import Decision
from core.errors import RunExists, RunStateError
from core.gate_parts import GateParts, RunFacts
from core.hold import Hold, StepState
from core.limits import Limits, exceeded
from core.records import read_run
from core.session import Session
from core.store import Transaction, format_time
from core.verdicts import Verdict, VerdictOutcome


def create_run(
    gate: GateParts,
    tx: Transaction,
    run_id: str,
    goal: str,
    limits: Limits,
    at: str,
    *,
    call: transitions.CallLabel | None,
    check: Callable[[sqlite3.Connection], None] | None,
) -> None:
    """Write a new run, leased to this gate, in ``tx``: ``check`` first, under the write lock
    (whatever it raises leaves nothing written), then ``RunExists`` when the name is taken.
    ``Gate.begin`` and ``begin_with`` both begin runs this way."""
    if check is not None:
        check(tx.conn)
    if read_run(tx.conn, run_id) is not None:
        raise RunExists(f"a run named {run_id} exists; begin starts new runs only")
    transitions.start_run(
        tx, run_id=run_id, goal=goal, limits=limits, owner=gate.owner,
        expires=gate._lease_expiry(), at=at, call=call,
    )  # fmt: skip


def begin_with(
    gate: GateParts,
    held: weakref.WeakValueDictionary[str, Hold],
    run_id: str,
    goal: str,
    limits: Limits,
    decision: Decision,
    *,
    call: transitions.CallLabel | None = None,
    check: Callable[[sqlite3.Connection], None] | None = None,
) -> tuple[Session, Verdict]:
    """Begin ``run_id`` with ``decision`` as its first step, in one transaction (see the rules)."""
    now = gate.config.clock()
    at = format_time(now)
    planned = proposal.plan(gate, decision, RunFacts(run_id, goal), 0)  # pure (rule 2)
    session: Session | None = None
    state = StepState(0)
    try:
        with gate.store.transaction() as tx:
            create_run(gate, tx, run_id, goal, limits, at, call=call, check=check)
            run = read_run(tx.conn, run_id)
            if run is None:
                raise RunStateError(f"run {run_id} was not written")
            session = Session(gate, run_id, held, run)
            session._active_since = now
            reason = exceeded(
                limits, step_count=0, consecutive_failures=0, recent=[],
                active_seconds=0.0, elapsed_seconds=0.0,
            )  # fmt: skip
            if reason is not None:
                transitions.end_run(tx, run_id, status="FAILED", reason=reason, at=at)
            else:
                transitions.start_step(tx, run_id, 0, at=at)
                verdict = proposal.decide(session, state, tx, decision, planned, run, now, at)
                request = state.request
                if state.allowed and request is not None:
                    execution.start(
                        session, state, tx, request, execution.request_record(request), None, at
                    )
            written = read_run(tx.conn, run_id)
    except BaseException:
        if session is not None:
            session._finish("closed")
        raise
    if session is None:
        raise RunStateError(f"no session was opened on run {run_id}")
    if written is not None:
        session._run = written
    if reason is not None:
        session._finish("ended")
        return session, Verdict(VerdictOutcome.ENDED, session._run, reason=reason)
    session._open = state
    state.proposed = True
    state.started = state.allowed
    return session, proposal.conclude(session, verdict)
