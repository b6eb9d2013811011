"""Approvals bound by SHA-256 to the exact request, decided outside the model.

Rules:

1. The canonical request is ``{"tool_spec", "tool", "arguments", "run", "step", "kind"}``: the
   spec hash of the tool as it was, its name, the canonical arguments, the run, the step and
   the approval's kind. An approval stores it and its SHA-256. Who proposed the step (the
   decision's origin) is not part of it.
2. Deciding an approval (``approve``, ``reject``) recomputes the hash from what the step
   recorded; if it no longer matches, or does not match the hash the operator was shown
   (``expected_hash``), it raises ``ApprovalMismatch`` and changes nothing.
3. Only a pending approval is decided; a second decision raises ``ApprovalNotPending``.
4. A decision is signed with the operator key (core/operator_key.py): its MAC is in the
   ``approval.decided`` event, and only such an event makes a grant executable.
5. Rejecting ends the run (CANCELLED, ``rejected``) in the same transaction; rejecting an
   ``interrupted_side_effect`` ends it ``not_repeated``, since its call may have run
   (``core.effects`` rule 3). Approving only records the grant: the gate executes it, once,
   when a session attaches.
6. An approval may be given a scope beyond once (``scope``: core/grants.py): the standing grant
   is made, signed, in the decision's transaction; a scope that may not be given raises
   ``ScopeRefused`` and decides nothing.
7. Once a decision is committed, and only then, whoever waits on the store is woken (core/
   wake.py): the proxy holding the call and the tray app. Every path that decides (the CLI,
   the app, the demo, a library caller) goes through here, so none can forget the wake.
"""

from __future__ import annotations

from datetime import UTC, datetime

from core import canonical, effects, grants, operator_key, transitions, wake
from core.canonical import JSONValue
from core.errors import ApprovalMismatch, ApprovalNotPending, UnknownApproval
from core.operator_key import OperatorKey
from core.records import ApprovalView, StepView, read_approval, read_step
from core.store import Store, format_time


def request_value(
    *, spec_hash: str, tool: str, arguments: JSONValue, run_id: str, step: int, kind: str
) -> dict[str, JSONValue]:
    return {
        "tool_spec": spec_hash,
        "tool": tool,
        "arguments": arguments,
        "run": run_id,
        "step": step,
        "kind": kind,
    }


def request_hash(request: dict[str, JSONValue]) -> str:
    return canonical.sha256_hex(request)


def call_hash(*, spec_hash: str, tool: str, arguments: JSONValue) -> str:
    """The call itself, wherever it was made: same tool as specified, same arguments.

    Recorded on each step; the loop limit compares it (with the observation) across steps.
    """
    return canonical.sha256_hex({"tool_spec": spec_hash, "tool": tool, "arguments": arguments})


def step_request(step: StepView, kind: str) -> dict[str, JSONValue]:
    """The canonical request a step recorded, for an approval of ``kind``."""
    if step.tool is None or step.tool_spec_hash is None or step.arguments is None:
        raise ApprovalMismatch(f"step {step.index} of run {step.run_id} recorded no request")
    return request_value(
        spec_hash=step.tool_spec_hash,
        tool=step.tool,
        arguments=canonical.loads(step.arguments),
        run_id=step.run_id,
        step=step.index,
        kind=kind,
    )


def check_binding(approval: ApprovalView, step: StepView, expected_hash: str | None) -> None:
    """Raise ``ApprovalMismatch`` unless the approval still names exactly the step's request."""
    recomputed = request_hash(step_request(step, approval.kind))
    stored = canonical.sha256_hex(canonical.loads(approval.request))
    if not (recomputed == stored == approval.request_hash):
        raise ApprovalMismatch(
            f"approval {approval.id} no longer matches the request recorded for run"
            f" {approval.run_id} step {approval.step}: the record was changed"
        )
    if expected_hash is not None and expected_hash != approval.request_hash:
        raise ApprovalMismatch(
            f"approval {approval.id} is for request {approval.request_hash[:16]}…, not the"
            f" {expected_hash[:16]}… you were shown"
        )


