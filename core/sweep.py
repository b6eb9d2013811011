"""The sweeper: what no session will come back for reaches the operator, or ends.

Rules:

1. A running proxy run (one run per call) whose lease expired has no one to come back for it:
   a step found executing a tool that is not repeatable (``core.effects.repeatable``, by the
   spec recorded when it started) pauses on an ``interrupted_side_effect`` approval; anything
   else ends the run as ``interrupted``. A library run (no call key) is left for its owner to
   attach, except for an executing mutation, which is paused the same way, so it reaches the
   operator.
2. A pending approval older than ``pending_ttl`` is expired and its run cancelled
   (``approval_expired``), with events. An expired ``interrupted_side_effect`` is not "nobody
   decided, nothing ran": its call may have run, and it ends ``not_repeated``
   (``core.effects`` rule 3). (A granted one past its TTL is judged when a session attaches
   it, as the gate does.)
3. Everything is written with its events in one transaction per run, under a takeover by the
   sweeper's own owner name, guarded by compare-and-set on the lease as any takeover is.
4. The whole of a large result that no re-call collected within ``kept_results.KEEP_DAYS`` is
   deleted, with an event (core/kept_results.py rule 3).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime

from core import approvals, canonical, effects, kept_results, transitions
from core.lease import is_live
from core.records import ApprovalView, StepView, read_run, read_steps
from core.store import Store, Transaction, format_time

INTERRUPTED_REASON = "started, outcome unknown"
PENDING_TTL = 86_400.0  # seconds a request may wait undecided (rule 2); the app counts it down


def sweep(
    store: Store,
    *,
    pending_ttl: float = PENDING_TTL,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    wall_clock: Callable[[], float] = time.time,
) -> list[str]:
    """One pass; returns what it did, a line per run, for the log."""
    done: list[str] = []
    owner = f"sweeper-{secrets.token_hex(4)}"
    with store.snapshot() as conn:
        running = conn.execute(
            "SELECT id FROM runs WHERE status = 'RUNNING' AND (lease_expires_at IS NULL"
            " OR lease_expires_at <= ?)",
            (wall_clock(),),
        ).fetchall()
        expired_pending = conn.execute(
            "SELECT a.id FROM approvals a JOIN runs r ON r.id = a.run_id"
            " WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'"
            " AND a.created_at <= ?",
            (format_time(datetime.fromtimestamp(now().timestamp() - pending_ttl, UTC)),),
        ).fetchall()
    for (run_id,) in running:
        line = _settle(store, run_id, owner, now, wall_clock)
        if line:
            done.append(line)
    for (approval_id,) in expired_pending:
        line = _expire(store, approval_id, now)
        if line:
            done.append(line)
    with store.snapshot() as conn:
        old = conn.execute("SELECT 1 FROM result_blobs WHERE created_at < ? LIMIT 1",
                           (format_time(now() - kept_results.KEEP),)).fetchone()  # fmt: skip
    if old is not None:
        with store.transaction() as tx:
            pruned = kept_results.prune(tx, now())
        done.append(f"{pruned} large result(s) no re-call collected in time: no longer kept")
    return done


def _settle(
    store: Store, run_id: str, owner: str, now: Callable[[], datetime], wall: Callable[[], float]
) -> str:
    at = format_time(now())
    with store.transaction() as tx:
        run = read_run(tx.conn, run_id)
        if run is None or run.status != "RUNNING":
            return ""
        if is_live(run.lease_owner, run.lease_expires_at, wall()):
            return ""  # renewed meanwhile
        call_key = tx.execute("SELECT call_key FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        steps = [s for s in read_steps(tx.conn, run_id) if s.status in ("deciding", "executing")]
        mutation = next((s for s in steps if s.status == "executing" and _mutating(tx, s)), None)
        if mutation is None and call_key is None:
            return ""  # a library run: its owner attaches it when it comes back
        transitions.take_over(tx, run, owner=owner, expires=wall(), at=at)
        for step in steps:
            if step is not mutation:
                transitions.interrupt_step(tx, run_id, step.index, at=at)
        if mutation is not None:
            request = approvals.step_request(mutation, "interrupted_side_effect")
            transitions.request_approval(
                tx, run_id, mutation.index, approval_id=f"ap-{secrets.token_hex(6)}",
                kind="interrupted_side_effect", request=canonical.dumps_text(request),
                request_hash=approvals.request_hash(request), reason=INTERRUPTED_REASON,
                active_seconds=0.0, at=at,
            )  # fmt: skip
            return (
                f"run {run_id}: step {mutation.index} started, outcome unknown: asked the operator"
            )
        transitions.end_run(tx, run_id, status="FAILED", reason="interrupted", at=at)
        return f"run {run_id}: abandoned by its proxy: ended as interrupted"


def _mutating(tx: Transaction, step: StepView) -> bool:
    row = tx.execute(
        "SELECT spec FROM tool_specs WHERE hash = ?", (step.tool_spec_hash,)
    ).fetchone()
    return not effects.repeatable(canonical.loads(row[0]) if row else None)


def _expire(store: Store, approval_id: str, now: Callable[[], datetime]) -> str:
    at = format_time(now())
    with store.transaction() as tx:
        row = tx.execute(
            "SELECT a.id, a.run_id, a.step_idx, a.kind, a.request, a.request_hash, a.status,"
            " a.policy_reason, a.created_at, a.decided_by, a.decided_reason, a.decided_at"
            " FROM approvals a JOIN runs r ON r.id = a.run_id"
            " WHERE a.id = ? AND a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'",
            (approval_id,),
        ).fetchone()
        if row is None:
            return ""
        approval = ApprovalView(*row)
        transitions.close_approval(tx, approval, status="expired", at=at)
        if approval.kind == "interrupted_side_effect":  # it may have run: never "failed"
            observation = effects.not_repeated_observation("sweeper", "nobody decided in time")
            reason = effects.NOT_REPEATED
        else:
            observation = {"error": "approval_expired", "reason": "nobody decided in time"}
            reason = "approval_expired"
        transitions.finish_step(
            tx, approval.run_id, approval.step, status="failed", active_seconds=0.0, at=at,
            observation=observation,
        )  # fmt: skip
        transitions.end_run(tx, approval.run_id, status="CANCELLED", reason=reason, at=at)
    if reason == effects.NOT_REPEATED:
        return f"approval {approval_id}: nobody decided in time: it may have run; not repeated"
    return f"approval {approval_id}: nobody decided in time: expired, run cancelled"
