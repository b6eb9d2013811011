"""A session's hold on a run: its lease, its calls, its writes, and how it ends.

``core.session.Session`` is the public surface built on this hold; the modules of the steps
(``core.proposal``, ``core.execution``, ``core.waiting``) write through it.

Rules:

1. Calls on a session are serialised (``core.call_queue``): a call while another is under way
   waits for it, then runs against the state it left; a call that could only wait for itself
   is refused with ``RunStateError``. A store's connection belongs to the thread that opened
   it, so the calls that wait are in practice ``execute`` coroutines of tasks on the session's
   event loop; a plain call on that thread while such a task's call is under way is refused.
2. A session that is over refuses every call: with ``RunStateError`` once it paused or ended,
   ``LeaseLost`` once its lease is gone, ``SessionClosed`` after ``close()`` or a failed call.
   A call that fails closes the session (a refusal, ``RunStateError``, ``ApprovalExpired`` or
   ``RunLeased``, leaves it as it was); a call that finds the lease lost ends it as
   ``lease_lost``.
3. Every write is one transaction whose first statement checks that this gate holds the run's
   lease (and, before a side effect, that the lease is live by the wall clock) and renews it;
   when it does not, ``LeaseLost``, and nothing is written.
4. The gate's lease keeper renews the lease while the session holds a running run. It stops
   when the session ends, and when nobody can reach the session any more (dropped unclosed),
   so that run can be taken over once its lease expires, as after a crash.
5. A session fenced by another session of its gate taking the run over is over, as if it had
   lost the lease: a call under way finds that at its next write, and writes nothing.
6. A session is in its gate's registry of held runs from when it opens until it ends. The
   registry is handed down by the gate, not imported back up.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime

from core.call_queue import CallQueue
from core.errors import (
    ApprovalExpired,
    GateError,
    LeaseLost,
    RunLeased,
    RunStateError,
    SessionClosed,
    UnknownRun,
)
from core.gate_parts import GateParts
from core.lease import Holding
from core.records import ApprovalView, RunView, StepView, read_run, read_steps_from
from core.store import Transaction
from core.tools import CompiledTool
from core.verdicts import Request

# A step in one of these states is never written again by a session.
FINISHED_STEPS = frozenset({"done", "failed", "denied", "interrupted", "superseded"})

_OVER_ERRORS: dict[str, type[GateError]] = {
    "paused": RunStateError,
    "ended": RunStateError,
    "lease_lost": LeaseLost,
    "closed": SessionClosed,
}


@dataclass
class StepState:
    """What a session knows of its open step: the allowed request, once there is one."""

    index: int
    grant: ApprovalView | None = None
    request: Request | None = None
    tool: CompiledTool | None = None
    allowed: bool = False
    proposed: bool = False
    started: bool = False  # the tool's start is written (core/first_step.py)


class Hold:
    """One hold on a run: its lease, its serialised calls, its writes under the lease."""

    def __init__(
        self,
        gate: GateParts,
        run_id: str,
        held: weakref.WeakValueDictionary[str, Hold],
        run: RunView | None = None,
    ) -> None:
        """``run``: the run as the caller's open transaction just wrote it (core/first_step.py);
        read from the store when not given."""
        self._gate = gate
        self._store = gate.store
        self._held = held
        self.run_id = run_id
        self._over: str | None = None
        self._open: StepState | None = None
        self._calls = CallQueue(f"the session on run {run_id}")
        self._steps: dict[int, StepView] | None = None  # kept once Session.input() read them
        self._active_since = gate.config.clock()
        self._heartbeat: Holding | None = None
        self._run = self._read_run() if run is None else run
        self._hold_lease()
        held[run_id] = self

    def _read_run(self) -> RunView:
        with self._store.snapshot() as conn:
            run = read_run(conn, self.run_id)
        if run is None:
            raise UnknownRun(f"there is no run {self.run_id}")
        self._run = run
        return run

    def _finish(self, why: str) -> None:
        if self._over is None:
            self._over = why
        self._open = None
        self._stop_heartbeat()
        self._let_go()

    def _let_go(self) -> None:
        if self._held.get(self.run_id) is self:
            del self._held[self.run_id]

    def _hold_lease(self) -> None:
        """Have the gate's keeper renew the lease when this session holds it."""
        run, gate = self._run, self._gate
        if self._heartbeat is None and run.status == "RUNNING" and run.lease_owner == gate.owner:
            self._heartbeat = gate.leases.hold(self.run_id)
            # A session nobody can reach any more can never close: stop renewing its lease then,
            # so the run can be resumed once the lease expires (as after a crash).
            weakref.finalize(self, gate.leases.release, self._heartbeat)

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._gate.leases.release(self._heartbeat)
            self._heartbeat = None

    def _die(self) -> None:
        """As if the process died here: stop renewing, release nothing (crash tests)."""
        self._stop_heartbeat()
        self._over = "closed"
        self._open = None
        self._let_go()

    def _fence(self) -> None:
        """Another session of this gate takes the run over: this one is over, as if it had lost
        the lease (a call under way finds it at its next write)."""
        self._finish("lease_lost")

    def _check_open(self, state: StepState) -> None:
        if self._open is not state:
            raise RunStateError(f"step {state.index} is not the session's open step")

    @contextmanager
    def _call(self) -> Iterator[None]:
        """Serialise calls (waiting for one under way); a failed call (not a refusal) closes the
        session."""
        with self._calls.held(), self._serving():
            yield

    @asynccontextmanager
    async def _call_async(self) -> AsyncIterator[None]:
        """``_call`` for a coroutine: waiting for the call under way lets the event loop go on."""
        async with self._calls.held_async():
            with self._serving():
                yield

    @contextmanager
    def _serving(self) -> Iterator[None]:
        """One call, its turn taken: refused once over; a failure that is not a refusal closes."""
        if self._over is not None:
            raise _OVER_ERRORS[self._over](
                f"the session on run {self.run_id} is over ({self._over})"
            )
        if self._heartbeat is not None and self._heartbeat.lost.is_set():
            self._finish("lease_lost")
            raise LeaseLost(f"the lease of run {self.run_id} was lost; the session is over")
        try:
            yield
        except LeaseLost:
            self._finish("lease_lost")
            raise
        except (RunStateError, ApprovalExpired, RunLeased):
            raise
        except BaseException:
            self._finish("closed")
            raise

    @contextmanager
    def _write(self, *, starts_side_effect: bool = False) -> Iterator[Transaction]:
        """A transaction on the run this session holds the lease of (renewed as it starts)."""
        gate = self._gate
        if self._over == "lease_lost":  # fenced while a call was under way
            raise LeaseLost(f"the lease of run {self.run_id} was lost; nothing was written")
        wall = gate.config.wall_clock()
        with self._store.transaction() as tx:
            # One statement checks the owner (and, before a side effect, the expiry by the
            # wall clock) and renews the lease.
            renewed = tx.execute(
                "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?"
                " AND (? = 0 OR lease_expires_at > ?)",
                (wall + gate.config.lease_ttl, self.run_id, gate.owner,
                 int(starts_side_effect), wall),
            ).rowcount  # fmt: skip
            if renewed != 1:
                raise LeaseLost(
                    f"this session no longer holds a live lease on run {self.run_id};"
                    " nothing was written"
                )
            yield tx
            run = read_run(tx.conn, self.run_id)
            if self._steps is not None:
                self._keep_steps(tx.conn)
        if run is not None:
            self._run = run
            if run.status != "RUNNING":
                self._stop_heartbeat()

    def _keep_steps(self, conn: sqlite3.Connection) -> None:
        """Re-read, in this session's own write, the steps it can have changed: those not
        finished and any new one (so ``Session.input()`` needs no read of its own)."""
        steps = self._steps if self._steps is not None else {}
        changeable = [i for i, s in steps.items() if s.status not in FINISHED_STEPS]
        since = min([*changeable, max(steps, default=-1) + 1])
        for step in read_steps_from(conn, self.run_id, since):
            steps[step.index] = step

    def _active(self, now: datetime) -> float:
        return max(0.0, (now - self._active_since).total_seconds())
