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

Misuse (a second open step, execute without an allowed verdict, any call on a session that is
over) raises ``RunStateError`` and changes nothing. A session whose lease is gone refuses every
call with ``LeaseLost``; after ``close()`` or a failed call, with ``SessionClosed``.
"""

from __future__ import annotations

import inspect
import secrets
import sqlite3
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import approvals, canonical, takeover, transitions
from core.canonical import JSONValue
from core.decisions import Decision, Kind
from core.errors import (
    ApprovalExpired,
    GateError,
    JSONRefused,
    LeaseLost,
    OutcomeUnknown,
    PolicyFailed,
    RunExists,
    RunLeased,
    RunStateError,
    SchemaRefused,
    SessionClosed,
    UnknownRun,
)
from core.lease import Holding, LeaseKeeper, is_live
from core.limits import Finished, Limits, exceeded
from core.policy import Outcome, PolicyDecision, PolicyRequest, identity_of
from core.records import (
    ApprovalView,
    RunView,
    StepView,
    latest_approval,
    read_run,
    read_step,
    read_steps,
)
from core.store import Transaction, format_time
from core.tools import CompiledTool, SideEffect
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


class Gate:
    """Holds the tools, the policy and the store; opens sessions on runs."""

    def __init__(self, config: GateConfig) -> None:
        self.config = config
        self.store = config.store
        self.owner = f"{config.owner}-{secrets.token_hex(4)}"
        self.tools: dict[str, CompiledTool] = {}
        for tool in config.tools:
            if tool.name in self.tools:
                raise SchemaRefused(f"two tools are named {tool.name}")
            self.tools[tool.name] = CompiledTool(tool)
        # The session of this gate holding each run, if it is still reachable: one that was
        # dropped unclosed is not, and its run is then judged by the lease alone.
        self._held: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self.leases = LeaseKeeper(
            self.store.path, self.owner, ttl=config.lease_ttl, wall_clock=config.wall_clock,
            busy_timeout=self.store.busy_timeout,
        )  # fmt: skip

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
            if check is not None:
                check(tx.conn)
            if read_run(tx.conn, run_id) is not None:
                raise RunExists(f"a run named {run_id} exists; begin starts new runs only")
            transitions.start_run(
                tx, run_id=run_id, goal=goal, limits=limits, owner=self.owner,
                expires=self._lease_expiry(), at=at, call=call,
            )  # fmt: skip
        return self._open_session(run_id)

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
            return session, session._attach_waiting()
        except BaseException:
            session._finish("closed")
            raise

    def _open_session(self, run_id: str) -> Session:
        session = Session(self, run_id)
        self._held[run_id] = session
        return session

    def _let_go(self, session: Session) -> None:
        if self._held.get(session.run_id) is session:
            del self._held[session.run_id]

    def _take_over(self, run: RunView) -> Verdict | None:
        return takeover.take_over(self, run)

    # --- helpers ------------------------------------------------------------------------

    def _now_text(self) -> str:
        return format_time(self.config.clock())

    def _lease_expiry(self) -> float:
        return self.config.wall_clock() + self.config.lease_ttl

    def _policy_request(
        self, tool: CompiledTool, arguments: JSONValue, run: RunView, step: int
    ) -> PolicyRequest:
        side_effect = tool.tool.side_effect
        if side_effect is None:
            raise RunStateError(f"tool {tool.name} has no side-effect class")
        return PolicyRequest.build(
            tool=tool.name,
            spec_hash=tool.spec_hash,
            side_effect=side_effect,
            idempotent=tool.tool.idempotent,
            arguments=arguments,
            run_id=run.id,
            goal=run.goal,
            step=step,
            consecutive_failures=run.consecutive_failures,
        )

    def _evaluate(self, request: PolicyRequest) -> tuple[PolicyDecision, str | None]:
        """The policy's decision and identity; ``PolicyFailed`` when it raised or answered
        something else (the caller records that by name, and runs nothing)."""
        policy = self.config.policy
        try:
            decision = policy.evaluate(request)
            identity = identity_of(policy)
        except Exception as e:  # the operator's code: fail closed, and say what it raised
            raise PolicyFailed(f"the policy raised {type(e).__name__}: {e}",
                               exception=type(e).__name__) from e  # fmt: skip
        if not isinstance(decision, PolicyDecision):
            raise PolicyFailed(f"the policy answered {decision!r}, not a PolicyDecision",
                               exception=TypeError.__name__)  # fmt: skip
        return decision, identity


def _policy_failure(failure: PolicyFailed) -> tuple[dict[str, JSONValue], str]:
    """What a step records of a policy that failed, and the verdict's reason."""
    observation: dict[str, JSONValue] = {
        "error": "policy_error", "exception": failure.exception, "detail": str(failure),
    }  # fmt: skip
    return observation, f"the policy failed ({failure.exception}); nothing ran"


