"""A run waiting on an approval: a step pausing on one, a session attaching to it, its end.

Rules:

1. A step pauses on an approval of the request it recorded (``approvals.step_request``), of the
   policy's kind (``approval`` when it names none); the session that paused it is over.
2. Attaching a run whose approval is still pending answers ``pending`` and the session is over;
   one whose approval is neither pending nor approved raises ``RunStateError``.
3. An approved grant must still bind its step (``approvals.check_binding``) and be the operator's
   authenticated decision (``core.operator_key`` rule 3), checked again in the transaction that
   starts its tool; else ``DecisionUnauthenticated`` (or ``OperatorKeyUnavailable``), and
   nothing is written. A grant whose tool
   is gone or whose spec hash changed ends the run as ``tool_changed``; a grant whose TTL ran out
   cancels it as ``approval_expired``. Neither runs anything.
4. The policy is evaluated again on the same canonical request. An ``approve`` of the grant's
   kind, or of any kind for a grant of an operator kind (``OPERATOR_KINDS``), lets the request
   through; an ``approve`` of another kind re-pauses the run (the grant superseded); ``deny``
   denies the step and the run goes on; ``abort`` fails the run (``policy_abort``); a policy
   that fails ends it as ``policy_error``, with the failure recorded by name.
5. A grant let through is claimed, the run still waiting: the run's lease is this gate's until
   the grant executes, so another session attaching it meanwhile is refused and writes nothing.
6. Every write to a waiting run is guarded by compare-and-set: the run still waiting, its
   approval's status unchanged, its grant not claimed by another live owner; else
   ``RunLeased``, and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import approvals, canonical, transitions
from core.canonical import JSONValue
from core.errors import (
    DecisionUnauthenticated,
    PolicyFailed,
    RunLeased,
    RunStateError,
    SignoffError,
)
from core.gate_parts import policy_failure
from core.hold import Hold, StepState
from core.lease import is_live
from core.limits import Limits
from core.policy.policy import Outcome, PolicyDecision
from core.records import ApprovalView, StepView, latest_approval, read_run, read_step, read_steps
from core.store import Transaction, format_time
from core.tools import SideEffect
from core.verdicts import OPERATOR_KINDS, Request, Verdict, VerdictOutcome


def attach(s: Hold) -> Verdict:
    """Attach to a run waiting on an approval: the verdict for its recorded request."""
    gate = s._gate
    now = gate.config.clock()
    at = format_time(now)
    with s._store.snapshot() as conn:
        run = read_run(conn, s.run_id)
        step = next((x for x in read_steps(conn, s.run_id) if x.status == "pending"), None)
        approval = None if step is None else latest_approval(conn, s.run_id, step.index)
    if run is None or step is None or approval is None:
        raise RunStateError(f"run {s.run_id} waits on no approval")
    if approval.status == "pending":
        s._finish("paused")
        return Verdict(VerdictOutcome.PENDING, run, request_of(s, step), approval,
                             "waiting for the operator")  # fmt: skip
    if approval.status != "approved":
        raise RunStateError(f"approval {approval.id} is {approval.status}")
    approvals.check_binding(approval, step, None)
    granted = authenticated(s, approval)
    tool = gate.tools.get(step.tool or "")
    if tool is None or tool.spec_hash != step.tool_spec_hash:
        return end_waiting(s, step, approval, "tool_changed", at, closing="expired")
    ttl = granted.ttl
    decided = datetime.fromisoformat(granted.decided_at)
    if ttl is not None and (now - decided).total_seconds() >= ttl:
        return end_waiting(s, step, approval, "approval_expired", at, closing="expired")

    policy_request = gate._policy_request(
        tool, canonical.loads(step.arguments or "{}"), run, step.index
    )
    try:
        decision, identity = gate._evaluate(policy_request)
    except PolicyFailed as failure:
        observation, reason = policy_failure(failure)
        return end_waiting(
            s, step, approval, "policy_error", at, closing="superseded", status="FAILED",
            observation=observation, reason_text=reason,
        )  # fmt: skip
    outcome = decision.outcome
    if outcome is Outcome.APPROVE and (
        decision.kind == approval.kind or approval.kind in OPERATOR_KINDS
    ):
        outcome = Outcome.ALLOW
    request = request_of(s, step)
    with s._store.transaction() as tx:
        check_waiting(s, tx, approval)
        transitions.record_policy(
            tx, s.run_id, step.index, request=policy_request.recorded(),
            decision=decision.as_json(), policy=identity, at=at,
        )  # fmt: skip
        if outcome is Outcome.ALLOW:
            # Claim the grant for this session until it executes: another session attaching
            # it meanwhile (another process, the same call) is refused instead of racing.
            tx.execute(
                "UPDATE runs SET lease_owner = ?, lease_expires_at = ? WHERE id = ?",
                (gate.owner, gate._lease_expiry(), s.run_id),
            )
        elif outcome is Outcome.APPROVE:
            transitions.close_approval(tx, approval, status="superseded", at=at)
            new = pause(s, tx, step.index, decision, 0.0, at)
        elif outcome is Outcome.DENY:
            transitions.close_approval(tx, approval, status="superseded", at=at)
            transitions.finish_step(
                tx, s.run_id, step.index, status="denied", active_seconds=0.0, at=at,
                observation={"error": "denied", "reason": decision.reason},
            )  # fmt: skip
            transitions.resume_run(tx, run, owner=gate.owner, expires=gate._lease_expiry(), at=at)
        else:
            transitions.close_approval(tx, approval, status="superseded", at=at)
            transitions.finish_step(
                tx, s.run_id, step.index, status="failed", active_seconds=0.0, at=at,
                observation={"error": "policy_abort", "reason": decision.reason},
            )  # fmt: skip
            transitions.end_run(tx, s.run_id, status="FAILED", reason="policy_abort", at=at)
    run = s._read_run()
    s._hold_lease()
    if outcome is Outcome.ALLOW:
        s._active_since = now
        s._open = StepState(
            step.index, grant=approval, request=request, tool=tool, allowed=True,
            proposed=True,
        )  # fmt: skip
        return Verdict(VerdictOutcome.ALLOWED, run, request, approval, decision.reason)
    if outcome is Outcome.APPROVE:
        s._finish("paused")
        return Verdict(VerdictOutcome.PENDING, run, request, new, decision.reason)
    if outcome is Outcome.DENY:
        return Verdict(VerdictOutcome.DENIED, run, request, None, decision.reason)
    s._finish("ended")
    return Verdict(VerdictOutcome.ENDED, run, request, None, decision.reason)


def request_of(s: Hold, step: StepView) -> Request | None:
    """The request a step recorded, as a copy."""
    if step.tool is None or step.tool_spec_hash is None or step.arguments is None:
        return None
    with s._store.snapshot() as conn:
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


@dataclass(frozen=True)
class Granted:
    """A grant as the chain has it: when the operator's authenticated decision was made, and
    the grant TTL the run started with (never the tables', which anybody can edit)."""

    decided_at: str
    ttl: float | None


def authenticated(s: Hold, approval: ApprovalView, conn: Any = None) -> Granted:
    """The operator's authenticated decision granting ``approval``, or the named refusal
    (``core.operator_key`` rule 3): the approvals table never grants by itself."""
    if conn is None:
        with s._store.snapshot() as snap:
            return authenticated(s, approval, snap)
    decided_at = s._gate.config.operator.check_grant(conn, s._store.database_id, approval)
    row = conn.execute(
        "SELECT payload FROM events WHERE run_id = ? AND kind = 'run.started' ORDER BY seq LIMIT 1",
        (approval.run_id,),
    ).fetchone()
    try:
        limits = Limits.from_json(canonical.loads(row[0]).get("limits"))  # type: ignore[union-attr]
    except (TypeError, AttributeError, ValueError, SignoffError):
        raise DecisionUnauthenticated(
            f"run {approval.run_id} has no readable run.started event: its grant runs nothing"
        ) from None
    return Granted(decided_at, limits.grant_ttl_seconds)


def check_waiting(s: Hold, tx: Transaction, approval: ApprovalView) -> None:
    """Compare-and-set guard for writes to a waiting run: unchanged, and its grant not
    claimed by another live session (the only lease a waiting run carries)."""
    row = tx.execute(
        "SELECT r.status, a.status, r.lease_owner, r.lease_expires_at FROM runs r"
        " JOIN approvals a ON a.run_id = r.id WHERE r.id = ? AND a.id = ?",
        (s.run_id, approval.id),
    ).fetchone()
    if row is None or tuple(row[:2]) != ("WAITING_FOR_APPROVAL", approval.status):
        raise RunLeased(f"run {s.run_id} was changed by another session meanwhile")
    owner, expires = row[2], row[3]
    gate = s._gate
    if owner != gate.owner and is_live(owner, expires, gate.config.wall_clock()):
        raise RunLeased(f"the grant of run {s.run_id} is being executed by {owner}")


def end_waiting(
    s: Hold,
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
    """End a waiting run (its approval closed as ``closing``); the session is over."""
    with s._store.transaction() as tx:
        check_waiting(s, tx, approval)
        transitions.close_approval(tx, approval, status=closing, at=at)
        transitions.finish_step(
            tx, s.run_id, step.index, status="failed", active_seconds=0.0, at=at,
            observation=observation or {"error": reason},
        )  # fmt: skip
        transitions.end_run(tx, s.run_id, status=status, reason=reason, at=at)
    run = s._read_run()
    s._finish("ended")
    return Verdict(VerdictOutcome.ENDED, run, request_of(s, step), approval,
                   reason_text or reason)  # fmt: skip


def pause(
    s: Hold, tx: Transaction, index: int, decision: PolicyDecision, active: float, at: str
) -> ApprovalView:
    """Pause step ``index`` on an approval of its recorded request, in ``tx``."""
    gate = s._gate
    step = read_step(tx.conn, s.run_id, index)
    if step is None:
        raise RunStateError(f"step {index} is not recorded")
    kind = decision.kind or "approval"
    request = approvals.step_request(step, kind)
    approval_id = gate.config.new_id()
    transitions.request_approval(
        tx, s.run_id, index, approval_id=approval_id, kind=kind,
        request=canonical.dumps_text(request), request_hash=approvals.request_hash(request),
        reason=decision.reason, active_seconds=active, at=at,
    )  # fmt: skip
    return ApprovalView(
        approval_id, s.run_id, index, kind, canonical.dumps_text(request),
        approvals.request_hash(request), "pending", decision.reason, at, None, None, None,
    )  # fmt: skip
