"""A session on a run and the step it has open: the surface a loop calls.

Rules:

1. A session has at most one open step. ``step()`` checks the run's limits first
   (``core.limits``): a limit reached ends the run ``FAILED`` with that limit as its reason,
   and no step starts.
2. An open step is proposed once (``core.proposal``), then executed if its verdict allowed it
   (``core.execution``), or failed. A second proposal, an execute with no allowed verdict, or
   any call on a step that is not the session's open one raises ``RunStateError`` and changes
   nothing.
3. ``fail()`` ends a step whose decision could not be made, before any proposal: the run fails
   as ``agent_error``.
4. ``close()`` releases the lease, so another process need not wait for it to expire, and ends
   the session; a session is a context manager that closes. How a session refuses calls once
   it is over is ``core.hold``'s.
5. A session refers to its open step's state, never to the ``OpenStep`` handed out: nothing
   cycles back, so a session its caller drops unclosed is freed at once.
6. ``OpenStep.model()`` is the step's accounting model caller (``core.model_calls``), None
   without ``GateConfig.model``; what the run's model calls spent is judged at each step's
   start too.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from datetime import datetime

from core import execution, model_record, proposal, transitions
from core.canonical import JSONValue
from core.decisions import Decision
from core.errors import RunStateError
from core.gate_parts import GateParts
from core.hold import Hold, StepState
from core.limits import Finished, exceeded
from core.model_calls import ModelCaller
from core.records import RunView, read_steps
from core.store import Transaction, format_time
from core.tools import CompiledTool
from core.verdicts import Observation, Request, StepInput, Verdict


class Session(Hold):
    """One hold on a run. At most one open step; calls are serialised.

    A session refers to its open step's state, never to the ``OpenStep`` handed out (which
    refers to the session): nothing cycles back, so a session its caller drops unclosed is
    freed at once and stops renewing its lease, without waiting for a garbage collection."""

    def __init__(
        self,
        gate: GateParts,
        run_id: str,
        held: weakref.WeakValueDictionary[str, Hold],
        run: RunView | None = None,
    ) -> None:
        self._handle: weakref.ref[OpenStep] | None = None
        super().__init__(gate, run_id, held, run)

    def step(self) -> OpenStep | None:
        """Check the limits and start a step; None when a limit ended the run."""
        with self._call():
            if self._open is not None:
                raise RunStateError(f"step {self._open.index} is still open")
            now = self._gate.config.clock()
            at = format_time(now)
            run = self._run  # current: only the lease holder writes a running run
            with self._write() as tx:
                recent = tx.execute(
                    "SELECT request_hash, observation FROM steps WHERE run_id = ?"
                    " ORDER BY idx DESC LIMIT ?",
                    (self.run_id, max(run.limits.loop_repeats or 0, 0)),
                ).fetchall()
                reason = exceeded(
                    run.limits,
                    step_count=run.step_count,
                    consecutive_failures=run.consecutive_failures,
                    recent=[Finished(h, o) for h, o in reversed(recent)],
                    active_seconds=run.active_seconds,
                    elapsed_seconds=(now - datetime.fromisoformat(run.created_at)).total_seconds(),
                    spent=model_record.spent(tx.conn, self.run_id)
                    if run.limits.max_tokens is not None or run.limits.max_cost is not None
                    else None,
                )
                if reason is not None:
                    transitions.end_run(tx, self.run_id, status="FAILED", reason=reason, at=at)
                else:
                    transitions.start_step(tx, self.run_id, run.step_count, at=at)
            if reason is not None:
                self._finish("ended")
                return None
            self._active_since = now
            self._open = StepState(run.step_count)
            return self._step_handle()

    def current(self) -> OpenStep | None:
        return None if self._open is None else self._step_handle()

    def done(self) -> bool:
        return self._over is not None

    def run(self) -> RunView:
        """The run as this session last read or wrote it."""
        return self._run

    def input(self) -> StepInput:
        """What an agent deciding now is handed: with a step open, what ``Decide`` receives at
        it; with none, the run as this session last wrote it and every recorded step. Values,
        not views: read from the store at the first call only, then kept as this session
        writes (``core.hold``); no clock is read."""
        with self._call():
            if self._steps is None:
                with self._store.snapshot() as conn:
                    self._steps = {s.index: s for s in read_steps(conn, self.run_id)}
            steps = tuple(self._steps[i] for i in sorted(self._steps))
            return StepInput(
                run=self._run, steps=steps, step=None if self._open is None else self._open.index
            )

    def close(self) -> None:
        """Release the lease (so another process need not wait for it) and end the session."""
        if self._over is None:
            with self._store.transaction(purpose="lease") as tx:
                tx.execute(
                    "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL"
                    " WHERE id = ? AND lease_owner = ?",
                    (self.run_id, self._gate.owner),
                )
        self._finish("closed")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _step_handle(self) -> OpenStep:
        """The open step's handle: the one handed out while it is kept, else a new one."""
        state = self._open
        if state is None:
            raise RunStateError("no step is open")
        handle = None if self._handle is None else self._handle()
        if handle is None or handle._state is not state:
            handle = OpenStep(self, state)
            self._handle = weakref.ref(handle)
        return handle


class OpenStep:
    """The step a session has open: propose once, then execute (if allowed) or fail."""

    def __init__(self, session: Session, state: StepState) -> None:
        self._session = session
        self._state = state
        self.index = state.index

    @property
    def _request(self) -> Request | None:
        return self._state.request

    @property
    def _tool(self) -> CompiledTool | None:
        return self._state.tool

    def propose(self, decision: Decision) -> Verdict:
        return proposal.propose(self._session, self._state, decision)

    async def execute(
        self, *, also: Callable[[Transaction, Observation], None] | None = None
    ) -> Observation:
        """Run exactly the allowed request. ``also`` writes more in the outcome's transaction
        (the proxy records there that the result is handed back)."""
        return await execution.execute(self._session, self._state, also)

    def model(self) -> ModelCaller | None:
        """The step's accounting model caller; None when the gate has no model configuration."""
        config = self._session._gate.config.model
        return None if config is None else ModelCaller(self._session, self.index, config)

    def fail(self, error: str) -> None:
        """End a step whose decision could not be made: the run fails as ``agent_error``."""
        s = self._session
        with s._call():
            s._check_open(self._state)
            if self._state.proposed:
                raise RunStateError(f"step {self.index} already has a decision")
            now = s._gate.config.clock()
            at = format_time(now)
            with s._write() as tx:
                transitions.finish_step(
                    tx, s.run_id, self.index, status="failed", active_seconds=s._active(now),
                    observation={"error": "agent_error", "detail": error}, at=at,
                )  # fmt: skip
                transitions.end_run(tx, s.run_id, status="FAILED", reason="agent_error", at=at)
            s._finish("ended")

    def _start(
        self,
        tx: Transaction,
        request: Request,
        request_json: dict[str, JSONValue],
        approval_id: str | None,
        at: str,
    ) -> None:
        """Write the tool's start as ``execute`` does (the crash tests stop right after it)."""
        execution.start(self._session, self._state, tx, request, request_json, approval_id, at)
