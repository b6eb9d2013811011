"""Every state change of a run, each with its audit events, inside the caller's transaction.

This module is the one place that writes runs, steps and approvals (model calls:
core/model_record.py). Each function changes the state tables and appends the event that
explains the change, in the same transaction, so the log and the state cannot disagree (a
completeness test holds every committed transaction to at least one event; a consistency test
rebuilds each run's state from its events).

Events and what they mean (the payloads are what the consistency fold reads):

- ``run.started``      {goal, limits, call?}             run RUNNING (call: server, tool, key,
                                                         host, the roots in force)
- ``run.collected``    {}                                its outcome first handed back to a host
- ``run.resumed``      {}                                a waiting run RUNNING again, nothing run
- ``run.takeover``     {previous_owner}                  an expired lease taken over
- ``run.ended``        {status, reason, result}          run terminal
- ``step.started``     {}                                step deciding
- ``step.decided``     {decision}                        the decision, verbatim
- ``step.policy``      {request, decision, policy}       an evaluation, re-checkable
- ``approval.requested`` {approval, kind, hash, reason}  step pending, run WAITING_FOR_APPROVAL
- ``approval.decided`` {approval, status, by, reason, request_hash, key, mac}
                                                         approved / rejected, signed (key and
                                                         mac null when unauthenticated)
- ``approval.closed``  {approval, status}                superseded / expired
- ``step.tool_started`` {request, request_hash, approval} step executing, run RUNNING
- ``step.observed``    {status, observation}             step done / failed / denied
- ``step.interrupted`` {}                                a step abandoned, run on without it
- ``step.reconciled``  {answer}                          what a reconcile hook said (no change)

Events of no run (the operator's configuration; no state table changes):

- ``policy.changed``   {before, after, policy, by}       the rules' identity changed
- ``operator.unauthenticated`` {by, reason}            decisions are no longer signed
- ``operator.authenticated``   {by}                    they are signed again
- ``operator.keyed``   {key, keyring}                    the first signed decision follows
- ``keyring.used``     {keyring, by}                     the operator confirmed another keyring
- ``config.recorded``  {text, sha256, by, why, key, mac}  the configuration in force
                                                         (core/proxy/config_record.py)
- ``results.pruned``   {runs, kept_days}                 whole large results no re-call took
                                                         (core/kept_results.py)
- ``elicitation.asked`` {server, host, mode, message_sha256, outcome, fields}
                                                         a server asked the user; the action,
                                                         never what was typed (core/proxy/asks.py)
- ``sampling.asked``   {server, host, request_sha256, request_bytes, outcome, why?}
                                                         a server asked the host's model:
                                                         forwarded (recorded first) or refused
- ``sampling.answered`` {server, request_sha256, outcome, answer_sha256?}  what came back
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import canonical
from core.canonical import JSONValue
from core.limits import Limits
from core.operator_key import Signature
from core.records import ApprovalView, RunView
from core.store import Transaction


@dataclass(frozen=True)
class CallLabel:
    """A proxy call a run is for: the server, the tool, the call key (the same for every host),
    the host that made it (its id, and a label for people; core/proxy/host_identity.py), and
    the roots the host had last given the server (None: the server never asked for them)."""

    server: str
    tool: str
    key: str
    host: str | None = None
    host_label: str | None = None
    roots: JSONValue = None


def start_run(
    tx: Transaction,
    *,
    run_id: str,
    goal: str,
    limits: Limits,
    owner: str,
    expires: float,
    at: str,
    call: CallLabel | None = None,
) -> None:
    server, tool, call_key = (call.server, call.tool, call.key) if call else (None, None, None)
    host = call.host if call else None
    tx.execute(
        "INSERT INTO runs (id, goal, status, limits, lease_owner, lease_expires_at, created_at,"
        " updated_at, server, tool, call_key, host)"
        " VALUES (?, ?, 'RUNNING', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, goal, canonical.dumps_text(limits.as_json()), owner, expires, at, at,
         server, tool, call_key, host),
    )  # fmt: skip
    payload: dict[str, JSONValue] = {"goal": goal, "limits": limits.as_json()}
    if call:
        label: dict[str, JSONValue] = {"server": server, "tool": tool, "key": call_key}
        if host is not None:
            label["host"] = {"id": host, "label": call.host_label or ""}
        if call.roots is not None:
            label["roots"] = call.roots
        payload["call"] = label
    tx.append_event(kind="run.started", payload=payload, at=at, run_id=run_id)


def collect(tx: Transaction, run_id: str, *, at: str) -> bool:
    """The run's outcome was handed back to the host that made the call: recorded the first
    time only (several proxies of that host, a restarted one among them, may each hand it
    back)."""
    handed = tx.execute(
        "UPDATE runs SET collected_at = ? WHERE id = ? AND collected_at IS NULL", (at, run_id)
    ).rowcount
    if handed:
        tx.append_event(kind="run.collected", payload={}, at=at, run_id=run_id)
    return bool(handed)


def resume_run(tx: Transaction, run: RunView, *, owner: str, expires: float, at: str) -> None:
    _set_run(tx, run.id, at, status="RUNNING", lease_owner=owner, lease_expires_at=expires)
    tx.append_event(kind="run.resumed", payload={}, at=at, run_id=run.id)


def take_over(tx: Transaction, run: RunView, *, owner: str, expires: float, at: str) -> None:
    _set_run(tx, run.id, at, lease_owner=owner, lease_expires_at=expires)
    tx.append_event(
        kind="run.takeover", payload={"previous_owner": run.lease_owner}, at=at, run_id=run.id
    )


def end_run(
    tx: Transaction, run_id: str, *, status: str, reason: str, at: str, result: str | None = None
) -> None:
    _set_run(
        tx, run_id, at, status=status, end_reason=reason, result=result,
        lease_owner=None, lease_expires_at=None,
    )  # fmt: skip
    payload = {
        "status": status,
        "reason": reason,
        "result": None if result is None else canonical.loads(result),
    }
    tx.append_event(kind="run.ended", payload=payload, at=at, run_id=run_id)


def start_step(tx: Transaction, run_id: str, index: int, *, at: str) -> None:
    tx.execute(
        "INSERT INTO steps (run_id, idx, status, started_at) VALUES (?, ?, 'deciding', ?)",
        (run_id, index, at),
    )
    tx.execute(
        "UPDATE runs SET step_count = step_count + 1, updated_at = ? WHERE id = ?", (at, run_id)
    )
    tx.append_event(kind="step.started", payload={}, at=at, run_id=run_id, step=index)


def record_decision(
    tx: Transaction, run_id: str, index: int, *, decision: dict[str, JSONValue], at: str
) -> None:
    origin = decision.get("origin")
    tx.execute(
        "UPDATE steps SET decision = ?, origin = ? WHERE run_id = ? AND idx = ?",
        (canonical.dumps_text(decision), origin, run_id, index),
    )
    tx.append_event(
        kind="step.decided", payload={"decision": decision}, at=at, run_id=run_id, step=index
    )


def record_request(
    tx: Transaction,
    run_id: str,
    index: int,
    *,
    tool: str,
    spec_hash: str,
    spec_text: str,
    arguments: str,
    request_hash: str,
    at: str,
) -> None:
    """The step's canonical request (no event: it is written with the event of its outcome)."""
    tx.execute(
        "INSERT OR IGNORE INTO tool_specs (hash, name, spec, created_at) VALUES (?, ?, ?, ?)",
        (spec_hash, tool, spec_text, at),
    )
    tx.execute(
        "UPDATE steps SET tool_name = ?, tool_spec_hash = ?, arguments = ?, request_hash = ?"
        " WHERE run_id = ? AND idx = ?",
        (tool, spec_hash, arguments, request_hash, run_id, index),
    )