_OVER_ERRORS: dict[str, type[GateError]] = {
    "paused": RunStateError,
    "ended": RunStateError,
    "lease_lost": LeaseLost,
    "closed": SessionClosed,
}


class Session:
    """One hold on a run. At most one open step; calls are serialised.

    A session refers to its open step's state, never to the ``OpenStep`` handed out (which
    refers to the session): nothing cycles back, so a session its caller drops unclosed is
    freed at once and stops renewing its lease, without waiting for a garbage collection."""

    def __init__(self, gate: Gate, run_id: str) -> None:
        self._gate = gate
        self._store = gate.store
        self.run_id = run_id
        self._over: str | None = None
        self._open: _StepState | None = None
        self._handle: weakref.ref[OpenStep] | None = None
        self._busy = False
        self._active_since = gate.config.clock()
        self._heartbeat: Holding | None = None
        self._run = self._read_run()
        self._hold_lease()

    # --- the public surface -------------------------------------------------------------

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
                )
                if reason is not None:
                    transitions.end_run(tx, self.run_id, status="FAILED", reason=reason, at=at)
                else:
                    transitions.start_step(tx, self.run_id, run.step_count, at=at)
            if reason is not None:
                self._finish("ended")
                return None
            self._active_since = now
            self._open = _StepState(run.step_count)
            return self._step_handle()

    def current(self) -> OpenStep | None:
        return None if self._open is None else self._step_handle()

    def done(self) -> bool:
        return self._over is not None

    def run(self) -> RunView:
        """The run as this session last read or wrote it."""
        return self._run

    def input(self) -> StepInput:
        with self._store.snapshot() as conn:
            run = read_run(conn, self.run_id)
            steps = read_steps(conn, self.run_id)
        if run is None:
            raise UnknownRun(f"there is no run {self.run_id}")
        return StepInput(
            run=run, steps=steps, step=None if self._open is None else self._open.index
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

    # --- internals ----------------------------------------------------------------------

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
        self._gate._let_go(self)

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
        self._gate._let_go(self)

    def _fence(self) -> None:
        """Another session of this gate takes the run over: this one is over, as if it had lost
        the lease to another process (a call under way finds it at its next write)."""
        self._finish("lease_lost")

    @contextmanager
    def _call(self) -> Iterator[None]:
        """Serialise calls; a failed call (not a refusal) closes the session."""
        if self._over is not None:
            raise _OVER_ERRORS[self._over](
                f"the session on run {self.run_id} is over ({self._over})"
            )
        if self._busy:
            raise RunStateError("another call on this session is under way")
        if self._heartbeat is not None and self._heartbeat.lost.is_set():
            self._finish("lease_lost")
            raise LeaseLost(f"the lease of run {self.run_id} was lost; the session is over")
        self._busy = True
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
        finally:
            self._busy = False

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
        if run is not None:
            self._run = run
            if run.status != "RUNNING":
                self._stop_heartbeat()

    def _active(self, now: datetime) -> float:
        return max(0.0, (now - self._active_since).total_seconds())

    def _attach_waiting(self) -> Verdict:
        """Attach to a run waiting on an approval: the verdict for its recorded request."""
        gate = self._gate
        now = gate.config.clock()
        at = format_time(now)
        with self._store.snapshot() as conn:
            run = read_run(conn, self.run_id)
            step = next((s for s in read_steps(conn, self.run_id) if s.status == "pending"), None)
            approval = None if step is None else latest_approval(conn, self.run_id, step.index)
        if run is None or step is None or approval is None:
            raise RunStateError(f"run {self.run_id} waits on no approval")
        if approval.status == "pending":
            self._finish("paused")
            return Verdict(VerdictOutcome.PENDING, run, self._request_of(step), approval,
                                 "waiting for the operator")  # fmt: skip
        if approval.status != "approved":
            raise RunStateError(f"approval {approval.id} is {approval.status}")
        approvals.check_binding(approval, step, None)
        tool = gate.tools.get(step.tool or "")
        if tool is None or tool.spec_hash != step.tool_spec_hash:
            return self._end_waiting(step, approval, "tool_changed", at, closing="expired")
        ttl = run.limits.grant_ttl_seconds
        decided = datetime.fromisoformat(approval.decided_at or approval.created_at)
        if ttl is not None and (now - decided).total_seconds() >= ttl:
            return self._end_waiting(step, approval, "approval_expired", at, closing="expired")

        policy_request = gate._policy_request(
            tool, canonical.loads(step.arguments or "{}"), run, step.index
        )
        try:
            decision, identity = gate._evaluate(policy_request)
        except PolicyFailed as failure:
            observation, reason = _policy_failure(failure)
            return self._end_waiting(
                step, approval, "policy_error", at, closing="superseded", status="FAILED",
                observation=observation, reason_text=reason,
            )  # fmt: skip
        outcome = decision.outcome
        if outcome is Outcome.APPROVE and (
            decision.kind == approval.kind or approval.kind in OPERATOR_KINDS
        ):
            outcome = Outcome.ALLOW
        request = self._request_of(step)
        with self._store.transaction() as tx:
            self._check_waiting(tx, approval)
            transitions.record_policy(
                tx, self.run_id, step.index, request=policy_request.text,
                decision=decision.as_json(), policy=identity, at=at,
            )  # fmt: skip
            if outcome is Outcome.ALLOW:
                # Claim the grant for this session until it executes: another session attaching
                # it meanwhile (another process, the same call) is refused instead of racing.
                tx.execute(
                    "UPDATE runs SET lease_owner = ?, lease_expires_at = ? WHERE id = ?",
                    (gate.owner, gate._lease_expiry(), self.run_id),
                )
            elif outcome is Outcome.APPROVE:
                transitions.close_approval(tx, approval, status="superseded", at=at)
                new = self._pause(tx, step.index, decision, 0.0, at)
            elif outcome is Outcome.DENY:
                transitions.close_approval(tx, approval, status="superseded", at=at)
                transitions.finish_step(
                    tx, self.run_id, step.index, status="denied", active_seconds=0.0, at=at,
                    observation={"error": "denied", "reason": decision.reason},
                )  # fmt: skip
                transitions.resume_run(
                    tx, run, owner=gate.owner, expires=gate._lease_expiry(), at=at
                )
            else:
                transitions.close_approval(tx, approval, status="superseded", at=at)
                transitions.finish_step(
                    tx, self.run_id, step.index, status="failed", active_seconds=0.0, at=at,
                    observation={"error": "policy_abort", "reason": decision.reason},
                )  # fmt: skip
                transitions.end_run(tx, self.run_id, status="FAILED", reason="policy_abort", at=at)
        run = self._read_run()
        self._hold_lease()
        if outcome is Outcome.ALLOW:
            self._active_since = now
            self._open = _StepState(
                step.index, grant=approval, request=request, tool=tool, allowed=True,
                proposed=True,
            )  # fmt: skip
            return Verdict(VerdictOutcome.ALLOWED, run, request, approval, decision.reason)
        if outcome is Outcome.APPROVE:
            self._finish("paused")
            return Verdict(VerdictOutcome.PENDING, run, request, new, decision.reason)
        if outcome is Outcome.DENY:
            return Verdict(VerdictOutcome.DENIED, run, request, None, decision.reason)
        self._finish("ended")
        return Verdict(VerdictOutcome.ENDED, run, request, None, decision.reason)

    def _request_of(self, step: StepView) -> Request | None:
        """The request a step recorded, as a copy."""
        if step.tool is None or step.tool_spec_hash is None or step.arguments is None:
            return None
        with self._store.snapshot() as conn:
            row = conn.execute(
                "SELECT spec FROM tool_specs WHERE hash = ?", (step.tool_spec_hash,)
            ).fetchone()
        spec = canonical.loads(row[0]) if row is not None else None
        side_effect = spec.get("side_effect") if isinstance(spec, dict) else None
        if not isinstance(side_effect, str):
            raise RunStateError(f"the tool spec of run {step.run_id} step {step.index} is missing")
        return Request(
            run_id=step.run_id,
            step=step.index,
            tool=step.tool,
            spec_hash=step.tool_spec_hash,
            side_effect=SideEffect(side_effect),
            arguments=step.arguments,
            request_hash=step.request_hash or "",
        )

    def _check_waiting(self, tx: Transaction, approval: ApprovalView) -> None:
        """Compare-and-set guard for writes to a waiting run: unchanged, and its grant not
        claimed by another live session (the only lease a waiting run carries)."""
        row = tx.execute(
            "SELECT r.status, a.status, r.lease_owner, r.lease_expires_at FROM runs r"
            " JOIN approvals a ON a.run_id = r.id WHERE r.id = ? AND a.id = ?",
            (self.run_id, approval.id),
        ).fetchone()
        if row is None or tuple(row[:2]) != ("WAITING_FOR_APPROVAL", approval.status):
            raise RunLeased(f"run {self.run_id} was changed by another session meanwhile")
        owner, expires = row[2], row[3]
        gate = self._gate
        if owner != gate.owner and is_live(owner, expires, gate.config.wall_clock()):
            raise RunLeased(f"the grant of run {self.run_id} is being executed by {owner}")

    def _end_waiting(
        self,
        step: StepView,
        approval: ApprovalView,
        reason: str,
        at: str,
        *,
        closing: str,
        status: str = "CANCELLED",
        observation: dict[str, JSONValue] | None = None,
        reason_text: str | None = None,
    ) -> Verdict:
        with self._store.transaction() as tx:
            self._check_waiting(tx, approval)
            transitions.close_approval(tx, approval, status=closing, at=at)
            transitions.finish_step(
                tx, self.run_id, step.index, status="failed", active_seconds=0.0, at=at,
                observation=observation or {"error": reason},
            )  # fmt: skip
            transitions.end_run(tx, self.run_id, status=status, reason=reason, at=at)
        run = self._read_run()
        self._finish("ended")
        return Verdict(VerdictOutcome.ENDED, run, self._request_of(step), approval,
                       reason_text or reason)  # fmt: skip

    def _pause(
        self, tx: Transaction, index: int, decision: PolicyDecision, active: float, at: str
    ) -> ApprovalView:
        gate = self._gate
        step = read_step(tx.conn, self.run_id, index)
        if step is None:
            raise RunStateError(f"step {index} is not recorded")
        kind = decision.kind or "approval"
        request = approvals.step_request(step, kind)
        approval_id = gate.config.new_id()
        transitions.request_approval(
            tx, self.run_id, index, approval_id=approval_id, kind=kind,
            request=canonical.dumps_text(request), request_hash=approvals.request_hash(request),
            reason=decision.reason, active_seconds=active, at=at,
        )  # fmt: skip
        return ApprovalView(
            approval_id, self.run_id, index, kind, canonical.dumps_text(request),
            approvals.request_hash(request), "pending", decision.reason, at, None, None, None,
        )  # fmt: skip


@dataclass
class _StepState:
    """What a session knows of its open step: the allowed request, once there is one."""

    index: int
    grant: ApprovalView | None = None
    request: Request | None = None
    tool: CompiledTool | None = None
    allowed: bool = False
    proposed: bool = False


class OpenStep:
    """The step a session has open: propose once, then execute (if allowed) or fail."""

    def __init__(self, session: Session, state: _StepState) -> None:
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
        s = self._session
        with s._call():
            self._check_open()
            if self._state.proposed:
                raise RunStateError(f"step {self.index} already has a decision")
            gate = s._gate
            now = gate.config.clock()
            at = format_time(now)
            run = s._run
            plan = self._plan(decision, run)  # pure: validation and policy, before any write
            with s._write() as tx:
                transitions.record_decision(
                    tx, s.run_id, self.index, decision=decision.record(), at=at
                )
                verdict = self._apply(tx, plan, run, now, at)
            self._state.proposed = True
            return self._conclude(verdict)

    async def execute(
        self, *, also: Callable[[Transaction, Observation], None] | None = None
    ) -> Observation:
        """Run exactly the allowed request. ``also`` writes more in the outcome's transaction
        (the proxy records there that the result is handed back)."""
        s = self._session
        with s._call():
            self._check_open()
            state = self._state
            if not state.allowed or state.request is None or state.tool is None:
                raise RunStateError(f"step {self.index} has no allowed verdict to execute")
            gate = s._gate
            request, tool, grant = state.request, state.tool, state.grant
            now = gate.config.clock()
            at = format_time(now)
            if grant is not None:
                self._check_grant_ttl(grant, now, at)
            request_json = {
                "tool": request.tool,
                "spec_hash": request.spec_hash,
                "arguments": canonical.loads(request.arguments),
            }
            if grant is None:
                with s._write(starts_side_effect=True) as tx:
                    self._start(tx, request, request_json, None, at)
            else:
                with s._store.transaction() as tx:
                    s._check_waiting(tx, grant)
                    self._start(tx, request, request_json, grant.id, at)
                s._read_run()
                s._hold_lease()
            state.allowed = False

            try:
                observation = await _call_tool(tool, request.args())
            except OutcomeUnknown as e:
                repeatable = tool.tool.side_effect is SideEffect.READ_ONLY or tool.tool.idempotent
                if not repeatable:
                    return self._outcome_unknown(str(e))
                observation = Observation(False, None, f"outcome unknown: {e}", f"error: {e}")

            end = gate.config.clock()
            end_at = format_time(end)
            with s._write() as tx:
                transitions.finish_step(
                    tx, s.run_id, self.index,
                    status="done" if observation.ok else "failed",
                    observation=_observation_json(observation),
                    active_seconds=s._active(end), at=end_at,
                )  # fmt: skip
                if observation.ok and tool.tool.terminal:
                    transitions.end_run(
                        tx, s.run_id, status="COMPLETED", reason="completed", at=end_at,
                        result=observation.result,
                    )  # fmt: skip
                if also is not None:
                    also(tx, observation)
            s._open = None
            if observation.ok and tool.tool.terminal:
                s._finish("ended")
            return observation

    def _outcome_unknown(self, why: str) -> Observation:
        """The call may or may not have taken effect: wait for the operator, never re-run."""
        s = self._session
        now = s._gate.config.clock()
        at = format_time(now)
        decision = PolicyDecision(Outcome.APPROVE, f"{INTERRUPTED_REASON}: {why}",
                                  kind="interrupted_side_effect")  # fmt: skip
        with s._write() as tx:
            approval = s._pause(tx, self.index, decision, s._active(now), at)
        s._finish("paused")
        return Observation(False, None, f"outcome unknown: {why}",
                           "outcome unknown: waiting for the operator", approval)  # fmt: skip

    def fail(self, error: str) -> None:
        """End a step whose decision could not be made: the run fails as ``agent_error``."""
        s = self._session
        with s._call():
            self._check_open()
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

    # --- internals ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._session._open is not self._state:
            raise RunStateError(f"step {self.index} is not the session's open step")

    def _start(
        self,
        tx: Transaction,
        request: Request,
        request_json: dict[str, JSONValue],
        approval_id: str | None,
        at: str,
    ) -> None:
        s = self._session
        tool = self._tool
        if tool is None:
            raise RunStateError("no tool")
        if approval_id is None:
            transitions.record_request(
                tx, s.run_id, self.index, tool=request.tool, spec_hash=request.spec_hash,
                spec_text=tool.spec_text, arguments=request.arguments,
                request_hash=request.request_hash, at=at,
            )  # fmt: skip
        transitions.start_tool(
            tx, s.run_id, self.index, request=request_json, request_hash=request.request_hash,
            approval_id=approval_id, owner=s._gate.owner, expires=s._gate._lease_expiry(), at=at,
        )  # fmt: skip

    def _check_grant_ttl(self, grant: ApprovalView, now: datetime, at: str) -> None:
        s = self._session
        ttl = s._run.limits.grant_ttl_seconds
        decided = datetime.fromisoformat(grant.decided_at or grant.created_at)
        if ttl is None or (now - decided).total_seconds() < ttl:
            return
        with s._store.snapshot() as conn:
            step = read_step(conn, s.run_id, self.index)
        if step is None:
            raise RunStateError(f"step {self.index} is not recorded")
        s._end_waiting(step, grant, "approval_expired", at, closing="expired")
        raise ApprovalExpired(
            f"approval {grant.id} expired before it was executed; run {s.run_id} was cancelled"
        )

    def _plan(self, decision: Decision, run: RunView) -> _Plan:
        gate = self._session._gate
        problem = decision.problem()
        if problem is not None:
            return _Plan(invalid=problem)
        if decision.kind == Kind.COMPLETE:
            try:
                return _Plan(complete=canonical.dumps_text(decision.parsed_result()))
            except JSONRefused as e:
                return _Plan(invalid=f"the result is not exact JSON: {e}")
        if decision.kind == Kind.FAIL:
            return _Plan(fail=decision.error or "the agent gave up")
        tool = gate.tools.get(decision.tool)
        if tool is None:
            return _Plan(invalid=f"there is no tool {decision.tool!r}")
        if tool.tool.side_effect is None:
            return _Plan(invalid=f"tool {tool.name} is unavailable: it has no side-effect class")
        try:
            arguments = decision.parsed_arguments()
        except JSONRefused as e:
            return _Plan(invalid=f"the arguments are not exact JSON: {e} [{type(e).__name__}]")
        errors = tool.schema_errors(arguments)
        if errors:
            return _Plan(invalid="the arguments do not match the schema: " + "; ".join(errors))
        arguments_text = canonical.dumps_text(arguments)
        request_hash = approvals.call_hash(
            spec_hash=tool.spec_hash, tool=tool.name, arguments=arguments
        )
        request = Request(
            run.id, self.index, tool.name, tool.spec_hash, tool.tool.side_effect,
            arguments_text, request_hash,
        )  # fmt: skip
        policy_request = gate._policy_request(tool, arguments, run, self.index)
        try:
            policy_decision, identity = gate._evaluate(policy_request)
        except PolicyFailed as failure:
            return _Plan(tool=tool, request=request, policy_request=policy_request,
                         failure=_policy_failure(failure))  # fmt: skip
        return _Plan(
            tool=tool, request=request, policy_request=policy_request,
            policy=policy_decision, identity=identity,
        )  # fmt: skip

    def _apply(self, tx: Transaction, plan: _Plan, run: RunView, now: datetime, at: str) -> Verdict:
        s = self._session
        active = s._active(now)
        if plan.invalid is not None:
            transitions.finish_step(
                tx, s.run_id, self.index, status="failed", active_seconds=active, at=at,
                observation={"error": "invalid_decision", "detail": plan.invalid},
            )  # fmt: skip
            return Verdict(VerdictOutcome.DENIED, run, reason=plan.invalid)
        if plan.complete is not None:
            transitions.finish_step(
                tx, s.run_id, self.index, status="done", active_seconds=active, at=at,
                observation={"completed": True},
            )  # fmt: skip
            transitions.end_run(
                tx, s.run_id, status="COMPLETED", reason="completed", at=at, result=plan.complete
            )
            return Verdict(VerdictOutcome.ENDED, run, reason="completed")
        if plan.fail is not None:
            transitions.finish_step(
                tx, s.run_id, self.index, status="failed", active_seconds=active, at=at,
                observation={"error": "agent_failed", "detail": plan.fail},
            )  # fmt: skip
            transitions.end_run(tx, s.run_id, status="FAILED", reason="agent_failed", at=at)
            return Verdict(VerdictOutcome.ENDED, run, reason=plan.fail)

        tool, request, decision = plan.tool, plan.request, plan.policy
        if tool is None or request is None or plan.policy_request is None:
            raise RunStateError("incomplete plan")
        if plan.failure is not None:  # nothing to record of the policy but how it failed
            observation, reason = plan.failure
            transitions.record_request(
                tx, s.run_id, self.index, tool=tool.name, spec_hash=tool.spec_hash,
                spec_text=tool.spec_text, arguments=request.arguments,
                request_hash=request.request_hash, at=at,
            )  # fmt: skip
            transitions.finish_step(
                tx, s.run_id, self.index, status="failed", active_seconds=active, at=at,
                observation=observation,
            )  # fmt: skip
            transitions.end_run(tx, s.run_id, status="FAILED", reason="policy_error", at=at)
            return Verdict(VerdictOutcome.ENDED, run, request, None, reason)
        if decision is None:
            raise RunStateError("incomplete plan")
        transitions.record_policy(
            tx, s.run_id, self.index, request=plan.policy_request.text,
            decision=decision.as_json(), policy=plan.identity, at=at,
        )  # fmt: skip
        if decision.outcome is Outcome.ALLOW:
            self._state.allowed, self._state.request, self._state.tool = True, request, tool
            return Verdict(VerdictOutcome.ALLOWED, run, request, None, decision.reason)
        transitions.record_request(
            tx, s.run_id, self.index, tool=tool.name, spec_hash=tool.spec_hash,
            spec_text=tool.spec_text, arguments=request.arguments,
            request_hash=request.request_hash, at=at,
        )  # fmt: skip
        if decision.outcome is Outcome.DENY:
            transitions.finish_step(
                tx, s.run_id, self.index, status="denied", active_seconds=active, at=at,
                observation={"error": "denied", "reason": decision.reason},
            )  # fmt: skip
            return Verdict(VerdictOutcome.DENIED, run, request, None, decision.reason)
        if decision.outcome is Outcome.APPROVE:
            approval = s._pause(tx, self.index, decision, active, at)
            return Verdict(VerdictOutcome.PENDING, run, request, approval, decision.reason)
        transitions.finish_step(
            tx, s.run_id, self.index, status="failed", active_seconds=active, at=at,
            observation={"error": "policy_abort", "reason": decision.reason},
        )  # fmt: skip
        transitions.end_run(tx, s.run_id, status="FAILED", reason="policy_abort", at=at)
        return Verdict(VerdictOutcome.ENDED, run, request, None, decision.reason)

    def _conclude(self, verdict: Verdict) -> Verdict:
        """Attach the run as written, and end the step or the session as the verdict says."""
        s = self._session
        run = s._run
        result = Verdict(verdict.outcome, run, verdict.request, verdict.approval,
                               verdict.reason)  # fmt: skip
        if verdict.outcome == VerdictOutcome.DENIED:
            s._open = None
        elif verdict.outcome == VerdictOutcome.PENDING:
            s._finish("paused")
        elif verdict.outcome == VerdictOutcome.ENDED:
            s._finish("ended")
        return result


@dataclass
class _Plan:
    invalid: str | None = None
    complete: str | None = None
    fail: str | None = None
    tool: CompiledTool | None = None
    request: Request | None = None
    policy_request: PolicyRequest | None = None
    policy: PolicyDecision | None = None
    identity: str | None = None
    failure: tuple[dict[str, JSONValue], str] | None = None  # the policy failed: nothing runs


async def _call_tool(tool: CompiledTool, arguments: JSONValue) -> Observation:
    try:
        value: Any = tool.tool.func(arguments)  # type: ignore[arg-type]
        if inspect.isawaitable(value):
            value = await value
    except OutcomeUnknown:
        raise
    except Exception as e:  # a tool's failure is an observation, not the gate's failure
        return Observation(False, None, f"{type(e).__name__}: {e}", f"error: {e}")
    try:
        text = canonical.dumps_text(value)
    except JSONRefused as e:
        return Observation(False, None, f"the tool returned a value with no exact JSON form: {e}",
                           "error: unrepresentable result")  # fmt: skip
    summary = value if isinstance(value, str) else text
    return Observation(True, text, None, summary[:200])


def _observation_json(observation: Observation) -> dict[str, JSONValue]:
    if observation.ok:
        return {"ok": True, "result": canonical.loads(observation.result or "null")}
    return {"ok": False, "error": observation.error}
