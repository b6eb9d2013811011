"""The state tables rebuilt from the events alone, and compared with what the tables say.

Rules:

1. Every run, step, approval and model call row must be what its events make it
   (core/transitions.py and core/model_record.py list them): a run's status, end reason,
   result, step count and failure count; a step's status, decision and observation; an
   approval's status, kind, request hash, and who decided it, why and when; a model call's
   status, tokens and cost. A row no event made, or an event's row that is missing, disagrees
   too.
2. Every approval decided (approved, rejected, consumed) has exactly one ``approval.decided``
   event, naming its request hash and authenticated by the operator key (core/operator_key.py);
   unsigned only when the operator had chosen unauthenticated decisions before it, and never
   after ``operator.keyed`` (the first signed decision). A decision
   recorded before decisions were signed (its event has no ``mac`` at all: a database older
   than the operator key) is accepted only before the first signed one; no grant ever runs on
   it (core/operator_key.py rule 3).
3. The first row that disagrees raises ``StateDisagrees`` naming it; nothing is changed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from core import canonical, model_record
from core.errors import JSONRefused, OperatorKeyUnavailable, StateDisagrees
from core.operator_key import OperatorKey, decision_fields, key_id, mac, mac_matches
from core.records import read_approval
from core.store import Store

NO_RUN_KINDS = (
    "policy.changed",
    "operator.unauthenticated",
    "operator.authenticated",
    "operator.keyed",
    "keyring.used",
    "config.recorded",
    "results.pruned",
    "elicitation.asked",  # core/proxy/asks.py
    "sampling.asked",
    "sampling.answered",
)


def rebuild(conn: sqlite3.Connection) -> dict[str, Any]:
    """The state of every run, approval and step, from the events alone (rule 1)."""
    runs: dict[str, dict[str, Any]] = {}
    steps: dict[tuple[str, int], dict[str, Any]] = {}
    approvals: dict[str, dict[str, Any]] = {}
    decided: dict[str, list[tuple[int, dict[str, Any], str]]] = {}
    models: dict[tuple[str, int], dict[str, Any]] = {}  # core/model_record.py
    rows = conn.execute("SELECT seq, run_id, step_idx, kind, payload, at FROM events ORDER BY seq")
    unauthenticated = False  # the operator's mode as the chain went (core/operator_key rule 4)
    signing = False  # a decision in the signed form was seen (unsigned legacy ones precede it)
    keyed = False  # the first signed decision was recorded (operator.keyed)
    for seq, run_id, idx, kind, text, at in rows:
        try:
            p = canonical.loads(text)
        except JSONRefused:
            raise StateDisagrees(
                f"event {seq} has no readable payload", row=f"event {seq}"
            ) from None
        if not isinstance(p, dict):
            raise StateDisagrees(f"event {seq}'s payload is not an object", row=f"event {seq}")
        if run_id is None and kind in NO_RUN_KINDS[1:3]:
            unauthenticated = kind == "operator.unauthenticated"
        if run_id is None and kind == "operator.keyed":
            keyed = True
        legacy = kind == "approval.decided" and "mac" not in p
        if legacy and signing:
            raise StateDisagrees(
                f"event {seq} decides approval {p.get('approval')} in the form of decisions made"
                " before decisions were signed, after signed ones: nobody made it",
                row=f"event {seq}",
            )
        if kind == "approval.decided" and not legacy:
            signing = True
        unsigned = kind == "approval.decided" and not legacy and p.get("mac") is None
        if unsigned and keyed:
            raise StateDisagrees(
                f"event {seq} decides approval {p.get('approval')} unsigned, after this database"
                " signed its decisions: nobody made it",
                row=f"event {seq}",
            )
        if (
            kind == "approval.decided"
            and not legacy
            and p.get("mac") is None
            and not unauthenticated
        ):
            raise StateDisagrees(
                f"event {seq} decides approval {p.get('approval')} unsigned, and the operator"
                " had not chosen unauthenticated decisions: nobody made it",
                row=f"event {seq}",
            )
        try:
            if kind in model_record.KINDS:
                model_record.fold(models, runs, run_id, idx, kind, p)
            else:
                _fold(runs, steps, approvals, decided, seq, run_id, idx, kind, p, at)
        except (KeyError, TypeError) as e:
            raise StateDisagrees(
                f"event {seq} ({kind}) does not follow from the events before it ({e!r})",
                row=f"event {seq}",
            ) from None
    return {"runs": runs, "steps": steps, "approvals": approvals, "decided": decided,
            "model_calls": models}  # fmt: skip


def _fold(
    runs: dict[str, dict[str, Any]],
    steps: dict[tuple[str, int], dict[str, Any]],
    approvals: dict[str, dict[str, Any]],
    decided: dict[str, list[tuple[int, dict[str, Any], str]]],
    seq: int, run_id: str | None, idx: int | None, kind: str, p: dict[str, Any], at: str,
) -> None:  # fmt: skip
    if run_id is None:  # an event of no run (the operator's configuration): no state
        if kind not in NO_RUN_KINDS:
            raise KeyError(kind)
        return
    if kind == "run.started":
        runs[run_id] = dict(status="RUNNING", end_reason=None, result=None, step_count=0,
                            failures=0)  # fmt: skip
        return
    run = runs[run_id]
    if kind == "run.resumed":
        run["status"] = "RUNNING"
    elif kind == "run.ended":
        run.update(status=p["status"], end_reason=p["reason"], result=p["result"])
    elif kind == "step.started":
        steps[(run_id, idx)] = {"status": "deciding", "decision": None, "observation": None}  # type: ignore[index]
        run["step_count"] += 1
    elif kind == "step.decided":
        steps[(run_id, idx)]["decision"] = p["decision"]  # type: ignore[index]
    elif kind == "approval.requested":
        steps[(run_id, idx)]["status"] = "pending"  # type: ignore[index]
        run["status"] = "WAITING_FOR_APPROVAL"
        approvals[p["approval"]] = {"status": "pending", "kind": p["kind"], "hash": p["hash"],
                                    "by": None, "reason": None, "at": None}  # fmt: skip
    elif kind == "approval.decided":
        if approvals[p["approval"]]["status"] != "pending":  # decided once, while it waited
            raise KeyError(
                f"approval {p['approval']} decided while {approvals[p['approval']]['status']}"
            )
        approvals[p["approval"]].update(status=p["status"], by=p["by"], reason=p["reason"],
                                        at=at)  # fmt: skip
        decided.setdefault(p["approval"], []).append((seq, p, at))
    elif kind == "approval.closed":
        approvals[p["approval"]]["status"] = p["status"]
    elif kind == "step.tool_started":
        steps[(run_id, idx)]["status"] = "executing"  # type: ignore[index]
        run["status"] = "RUNNING"
        if p["approval"] is not None:
            if approvals[p["approval"]]["status"] != "approved":  # a grant is used once
                raise KeyError(
                    f"approval {p['approval']} used while {approvals[p['approval']]['status']}"
                )
            approvals[p["approval"]]["status"] = "consumed"
    elif kind == "step.observed":
        steps[(run_id, idx)].update(status=p["status"], observation=p["observation"])  # type: ignore[index]
        run["failures"] = 0 if p["status"] == "done" else run["failures"] + 1
    elif kind == "step.interrupted":
        steps[(run_id, idx)]["status"] = "interrupted"  # type: ignore[index]
    elif kind not in (
        "run.takeover",
        "run.collected",
        "step.reconciled",
        "step.policy",
        "grant.made",
        "grant.revoked",
    ):  # a grant's state is its own (core/grants)
        raise KeyError(kind)


def check_state(store: Store, operator: OperatorKey | None) -> int:
    """Raise ``StateDisagrees`` for the first row the events do not make (rules 1-3); the
    number of decisions whose MAC was checked. ``operator`` None checks no MAC (no keyring):
    a decision must then still have its one event."""
    with store.snapshot() as conn:
        rebuilt = rebuild(conn)
        _compare_runs(conn, rebuilt["runs"])
        _compare_steps(conn, rebuilt["steps"])
        _compare_approvals(conn, rebuilt["approvals"])
        model_record.compare(conn, rebuilt["model_calls"])
        return _check_decisions(conn, store.database_id, rebuilt["decided"], operator)


def _loads(text: str | None) -> Any:
    return None if text is None else canonical.loads(text)


def _compare_runs(conn: sqlite3.Connection, runs: dict[str, dict[str, Any]]) -> None:
    rows = conn.execute(
        "SELECT id, status, end_reason, result, step_count, consecutive_failures FROM runs"
        " ORDER BY created_at, rowid"
    ).fetchall()
    for run_id, status, reason, result, count, failures in rows:
        run = runs.get(run_id)
        if run is None:
            raise StateDisagrees(f"run {run_id} has no run.started event", row=f"runs {run_id}")
        found = (status, reason, _loads(result), count, failures)
        made = (run["status"], run["end_reason"], run["result"], run["step_count"],
                run["failures"])  # fmt: skip
        if found != made:
            raise StateDisagrees(
                f"run {run_id} is recorded as {status} ({reason}), but its events make it"
                f" {run['status']} ({run['end_reason']})" if found[:2] != made[:2] else
                f"run {run_id}'s result or step counts are not what its events make them",
                row=f"runs {run_id}",
            )  # fmt: skip
    if len(rows) != len(runs):
        missing = sorted(set(runs) - {r[0] for r in rows})
        raise StateDisagrees(f"run {missing[0]} has events but no row", row=f"runs {missing[0]}")


def _compare_steps(conn: sqlite3.Connection, steps: dict[tuple[str, int], dict[str, Any]]) -> None:
    rows = conn.execute(
        "SELECT run_id, idx, status, decision, observation FROM steps ORDER BY run_id, idx"
    ).fetchall()
    for run_id, idx, status, decision, observation in rows:
        step = steps.get((run_id, idx))
        where = f"steps {run_id}/{idx}"
        if step is None:
            raise StateDisagrees(f"step {idx} of run {run_id} has no step.started event", row=where)
        if status != step["status"]:
            raise StateDisagrees(
                f"step {idx} of run {run_id} is recorded as {status}, but its events make it"
                f" {step['status']}",
                row=where,
            )
        if (_loads(decision), _loads(observation)) != (step["decision"], step["observation"]):
            raise StateDisagrees(
                f"step {idx} of run {run_id}: its decision or outcome is not what its events"
                " recorded",
                row=where,
            )
    if len(rows) != len(steps):
        run_id, idx = sorted(set(steps) - {(r[0], r[1]) for r in rows})[0]
        raise StateDisagrees(f"step {idx} of run {run_id} has events but no row",
                             row=f"steps {run_id}/{idx}")  # fmt: skip


def _compare_approvals(conn: sqlite3.Connection, approvals: dict[str, dict[str, Any]]) -> None:
    rows = conn.execute(
        "SELECT id, status, kind, request_hash, decided_by, decided_reason, decided_at"
        " FROM approvals ORDER BY created_at, rowid"
    ).fetchall()
    for approval_id, status, kind, request_hash, by, reason, at in rows:
        made = approvals.get(approval_id)
        where = f"approvals {approval_id}"
        if made is None:
            raise StateDisagrees(
                f"approval {approval_id} has no approval.requested event", row=where
            )
        if status != made["status"]:
            raise StateDisagrees(
                f"approval {approval_id} is recorded as {status}, but its events make it"
                f" {made['status']}",
                row=where,
            )
        if (kind, request_hash) != (made["kind"], made["hash"]):
            raise StateDisagrees(
                f"approval {approval_id}'s kind or request hash is not the one requested",
                row=where,
            )
        if (by, reason, at) != (made["by"], made["reason"], made["at"]):
            raise StateDisagrees(
                f"approval {approval_id} names another decider, reason or time than its"
                " decision event",
                row=where,
            )
    if len(rows) != len(approvals):
        missing = sorted(set(approvals) - {r[0] for r in rows})[0]
        raise StateDisagrees(f"approval {missing} has events but no row",
                             row=f"approvals {missing}")  # fmt: skip


def _check_decisions(
    conn: sqlite3.Connection,
    database_id: str,
    decided: dict[str, list[tuple[int, dict[str, Any], str]]],
    operator: OperatorKey | None,
) -> int:
    checked = 0
    key: bytes | None = None
    if operator is not None:
        try:
            key = operator.key(database_id)
        except OperatorKeyUnavailable:
            key = None
    for approval_id, events in decided.items():
        where = f"approvals {approval_id}"
        if len(events) != 1:
            raise StateDisagrees(f"approval {approval_id} was decided {len(events)} times",
                                 row=where)  # fmt: skip
        seq, p, at = events[0]
        approval = read_approval(conn, approval_id)
        if approval is None:  # compared above: cannot happen
            raise StateDisagrees(f"approval {approval_id} has no row", row=where)
        if "mac" not in p:
            continue  # made before decisions were signed (rebuild checked it came first)
        if p.get("request_hash") != approval.request_hash:
            raise StateDisagrees(
                f"approval {approval_id}'s decision (event {seq}) names another request",
                row=where,
            )
        sent = p.get("mac")
        if sent is None or key is None:
            continue  # unauthenticated: what verify reports of the mode says so
        fields = decision_fields(database_id, approval, status=p["status"], by=p["by"], at=at,
                                 reason=p["reason"])  # fmt: skip
        if p.get("key") != key_id(key) or not mac_matches(sent, mac(key, fields)):
            raise StateDisagrees(
                f"approval {approval_id}'s decision (event {seq}) is not authenticated by this"
                " database's operator key: nobody made it",
                row=where,
            )
        checked += 1
    return checked
