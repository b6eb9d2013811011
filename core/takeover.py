"""Taking over a run whose lease expired, and settling the steps its last owner left open.

Rules (decisions 0009 and 0010):

1. A deciding step is marked interrupted.
2. An executing step of a repeatable tool (``core.effects.repeatable``, by the spec recorded
   when it started) is marked interrupted and the run goes on.
3. Any other executing step started a side effect whose outcome is unknown: the reconcile hook
   is asked (before the write lock is taken: it may do I/O), or, without one or when it does not
   know, the run pauses on an ``interrupted_side_effect`` approval of that step's recorded
   request. A step whose tool is gone or changed, or whose arguments no longer pass its schema,
   fails the run as ``reconcile_conflict``.
4. The takeover is one transaction, guarded by compare-and-set on the lease.
"""

from __future__ import annotations

from typing import Any

from core import approvals, canonical, effects, transitions
from core.errors import RunLeased
from core.gate_parts import GateParts
from core.lease import is_live
from core.records import ApprovalView, RunView, StepView, read_run, read_steps
from core.verdicts import INTERRUPTED_REASON, OPEN_STEPS, Verdict, VerdictOutcome, copy_request


def take_over(gate: GateParts, run: RunView) -> Verdict | None:
    """Take over a run whose lease expired, settling the steps its last owner left open.

    A deciding step is marked interrupted. An executing step of a read-only or idempotent
    tool is marked interrupted and the run goes on. Any other executing step started a side
    effect whose outcome is unknown: the reconcile hook is asked, or (without one, or when
    it does not know) the run pauses on an ``interrupted_side_effect`` approval of that
    step's recorded request. A step whose tool is gone, changed, or whose arguments no
    longer pass its schema fails the run as ``reconcile_conflict``. Returns the verdict
    when the run paused or ended, None when the session goes on.
    """
    if is_live(run.lease_owner, run.lease_expires_at, gate.config.wall_clock()):
        raise RunLeased(f"run {run.id} is leased to {run.lease_owner}, live")
    with gate.store.snapshot() as conn:
        open_steps = [s for s in read_steps(conn, run.id) if s.status in OPEN_STEPS]
    # Ask the hook before taking the write lock: it may do I/O of its own.
    plans = [(step, settle(gate, step)) for step in open_steps]
    at = gate._now_text()
    verdict: tuple[VerdictOutcome, ApprovalView | None, str] | None = None
    with gate.store.transaction() as tx:
        current = read_run(tx.conn, run.id)
        if current is None or (current.lease_owner, current.lease_expires_at) != (
            run.lease_owner,
            run.lease_expires_at,
        ):
            raise RunLeased(f"run {run.id} was taken by another session meanwhile")
        transitions.take_over(tx, run, owner=gate.owner, expires=gate._lease_expiry(), at=at)
        for step, (action, detail) in plans:
            if detail is not None and "answer" in detail:
                transitions.record_reconciled(tx, run.id, step.index, answer=detail, at=at)
            if action == "interrupt":
                transitions.interrupt_step(tx, run.id, step.index, at=at)
            elif action == "done":
                transitions.finish_step(
                    tx, run.id, step.index, status="done", active_seconds=0.0, at=at,
                    observation={"ok": True, "result": detail["result"], "reconciled": True},
                )  # fmt: skip
                # settle() found this tool with the spec the step started under: a terminal
                # tool's call that took effect ends the run, as its execute would have.
                tool = gate.tools.get(step.tool or "")
                if tool is not None and tool.tool.terminal:
                    transitions.end_run(
                        tx, run.id, status="COMPLETED", reason="completed", at=at,
                        result=canonical.dumps_text(detail["result"]),
                    )  # fmt: skip
                    verdict = (VerdictOutcome.ENDED, None, "completed")
            elif action == "conflict":
                transitions.finish_step(
                    tx, run.id, step.index, status="failed", active_seconds=0.0, at=at,
                    observation={"error": "reconcile_conflict", "detail": detail["why"]},
                )  # fmt: skip
                transitions.end_run(tx, run.id, status="FAILED", reason="reconcile_conflict", at=at)
                verdict = (VerdictOutcome.ENDED, None, "reconcile_conflict")
            else:  # pause
                request = approvals.step_request(step, "interrupted_side_effect")
                approval = ApprovalView(
                    gate.config.new_id(), run.id, step.index, "interrupted_side_effect",
                    canonical.dumps_text(request), approvals.request_hash(request),
                    "pending", INTERRUPTED_REASON, at, None, None, None,
                )  # fmt: skip
                transitions.request_approval(
                    tx, run.id, step.index, approval_id=approval.id, kind=approval.kind,
                    request=approval.request, request_hash=approval.request_hash,
                    reason=INTERRUPTED_REASON, active_seconds=0.0, at=at,
                )  # fmt: skip
                verdict = (VerdictOutcome.PENDING, approval, INTERRUPTED_REASON)
        final = read_run(tx.conn, run.id)
    if verdict is None or final is None:
        return None
    outcome, waiting_on, reason = verdict
    return Verdict(outcome, final, None, waiting_on, reason)


def settle(gate: GateParts, step: StepView) -> tuple[str, Any]:
    """What a takeover does with a step left open: (action, what to record)."""
    if step.status == "deciding":
        return "interrupt", None
    if effects.repeatable(recorded_spec(gate, step)):
        return "interrupt", None
    tool = gate.tools.get(step.tool or "")
    arguments = canonical.loads(step.arguments or "null")
    if tool is None or tool.spec_hash != step.tool_spec_hash:
        return "conflict", {"why": f"tool {step.tool} is gone or changed since it started"}
    errors = tool.schema_errors(arguments)
    if errors:
        return "conflict", {"why": "the arguments no longer pass the schema: " + "; ".join(errors)}
    hook = gate.config.reconcile
    if hook is None:
        return "pause", None
    answer = hook(copy_request(step, tool))
    if answer.answer == "done":
        return "done", {"answer": "done", "result": answer.result}
    if answer.answer == "not_done":
        return "interrupt", {"answer": "not_done", "result": None}
    return "pause", {"answer": "unknown", "result": None}


def recorded_spec(gate: GateParts, step: StepView) -> dict[str, Any]:
    with gate.store.snapshot() as conn:
        row = conn.execute(
            "SELECT spec FROM tool_specs WHERE hash = ?", (step.tool_spec_hash,)
        ).fetchone()
    spec = canonical.loads(row[0]) if row is not None else None
    return spec if isinstance(spec, dict) else {}