def approve(
    store: Store,
    run_id: str,
    approval_id: str,
    by: str,
    reason: str = "",
    *,
    expected_hash: str | None = None,
    now: datetime | None = None,
    operator: OperatorKey | None = None,
    scope: str | None = None,
    app_session: str | None = None,
) -> ApprovalView:
    """Grant a pending approval. The gate runs the request, once, when a session attaches.
    ``scope`` (``15min``, ``1h``, ``app`` with the app's ``app_session``): also allow this
    exact call, without asking, for that long (rule 6)."""
    return _decide(store, run_id, approval_id, "approved", by, reason, expected_hash, now,
                   operator, scope, app_session)  # fmt: skip


def reject(
    store: Store,
    run_id: str,
    approval_id: str,
    by: str,
    reason: str = "",
    *,
    expected_hash: str | None = None,
    now: datetime | None = None,
    operator: OperatorKey | None = None,
) -> ApprovalView:
    """Refuse a pending approval; the run ends, cancelled, and the request does not run (again,
    for an interrupted one: it may have run before)."""
    return _decide(store, run_id, approval_id, "rejected", by, reason, expected_hash, now,
                   operator)  # fmt: skip


def _decide(
    store: Store,
    run_id: str,
    approval_id: str,
    status: str,
    by: str,
    reason: str,
    expected_hash: str | None,
    now: datetime | None,
    operator: OperatorKey | None,
    scope: str | None = None,
    app_session: str | None = None,
) -> ApprovalView:
    at = format_time(now or datetime.now(UTC))
    # The key is read before the transaction: no keyring call waits inside the write lock.
    key = (operator or operator_key.default()).key_for_signing(store)
    with store.transaction() as tx:
        approval = read_approval(tx.conn, approval_id)
        if approval is None or approval.run_id != run_id:
            raise UnknownApproval(f"run {run_id} has no approval {approval_id}")
        if approval.status != "pending":
            raise ApprovalNotPending(f"approval {approval_id} is already {approval.status}")
        step = read_step(tx.conn, run_id, approval.step)
        if step is None:
            raise ApprovalMismatch(f"approval {approval_id} names a step that is not recorded")
        check_binding(approval, step, expected_hash)
        if scope is not None:
            grants.check_scope(scope, approval.kind, app_session)
        signed = operator_key.signature(key, store.database_id, approval, status=status, by=by,
                                        at=at, reason=reason)  # fmt: skip
        if signed.mac is not None and operator_key.keyed_at(tx.conn) is None:
            keyed: dict[str, JSONValue] = {"key": signed.key}
            keyring = (operator or operator_key.default()).keys.keyring()
            if keyring is not None:  # which keyring holds the key (core/operator_key rule 6)
                keyed["keyring"] = keyring
            transitions.record_config_change(tx, operator_key.KEYED, keyed, at=at)
        transitions.decide_approval(tx, approval, status=status, by=by, reason=reason, at=at,
                                    signed=signed)  # fmt: skip
        if scope is not None:
            grants.make(tx, store.database_id, key, approval, scope=scope,
                        app_session=app_session, by=by, at=at, reason=reason)  # fmt: skip
        if status == "rejected" and approval.kind == "interrupted_side_effect":
            # Its call may have run: the operator chose not to repeat it (core.effects rule 3).
            transitions.finish_step(
                tx, run_id, approval.step, status="failed", active_seconds=0.0, at=at,
                observation=effects.not_repeated_observation(by, reason),
            )  # fmt: skip
            transitions.end_run(tx, run_id, status="CANCELLED", reason=effects.NOT_REPEATED,
                                at=at)  # fmt: skip
        elif status == "rejected":
            transitions.finish_step(
                tx, run_id, approval.step, status="failed", active_seconds=0.0, at=at,
                observation={"error": "rejected", "by": by, "reason": reason},
            )  # fmt: skip
            transitions.end_run(tx, run_id, status="CANCELLED", reason="rejected", at=at)
        decided = read_approval(tx.conn, approval_id)
    if decided is None:  # read back inside the transaction that wrote it: cannot happen
        raise UnknownApproval(f"run {run_id} has no approval {approval_id}")
    wake.wake(status)  # after the commit: the woken read the decision (rule 6)
    return decided
