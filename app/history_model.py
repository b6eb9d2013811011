"""The history window's data: runs read a page at a time in SQL, and one run's details.

See app/history.py and docs/decisions/0014; no widget here but the table model. A run whose
policy read a value as meaning other than it says (``PolicyDecision.read``) shows it beside
the tool, spelling and meaning (``app.model.meaning``), and so does its detail.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtWidgets import (
    QWidget,
)

from app import danger
from app.model import meaning
from app.words import class_explanation, class_words
from core import canonical, present
from core.chain import Head
from core.errors import ChainBroken, SignoffError
from core.grants import used_by
from core.policy.policy import read_from_json
from core.proxy import results
from core.records import decided_by_rule, fixed_values
from core.store import Store

PAGE = 200  # runs read per page
VERIFY_PER_TICK = 20_000  # events verified per timer tick
VERIFY_PAGE = 5_000  # events per read (core/verify.py measured this size)
RECHECK_PER_TICK = 200  # runs re-checked per timer tick
EVENTS_SHOWN = 1_000  # events of one run listed in the detail pane
OUTCOMES = ("completed", "failed", "denied", "pending", "rejected", "expired", "interrupted",
            "not repeated", "running")  # fmt: skip
COLUMNS = ("Time", "Server", "Tool", "Class", "Outcome", "Decided by", "Duration")
TIME, SERVER, TOOL, CLASS, OUTCOME, DECIDED, DURATION = range(len(COLUMNS))
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # what the Time column shows, always whole
# Two hashes, one name each (docs/user-guide.md, "Deciding requests"): the approval's request
# hash is the one the operator approves; a step's call hash only names the call.
FIXED_LABEL = "Set by Signoff (fixed, sent with the arguments)"
CALL_HASH_HELP = "the same tool and arguments anywhere; not the hash you approve"
# What each sortable column sorts by, in SQL (NULLs as "" so the keyset comparison holds).
# "Decided by" is worked out per page in Python and is not sortable.
SORT_KEYS = {
    0: "v.created_at",
    1: "COALESCE(v.server, '')",
    2: "COALESCE(v.tool, '')",
    3: "COALESCE(v.class, '')",
    4: "v.outcome",
    6: "(julianday(v.updated_at) - julianday(v.created_at))",
}

_LAST_STEP = "SELECT {what} FROM steps s WHERE s.run_id = r.id{extra} ORDER BY s.idx DESC LIMIT 1"
_TOOL = (
    "COALESCE(r.tool, ("
    + _LAST_STEP.format(what="s.tool_name", extra=" AND s.tool_name IS NOT NULL")
    + "))"
)
_CLASS = (
    "(SELECT json_extract(t.spec, '$.side_effect') FROM steps s"
    " JOIN tool_specs t ON t.hash = s.tool_spec_hash WHERE s.run_id = r.id"
    " ORDER BY s.idx DESC LIMIT 1)"
)


def _step_with(status: str) -> str:
    # ``status`` is one of this module's constants, never input.
    return f"EXISTS (SELECT 1 FROM steps s WHERE s.run_id = r.id AND s.status = '{status}')"  # noqa: S608


_OUTCOME = (
    "CASE"
    " WHEN r.status = 'WAITING_FOR_APPROVAL' THEN 'pending'"
    " WHEN r.status = 'RUNNING' THEN 'running'"
    " WHEN r.end_reason = 'not_repeated' THEN 'not repeated'"  # may have run (core.effects)
    " WHEN r.end_reason = 'rejected' THEN 'rejected'"
    " WHEN r.end_reason = 'approval_expired' THEN 'expired'"
    f" WHEN r.end_reason = 'interrupted' OR {_step_with('interrupted')} THEN 'interrupted'"
    f" WHEN {_step_with('denied')} THEN 'denied'"
    " WHEN r.status <> 'COMPLETED' OR ("
    + _LAST_STEP.format(what="s.status", extra="")
    + ") = 'failed' THEN 'failed'"
    " ELSE 'completed' END"
)
_SELECT = (  # every part is a constant of this module; values are bound as parameters
    "SELECT * FROM (SELECT r.rowid AS rid, r.id AS id, r.created_at AS created_at,"  # noqa: S608
    " r.updated_at AS updated_at, r.status AS status, r.server AS server,"
    f" {_TOOL} AS tool, {_CLASS} AS class, {_OUTCOME} AS outcome FROM runs r) AS v"
)


@dataclass(frozen=True)
class Filters:
    """What the table is narrowed to; None (or "") is "any"."""

    server: str | None = None
    tool: str | None = None
    side_effect: str | None = None
    outcome: str | None = None
    since: str | None = None  # store time text, inclusive
    until: str | None = None  # store time text, inclusive
    text: str = ""

    def where(self) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("server", self.server),
            ("tool", self.tool),
            ("class", self.side_effect),
            ("outcome", self.outcome),
        ):
            if value:
                clauses.append(f"v.{column} = ?")
                params.append(value)
        if self.since:
            clauses.append("v.created_at >= ?")
            params.append(self.since)
        if self.until:
            clauses.append("v.created_at <= ?")
            params.append(self.until)
        if self.text:
            like = "%" + _escape_like(self.text) + "%"
            clauses.append(
                "(v.tool LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM steps s WHERE s.run_id = v.id"
                " AND (s.arguments LIKE ? ESCAPE '\\' OR s.tool_name LIKE ? ESCAPE '\\')))"
            )
            params += [like, like, like]
        return clauses, params


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass
class RunRow:
    rowid: int
    id: str
    created_at: str
    updated_at: str
    status: str
    server: str | None
    tool: str | None
    side_effect: str | None
    outcome: str
    approval_id: str | None = None  # the pending approval, when the run waits on one
    decided: str = "policy"
    meanings: tuple[str, ...] = ()  # values read as meaning other than they say (``meanings``)


@dataclass
class _Page:
    rows: list[RunRow] = field(default_factory=list)
    exhausted: bool = False
    last: tuple[Any, int] | None = None  # the last row's (sort key, rowid): where to go on


def read_runs(
    store: Store,
    filters: Filters,
    limit: int,
    after: tuple[Any, int] | None = None,
    *,
    sort: int = 0,
    descending: bool = True,
) -> _Page:
    """Up to ``limit`` runs in the order of column ``sort`` (newest first by default),
    strictly after the ``(sort key, rowid)`` of the last row already read."""
    key = SORT_KEYS[sort]
    direction, beyond = ("DESC", "<") if descending else ("ASC", ">")
    clauses, params = filters.where()
    if after is not None:
        clauses.append(f"({key} {beyond} ? OR ({key} = ? AND v.rid {beyond} ?))")
        params += [after[0], after[0], after[1]]
    order = f" ORDER BY {key} {direction}, v.rid {direction}"
    # First the page's keys (only the columns filtered on are computed), then its rows.
    sql = _SELECT.replace("SELECT * FROM", f"SELECT v.rid, {key} FROM", 1)
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += order + " LIMIT ?"
    params.append(limit)
    with store.snapshot() as conn:
        found = conn.execute(sql, params).fetchall()
        keys = [r[0] for r in found]
        raw = conn.execute(
            _SELECT + " WHERE v.rid IN (SELECT value FROM json_each(?))" + order,  # noqa: S608
            (canonical.dumps_text(keys),),
        ).fetchall()
        rows = [RunRow(*r) for r in raw]
        if rows:
            marks = ",".join("?" * len(rows))
            approvals = conn.execute(
                "SELECT run_id, id, status, decided_by, decided_reason FROM approvals"  # noqa: S608
                f" WHERE run_id IN ({marks}) ORDER BY created_at, rowid",  # marks: only ?s
                [r.id for r in rows],
            ).fetchall()
            latest = {a[0]: a for a in approvals}
            for row in rows:
                a = latest.get(row.id)
                if a is None:
                    continue
                _, approval_id, status, by, reason = a
                if status == "pending":
                    row.approval_id = approval_id if row.outcome == "pending" else None
                    row.decided = "waiting for you"
                elif by:
                    row.decided = f"{by}: {reason}" if reason else str(by)
                elif status == "expired":
                    row.decided = "nobody (expired)"
            ruled = decided_by_rule(conn, [r.id for r in rows])  # the operator's rules said
            under = used_by(conn, [r.id for r in rows])  # allowed as the operator chose
            meant = meanings(conn, [r.id for r in rows])
            for row in rows:
                row.meanings = meant.get(row.id, ())
                if row.id in ruled:
                    rule, verb = ruled[row.id]
                    row.decided = f"{verb} by rule {rule}"
                if row.id in under:
                    row.decided = f"allowed under grant {under[row.id]}"
    last = (found[-1][1], found[-1][0]) if found else None
    return _Page(rows, exhausted=len(keys) < limit, last=last)


def meanings(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per run, each value its policy evaluations read as meaning other than it says, with what
    it means (``$.decision.read`` of its ``step.policy`` events, each once), in one query for
    the page as ``decided_by_rule`` reads the rules. A run with none is not in it."""
    found: dict[str, dict[str, None]] = {}
    for run_id, read in conn.execute(
        "SELECT run_id, json_extract(payload, '$.decision.read') FROM events"
        " WHERE kind = 'step.policy' AND run_id IN (SELECT value FROM json_each(?))"
        " AND json_extract(payload, '$.decision.read') IS NOT NULL ORDER BY seq",
        (canonical.dumps_text(list(run_ids)),),
    ):
        for reading in read_from_json(_loads(read)):
            found.setdefault(str(run_id), {})[meaning(reading)] = None
    return {run_id: tuple(said) for run_id, said in found.items()}


