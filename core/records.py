"""Read-only views of the state tables, as the gate, the CLI and the app read them.

Views are frozen copies: changing one changes nothing in the store or in a session.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core import canonical
from core.limits import Limits
from core.policy.meaning import Reading
from core.policy.policy import read_from_json

RUN_COLUMNS = (
    "id, goal, status, end_reason, result, limits, step_count, consecutive_failures,"
    " active_seconds, lease_owner, lease_expires_at, created_at, updated_at"
)
STEP_COLUMNS = (
    "run_id, idx, status, decision, origin, tool_name, tool_spec_hash, arguments,"
    " request_hash, observation, started_at, ended_at"
)
APPROVAL_COLUMNS = (
    "id, run_id, step_idx, kind, request, request_hash, status, policy_reason, created_at,"
    " decided_by, decided_reason, decided_at"
)

TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED"})


@dataclass(frozen=True)
class RunView:
    id: str
    goal: str
    status: str
    end_reason: str | None
    result: str | None  # canonical JSON text
    limits: Limits
    step_count: int
    consecutive_failures: int
    active_seconds: float
    lease_owner: str | None
    lease_expires_at: float | None
    created_at: str
    updated_at: str

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> RunView:
        values = list(row)
        values[5] = _limits(values[5])
        return cls(*values)


@dataclass(frozen=True)
class StepView:
    run_id: str
    index: int
    status: str
    decision: str | None  # the decision as proposed, verbatim (JSON text)
    origin: str | None
    tool: str | None
    tool_spec_hash: str | None
    arguments: str | None  # canonical JSON text
    request_hash: str | None
    observation: str | None  # canonical JSON text
    started_at: str
    ended_at: str | None


@dataclass(frozen=True)
class ApprovalView:
    id: str
    run_id: str
    step: int
    kind: str
    request: str  # the canonical request the hash is over
    request_hash: str
    status: str
    policy_reason: str | None
    created_at: str
    decided_by: str | None
    decided_reason: str | None
    decided_at: str | None


@functools.lru_cache(maxsize=64)
def _limits(text: str) -> Limits:
    """Limits are read with every run and rarely differ: parse each stored text once."""
    return Limits.from_json(canonical.loads(text))


def read_run(conn: sqlite3.Connection, run_id: str) -> RunView | None:
    row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else RunView.from_row(row)


def read_steps(conn: sqlite3.Connection, run_id: str) -> tuple[StepView, ...]:
    rows = conn.execute(
        f"SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY idx", (run_id,)
    ).fetchall()
    return tuple(StepView(*row) for row in rows)


def read_steps_from(conn: sqlite3.Connection, run_id: str, first: int) -> tuple[StepView, ...]:
    """The run's steps from index ``first`` on."""
    rows = conn.execute(
        f"SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? AND idx >= ? ORDER BY idx",
        (run_id, first),
    ).fetchall()
    return tuple(StepView(*row) for row in rows)


def read_step(conn: sqlite3.Connection, run_id: str, index: int) -> StepView | None:
    row = conn.execute(
        f"SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? AND idx = ?", (run_id, index)
    ).fetchone()
    return None if row is None else StepView(*row)


def read_approval(conn: sqlite3.Connection, approval_id: str) -> ApprovalView | None:
    row = conn.execute(
        f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)
    ).fetchone()
    return None if row is None else ApprovalView(*row)


def latest_approval(conn: sqlite3.Connection, run_id: str, index: int) -> ApprovalView | None:
    row = conn.execute(
        f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? AND step_idx = ?"
        " ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (run_id, index),
    ).fetchone()
    return None if row is None else ApprovalView(*row)


def pending_approvals(conn: sqlite3.Connection) -> tuple[ApprovalView, ...]:
    rows = conn.execute(
        f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = 'pending'"
        " ORDER BY created_at, rowid"
    ).fetchall()
    return tuple(ApprovalView(*row) for row in rows)