def record_policy(
    tx: Transaction,
    run_id: str,
    index: int,
    *,
    request: JSONValue,
    decision: dict[str, JSONValue],
    policy: str | None,
    at: str,
) -> None:
    """``request``: the policy request's value (``PolicyRequest.recorded``)."""
    payload = {"request": request, "decision": decision, "policy": policy}
    tx.append_event(kind="step.policy", payload=payload, at=at, run_id=run_id, step=index)


def finish_step(
    tx: Transaction,
    run_id: str,
    index: int,
    *,
    status: str,
    observation: dict[str, JSONValue],
    active_seconds: float,
    at: str,
) -> None:
    """End a step: done resets the consecutive failures, failed and denied count one more."""
    text = canonical.dumps_text(observation)
    tx.execute(
        "UPDATE steps SET status = ?, observation = ?, ended_at = ? WHERE run_id = ? AND idx = ?",
        (status, text, at, run_id, index),
    )
    failures = "0" if status == "done" else "consecutive_failures + 1"
    tx.execute(
        f"UPDATE runs SET consecutive_failures = {failures},"  # noqa: S608  # one of two constants
        " active_seconds = active_seconds + ?, updated_at = ? WHERE id = ?",
        (active_seconds, at, run_id),
    )
    tx.append_event(
        kind="step.observed",
        payload={"status": status, "observation": observation},
        at=at,
        run_id=run_id,
        step=index,
    )