def _duration(row: RunRow) -> str:
    if row.outcome in ("pending", "running"):
        return "…"
    try:
        seconds = (
            datetime.fromisoformat(row.updated_at) - datetime.fromisoformat(row.created_at)
        ).total_seconds()
    except ValueError:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def _styled(row: RunRow, column: int, role: int) -> Any:
    """The class cell in its class's look, an outcome that may have run in that look
    (app/danger.py); None elsewhere."""
    if column == CLASS:
        return danger.cell(role, danger.class_look(row.side_effect))
    if column == OUTCOME and row.outcome in danger.MAY_HAVE_RUN_OUTCOMES:
        return danger.cell(role, danger.MAY_HAVE_RUN_LOOK)
    return None


def outcome_words(outcome: str) -> str:
    """An outcome as the window shows it: "Completed", "Not repeated"."""
    return outcome[:1].upper() + outcome[1:]


def status_words(status: str, reason: str | None) -> str:
    """A run's stored status and end reason in words: "Completed", never "COMPLETED
    (completed)"; the reason only when it says more than the status."""
    said = status.replace("_", " ").capitalize()
    if not reason or reason.replace("_", " ").lower() == said.lower():
        return said
    return f"{said} ({reason.replace('_', ' ')})"


def _local(text: str) -> str:
    try:
        return datetime.fromisoformat(text).astimezone().strftime(TIME_FORMAT)
    except ValueError:
        return text