@dataclass(frozen=True)
class PendingRequest:
    """A request waiting for the operator, with what is needed to show and decide it."""

    id: str
    run_id: str
    server: str | None
    tool: str | None
    arguments: str  # canonical JSON text
    request_hash: str
    kind: str
    side_effect: str | None
    created_at: str
    reason: str
    description: str
    fixed: str = "{}"  # canonical JSON: the values Signoff sets on the call (``fixed_values``)
    # What the request's paths and URLs mean where their spelling says otherwise, as the policy
    # read them when it asked (``PolicyDecision.read``, core/policy/meaning.py rule 8).
    read: tuple[Reading, ...] = ()
    cwd: str = ""  # the folder the policy read relative paths against (``PolicyDecision.cwd``)
    host: str = ""  # the host that made the call, for people (its run's label; "" for none)


def fixed_values(spec: Any) -> str:
    """The values the operator fixed for a tool, as canonical JSON text (``{}`` for none), from
    its recorded spec: the proxy adds them to every call of the tool, and binds them into the
    spec hash (core/proxy/server.py rule 1), so they are what the approval was given with."""
    schema = spec.get("input_schema") if isinstance(spec, dict) else None
    mark = schema.get("x-signoff") if isinstance(schema, dict) else None
    fixed = mark.get("fixed") if isinstance(mark, dict) else None
    return canonical.dumps_text(fixed) if isinstance(fixed, dict) and fixed else "{}"


def pending_requests(conn: sqlite3.Connection) -> list[PendingRequest]:
    """Every pending approval of a waiting run, oldest first (the CLI, the proxy's status tool
    and the tray app all read them here)."""
    rows = conn.execute(
        "SELECT a.id, a.run_id, r.server, COALESCE(r.tool, s.tool_name), s.arguments,"
        " a.request_hash, a.kind, t.spec, a.created_at, COALESCE(a.policy_reason, ''),"
        " (SELECT json_extract(e.payload, '$.decision') FROM events e"
        "  WHERE e.run_id = a.run_id AND e.kind = 'step.policy' ORDER BY e.seq DESC LIMIT 1),"
        " CASE WHEN r.host IS NULL THEN '' ELSE COALESCE((SELECT json_extract(e.payload,"
        "  '$.call.host.label') FROM events e WHERE e.run_id = a.run_id"
        "  AND e.kind = 'run.started' ORDER BY e.seq LIMIT 1), '') END"
        " FROM approvals a JOIN runs r ON r.id = a.run_id"
        " JOIN steps s ON s.run_id = a.run_id AND s.idx = a.step_idx"
        " LEFT JOIN tool_specs t ON t.hash = s.tool_spec_hash"
        " WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'"
        " ORDER BY a.created_at, a.rowid"
    ).fetchall()
    found = []
    for row in rows:
        spec = canonical.loads(row[7]) if row[7] else {}
        spec = spec if isinstance(spec, dict) else {}
        side_effect = spec.get("side_effect")
        found.append(
            PendingRequest(
                row[0],
                row[1],
                row[2],
                row[3],
                row[4] or "{}",
                row[5],
                row[6],
                side_effect if isinstance(side_effect, str) else None,
                row[8],
                row[9],
                str(spec.get("description", "")),
                fixed_values(spec),
                *_read_and_cwd(row[10]),
                row[11],
            )
        )
    return found


def _read_and_cwd(decision: str | None) -> tuple[tuple[Reading, ...], str]:
    """What the policy read the request's values as, and from which folder."""
    value = canonical.loads(decision) if decision else {}
    if not isinstance(value, dict):
        return (), ""
    return read_from_json(value.get("read")), str(value.get("cwd") or "")


def decided_by_rule(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Per run, the last rule on the arguments (core/policy/rules.py) that decided one of its policy
    evaluations: its id, and "allowed" or "rejected" (as the history says "allowed by rule
    R..."). A run no rule decided is not in it."""
    found: dict[str, tuple[str, str]] = {}
    for run_id, rule, outcome in conn.execute(
        "SELECT run_id, json_extract(payload, '$.decision.rule'),"
        " json_extract(payload, '$.decision.outcome') FROM events"
        " WHERE kind = 'step.policy' AND run_id IN (SELECT value FROM json_each(?))"
        " AND json_extract(payload, '$.decision.rule') IS NOT NULL ORDER BY seq",
        (json.dumps(list(run_ids)),),
    ):
        found[str(run_id)] = (str(rule), "allowed" if outcome == "allow" else "rejected")
    return found