def record_reconciled(
    tx: Transaction, run_id: str, index: int, *, answer: dict[str, JSONValue] | None, at: str
) -> None:
    """What a reconcile hook answered about an interrupted call (the change follows)."""
    tx.append_event(
        kind="step.reconciled", payload={"answer": answer}, at=at, run_id=run_id, step=index
    )


def interrupt_step(tx: Transaction, run_id: str, index: int, *, at: str) -> None:
    tx.execute(
        "UPDATE steps SET status = 'interrupted', ended_at = ? WHERE run_id = ? AND idx = ?",
        (at, run_id, index),
    )
    tx.append_event(kind="step.interrupted", payload={}, at=at, run_id=run_id, step=index)


def request_approval(
    tx: Transaction,
    run_id: str,
    index: int,
    *,
    approval_id: str,
    kind: str,
    request: str,
    request_hash: str,
    reason: str,
    active_seconds: float,
    at: str,
) -> None:
    """Pause the run on a pending approval bound to ``request_hash``; the lease is released."""
    tx.execute(
        "INSERT INTO approvals (id, run_id, step_idx, kind, request, request_hash, status,"
        " policy_reason, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
        (approval_id, run_id, index, kind, request, request_hash, reason, at),
    )
    tx.execute("UPDATE steps SET status = 'pending' WHERE run_id = ? AND idx = ?", (run_id, index))
    tx.execute(
        "UPDATE runs SET active_seconds = active_seconds + ? WHERE id = ?",
        (active_seconds, run_id),
    )
    _set_run(tx, run_id, at, status="WAITING_FOR_APPROVAL", lease_owner=None, lease_expires_at=None)
    tx.append_event(
        kind="approval.requested",
        payload={"approval": approval_id, "kind": kind, "hash": request_hash, "reason": reason},
        at=at,
        run_id=run_id,
        step=index,
    )


def decide_approval(
    tx: Transaction,
    approval: ApprovalView,
    *,
    status: str,
    by: str,
    reason: str,
    at: str,
    signed: Signature,
) -> None:
    tx.execute(
        "UPDATE approvals SET status = ?, decided_by = ?, decided_reason = ?, decided_at = ?"
        " WHERE id = ?",
        (status, by, reason, at, approval.id),
    )
    tx.append_event(
        kind="approval.decided",
        payload={
            "approval": approval.id,
            "status": status,
            "by": by,
            "reason": reason,
            "request_hash": approval.request_hash,
            "key": signed.key,
            "mac": signed.mac,
        },
        at=at,
        run_id=approval.run_id,
        step=approval.step,
    )


def close_approval(tx: Transaction, approval: ApprovalView, *, status: str, at: str) -> None:
    """An approval that will never be used: ``superseded`` or ``expired``."""
    tx.execute("UPDATE approvals SET status = ? WHERE id = ?", (status, approval.id))
    tx.append_event(
        kind="approval.closed",
        payload={"approval": approval.id, "status": status},
        at=at,
        run_id=approval.run_id,
        step=approval.step,
    )


def start_tool(
    tx: Transaction,
    run_id: str,
    index: int,
    *,
    request: dict[str, JSONValue],
    request_hash: str,
    approval_id: str | None,
    owner: str,
    expires: float,
    at: str,
) -> None:
    """The write that starts a side effect: step executing, run RUNNING under this lease."""
    tx.execute(
        "UPDATE steps SET status = 'executing' WHERE run_id = ? AND idx = ?", (run_id, index)
    )
    if approval_id is not None:
        tx.execute("UPDATE approvals SET status = 'consumed' WHERE id = ?", (approval_id,))
    _set_run(tx, run_id, at, status="RUNNING", lease_owner=owner, lease_expires_at=expires)
    tx.append_event(
        kind="step.tool_started",
        payload={"request": request, "request_hash": request_hash, "approval": approval_id},
        at=at,
        run_id=run_id,
        step=index,
    )


def record_config_change(tx: Transaction, kind: str, payload: JSONValue, *, at: str) -> None:
    """An event of no run: a change to the operator's configuration."""
    if kind not in (
        "policy.changed",
        "operator.unauthenticated",
        "operator.authenticated",
        "operator.keyed",
        "keyring.used",
        "config.recorded",
    ):
        raise ValueError(f"{kind!r} is not a configuration event")
    tx.append_event(kind=kind, payload=payload, at=at)


def _set_run(tx: Transaction, run_id: str, at: str, **columns: Any) -> None:
    assignments = ", ".join(f"{name} = ?" for name in columns)
    tx.execute(
        f"UPDATE runs SET {assignments}, updated_at = ? WHERE id = ?",  # noqa: S608  # names are ours
        (*columns.values(), at, run_id),
    )