class RunsModel(QAbstractTableModel):
    """The runs, newest first, read a page at a time as the view scrolls."""

    def __init__(self, store: Store, page: int = PAGE, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.page = page
        self.filters = Filters()
        self.rows: list[RunRow] = []
        self._exhausted = False
        self._last: tuple[Any, int] | None = None
        self.sort_column, self.descending = 0, True
        self.reload()

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Sort in SQL, keeping the paging (columns without a SQL key keep the order)."""
        if column not in SORT_KEYS:
            return
        self.sort_column = column
        self.descending = order == Qt.SortOrder.DescendingOrder
        self.reload()

    def set_filters(self, filters: Filters) -> None:
        self.filters = filters
        self.reload()

    def reload(self, keep: int = 0) -> None:
        """Read again from the newest, as many rows as ``keep`` (at least a page)."""
        limit = max(self.page, keep)
        self.beginResetModel()
        page = read_runs(self.store, self.filters, limit, sort=self.sort_column,
                         descending=self.descending)  # fmt: skip
        self.rows, self._exhausted, self._last = page.rows, page.exhausted, page.last
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def canFetchMore(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> bool:  # noqa: B008
        return not parent.isValid() and not self._exhausted

    def fetchMore(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> None:  # noqa: B008
        if parent.isValid() or self._exhausted:
            return
        page = read_runs(self.store, self.filters, self.page, self._last,
                         sort=self.sort_column, descending=self.descending)  # fmt: skip
        self._exhausted = page.exhausted
        if page.last is not None:
            self._last = page.last
        if page.rows:
            start = len(self.rows)
            self.beginInsertRows(QModelIndex(), start, start + len(page.rows) - 1)
            self.rows.extend(page.rows)
            self.endInsertRows()

    def data(
        self,
        index: QModelIndex | QPersistentModelIndex,
        role: int = Qt.ItemDataRole.DisplayRole,
    ) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        row = self.rows[index.row()]
        styled = _styled(row, index.column(), role)
        if styled is not None:
            return styled
        if role == Qt.ItemDataRole.DisplayRole:
            return (
                _local(row.created_at),
                row.server or "(library)",
                " · ".join((row.tool or "?", *row.meanings)),
                class_words(row.side_effect),
                outcome_words(row.outcome),
                row.decided,
                _duration(row),
            )[index.column()]
        if role == Qt.ItemDataRole.ToolTipRole:
            if index.column() == DECIDED:
                return row.decided  # free text, cut to the column's width
            if index.column() == TOOL and row.meanings:  # each whole, on a line of its own
                return "\n".join((row.tool or "?", *row.meanings))
            if index.column() == CLASS and row.side_effect:
                return f"{row.side_effect}: {class_explanation(row.side_effect)}"
            if index.column() == OUTCOME and row.outcome in danger.MAY_HAVE_RUN_OUTCOMES:
                return f"{danger.MAY_HAVE_RUN_WORDS}: its outcome is not known"
            return f"run {row.id}, created {row.created_at}"
        if role == Qt.ItemDataRole.UserRole:
            return row.id
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def row_of(self, run_id: str) -> int:
        return next((i for i, r in enumerate(self.rows) if r.id == run_id), -1)


# --- the detail of one run ----------------------------------------------------------------


@dataclass(frozen=True)
class RunDetail:
    run_id: str
    arguments: str  # the tool step's canonical arguments, verbatim
    request_hash: str  # the request hash of its newest approval, the one approved; "" if none
    call_hash: str  # the tool step's call hash (approvals.call_hash); "" if none recorded
    text: str  # everything else, for reading
    fixed: str = "{}"  # the values Signoff set on the tool step's call (canonical JSON)


def read_detail(store: Store, run_id: str) -> RunDetail | None:
    with store.snapshot() as conn:
        run = conn.execute(
            "SELECT id, goal, status, end_reason, result, server, tool, created_at, updated_at"
            " FROM runs WHERE id = ?",
            (run_id,),
        ).fetchone()
        if run is None:
            return None
        steps = conn.execute(
            "SELECT s.idx, s.status, s.tool_name, s.arguments, s.request_hash, s.observation,"
            " s.started_at, s.ended_at, t.spec FROM steps s"
            " LEFT JOIN tool_specs t ON t.hash = s.tool_spec_hash"
            " WHERE s.run_id = ? ORDER BY s.idx",
            (run_id,),
        ).fetchall()
        approvals = conn.execute(
            "SELECT id, step_idx, kind, status, request_hash, policy_reason, created_at,"
            " decided_by, decided_reason, decided_at FROM approvals WHERE run_id = ?"
            " ORDER BY created_at, rowid",
            (run_id,),
        ).fetchall()
        events = conn.execute(
            "SELECT seq, step_idx, kind, at, hash, payload FROM events WHERE run_id = ?"
            " ORDER BY seq LIMIT ?",
            (run_id, EVENTS_SHOWN + 1),
        ).fetchall()
    rid, goal, status, end_reason, result, server, tool, created, updated = run
    host = _host_label(next((e[5] for e in events if e[2] == "run.started"), None))
    lines = [
        f"Run {rid}",
        f"  server {server or '(library)'}, tool {tool or '?'}",
        *([f"  asked by {host}"] if host else []),
        f"  status: {status_words(status, end_reason)}",
        f"  created {created}, last change {updated}",
        f"  goal: {goal}",
    ]
    lines += [f"  {line}" for line in results.describe(None if result is None else _loads(result))]
    roots = _roots(next((e[5] for e in events if e[2] == "run.started"), None))
    if roots is not None:
        lines.append(f"  roots the host had given the server: {canonical.dumps_text(roots)}")
    tool_step = next((s for s in reversed(steps) if s[3] is not None), None)
    for idx, s_status, name, arguments, call_hash, observation, started, ended, spec in steps:
        side = _spec_field(spec, "side_effect")
        lines += [
            "",
            f"Step {idx}: {name or '(no tool)'} ({class_words(side)}),"
            f" {status_words(s_status, None)}",
            f"  started {started}" + (f", ended {ended}" if ended else ""),
            f"  arguments (canonical): {arguments if arguments is not None else '-'}",
            *_set_by_signoff(spec),
            f"  call hash: {call_hash or '-'} ({CALL_HASH_HELP})",
            f"  observation: {observation if observation is not None else '(none recorded)'}",
        ]
    policies = [e for e in events if e[2] == "step.policy"]
    lines += ["", f"Policy evaluations ({len(policies)}):"]
    for seq, step, _, at, _, payload in policies:
        value = _loads(payload)
        decision = value.get("decision", {}) if isinstance(value, dict) else {}
        decision = decision if isinstance(decision, dict) else {}
        identity = value.get("policy") if isinstance(value, dict) else None
        lines.append(
            f"  event {seq}, step {step}, {at}: {decision.get('outcome', '?')}"
            + (f" ({decision.get('kind')})" if decision.get("kind") else "")
            + f": {decision.get('reason', '')}; policy {identity or '(no identity)'}"
        )
        if isinstance(value, dict) and "request" in value:
            lines.append(f"    request evaluated: {canonical.dumps_text(value['request'])}")
        lines += [f"    read: {meaning(r)}" for r in read_from_json(decision.get("read"))]
    lines += ["", f"Approvals ({len(approvals)}):"]
    for a_id, step, kind, a_status, a_hash, p_reason, a_created, by, why, at in approvals:
        lines.append(f"  {a_id} (step {step}, {kind}): {a_status}; asked {a_created}")
        lines.append(f"    policy's reason: {p_reason or '-'}")
        lines.append(f"    request hash: {a_hash} (fingerprint {present.fingerprint(a_hash)})")
        if by or at:
            lines.append(f"    decided by {by or '?'} at {at or '?'}: {why or '(no reason given)'}")
    lines += ["", f"Events ({min(len(events), EVENTS_SHOWN)} shown):", "  seq  kind  hash"]
    for seq, step, kind, at, e_hash, _ in events[:EVENTS_SHOWN]:
        where = "" if step is None else f" step {step}"
        lines.append(f"  {seq}  {kind}{where}  {at}  {e_hash}")
    if len(events) > EVENTS_SHOWN:
        lines.append("  … (more events: see the export)")
    # The request hash shown is the approval's, for the step whose request is shown.
    approval = next(
        (a for a in reversed(approvals) if tool_step is not None and a[1] == tool_step[0]), None
    )
    return RunDetail(
        rid,
        tool_step[3] if tool_step else "",
        approval[4] if approval else "",
        (tool_step[4] or "") if tool_step else "",
        "\n".join(lines),
        fixed_values(_loads(tool_step[8]) if tool_step and tool_step[8] else None),
    )


def _set_by_signoff(spec: str | None) -> list[str]:
    """The line naming the values Signoff set on a step's call, when it set any."""
    fixed = fixed_values(_loads(spec) if spec else None)
    return [] if fixed == "{}" else [f"  {FIXED_LABEL}: {fixed}"]


def _loads(text: str) -> Any:
    try:
        return canonical.loads(text)
    except SignoffError:
        return None


def _host_label(payload: str | None) -> str | None:
    """The host a proxy run was for, as its ``run.started`` event names it (none recorded before
    hosts were)."""
    value = _loads(payload) if payload else None
    call = value.get("call") if isinstance(value, dict) else None
    host = call.get("host") if isinstance(call, dict) else None
    return str(host.get("label") or host.get("id")) if isinstance(host, dict) else None


def _roots(payload: str | None) -> Any:
    """The roots in force when the run started, as its ``run.started`` event names them."""
    value = _loads(payload) if payload else None
    call = value.get("call") if isinstance(value, dict) else None
    return call.get("roots") if isinstance(call, dict) else None


def _spec_field(spec: str | None, name: str) -> str | None:
    value = _loads(spec) if spec else None
    return str(value[name]) if isinstance(value, dict) and value.get(name) else None


# --- the window ---------------------------------------------------------------------------


def kept_banner(store: Store, head: Head, kept: Head | None) -> tuple[str, str] | None:
    """The banner (state, text) for a chain verified to ``head`` against the head ``kept`` in
    the keyring; None when the log grew past the kept head (verify on to it); ``ChainBroken``
    when the database no longer holds the kept head."""
    if kept is None:
        return ("not_anchored", f"{intact(head.seq)}; not anchored: the keyring holds no head"
                " for this database yet")  # fmt: skip
    if kept.database_id != store.database_id:
        raise ChainBroken(
            f"the head kept for it belongs to database {kept.database_id}, but"
            f" this file is database {store.database_id}: the file was replaced",
            seq=kept.seq,
        )
    if kept.seq > head.seq:
        if store.head().seq > head.seq:
            return None
        raise ChainBroken(
            f"the log ends at event {head.seq}, but event {kept.seq} was witnessed: events"
            " were deleted from the end, or an older copy of the database was put back",
            seq=head.seq + 1,
        )
    if kept.seq > 0:
        rows = store.event_rows(kept.seq - 1, kept.seq, 1)
        if not rows or rows[0][6] != kept.hash:
            raise ChainBroken(
                f"event {kept.seq} is not the event the keyring witnessed: the log was"
                " rewritten from there or before",
                seq=kept.seq,
            )
    return ("anchored", f"{intact(head.seq)} and anchored in the keyring"
            f" (witnessed at event {kept.seq}).")  # fmt: skip


def intact(seq: int) -> str:
    """What a record that verified up to event ``seq`` is, in words."""
    return (
        "Record: intact (no events yet)"
        if seq == 0
        else f"Record intact: verified up to event {seq}"
    )
