"""The history window: every run, what it asked, who decided, what came of it, and whether the
record still verifies.

Rules:

1. The store is the truth and the window scales with it: runs are read a page at a time
   (keyset paging on ``(created_at, rowid)``, newest first) and every filter is SQL, so a
   database of 100,000 runs opens at once.
2. What is shown is what is stored: the canonical arguments and the request hash verbatim,
   never re-encoded.
3. Nothing long runs on a click: verifying the chain and re-checking every run go in slices on a
   timer, with progress, so the window never freezes.
4. The window only reads. A pending run opens the approval dialog (``open_approval``); the
   decision is the tray's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QDateTime,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core import canonical
from core.chain import ChainVerifier, Head
from core.errors import ChainBroken, HeadUnavailable, SignoffError
from core.heads import HeadStore
from core.store import Store, format_time

PAGE = 200  # runs read per page
VERIFY_PER_TICK = 20_000  # events verified per timer tick
VERIFY_PAGE = 5_000  # events per read (core/verify.py measured this size)
RECHECK_PER_TICK = 200  # runs re-checked per timer tick
EVENTS_SHOWN = 1_000  # events of one run listed in the detail pane
OUTCOMES = ("completed", "failed", "denied", "pending", "rejected", "expired", "interrupted",
            "running")  # fmt: skip
COLUMNS = ("Time", "Server", "Tool", "Class", "Outcome", "Decided by", "Duration")
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
    last = (found[-1][1], found[-1][0]) if found else None
    return _Page(rows, exhausted=len(keys) < limit, last=last)


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


def _local(text: str) -> str:
    try:
        return datetime.fromisoformat(text).astimezone().strftime("%Y-%m-%d %H:%M:%S")
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
        if role == Qt.ItemDataRole.DisplayRole:
            return (
                _local(row.created_at),
                row.server or "(library)",
                row.tool or "?",
                row.side_effect or "?",
                row.outcome,
                row.decided,
                _duration(row),
            )[index.column()]
        if role == Qt.ItemDataRole.ToolTipRole:
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
    request_hash: str
    text: str  # everything else, for reading


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
    lines = [
        f"Run {rid}",
        f"  server {server or '(library)'}, tool {tool or '?'}",
        f"  status {status}" + (f" ({end_reason})" if end_reason else ""),
        f"  created {created}, last change {updated}",
        f"  goal: {goal}",
    ]
    if result is not None:
        lines.append(f"  result: {result}")
    tool_step = next((s for s in reversed(steps) if s[3] is not None), None)
    for idx, s_status, name, arguments, request_hash, observation, started, ended, spec in steps:
        side = _spec_field(spec, "side_effect")
        lines += [
            "",
            f"Step {idx}: {name or '(no tool)'} [{side or '?'}], {s_status}",
            f"  started {started}" + (f", ended {ended}" if ended else ""),
            f"  arguments (canonical): {arguments if arguments is not None else '-'}",
            f"  request hash: {request_hash or '-'}",
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
    lines += ["", f"Approvals ({len(approvals)}):"]
    for a_id, step, kind, a_status, a_hash, p_reason, a_created, by, why, at in approvals:
        lines.append(f"  {a_id} (step {step}, {kind}): {a_status}; asked {a_created}")
        lines.append(f"    policy's reason: {p_reason or '-'}; request hash {a_hash}")
        if by or at:
            lines.append(f"    decided by {by or '?'} at {at or '?'}: {why or '(no reason given)'}")
    lines += ["", f"Events ({min(len(events), EVENTS_SHOWN)} shown):", "  seq  kind  hash"]
    for seq, step, kind, at, e_hash, _ in events[:EVENTS_SHOWN]:
        where = "" if step is None else f" step {step}"
        lines.append(f"  {seq}  {kind}{where}  {at}  {e_hash}")
    if len(events) > EVENTS_SHOWN:
        lines.append("  … (more events: see the export)")
    return RunDetail(
        rid,
        tool_step[3] if tool_step else "",
        (tool_step[4] or "") if tool_step else "",
        "\n".join(lines),
    )


def _loads(text: str) -> Any:
    try:
        return canonical.loads(text)
    except SignoffError:
        return None


def _spec_field(spec: str | None, name: str) -> str | None:
    value = _loads(spec) if spec else None
    return str(value[name]) if isinstance(value, dict) and value.get(name) else None


# --- the window ---------------------------------------------------------------------------


class HistoryWindow(QWidget):
    open_approval = Signal(str)

    def __init__(
        self, store: Store, heads: HeadStore, config_path: Path, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.heads = heads
        self.config_path = config_path
        self.setWindowTitle("Signoff: history")
        self.resize(1100, 760)
        mono = QApplication.font()
        mono.setFamily("monospace")
        mono.setStyleHint(mono.StyleHint.Monospace)

        layout = QVBoxLayout(self)

        # The chain banner.
        banner = QHBoxLayout()
        self.banner = QLabel("Chain: not verified yet in this window.")
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner_state = "unverified"
        self.verify_button = QPushButton("Verify now")
        self.verify_button.clicked.connect(self.verify_now)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setMaximumWidth(220)
        banner.addWidget(self.banner, 1)
        banner.addWidget(self.progress)
        banner.addWidget(self.verify_button)
        layout.addLayout(banner)

        # The filters.
        filters = QHBoxLayout()
        self.server_box = QComboBox()
        self.tool_box = QComboBox()
        self.class_box = QComboBox()
        self.outcome_box = QComboBox()
        self.outcome_box.addItem("Any outcome", None)
        for outcome in OUTCOMES:
            self.outcome_box.addItem(outcome, outcome)
        self.time_range = QCheckBox("Between")
        self.since = QDateTimeEdit(QDateTime.currentDateTime().addDays(-7))
        self.until = QDateTimeEdit(QDateTime.currentDateTime().addDays(1))
        for edit in (self.since, self.until):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd HH:mm")
            edit.setEnabled(False)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search tool names and arguments")
        self.search.setClearButtonEnabled(True)
        for widget in (self.server_box, self.tool_box, self.class_box, self.outcome_box,
                       self.time_range, self.since, QLabel("and"), self.until):  # fmt: skip
            filters.addWidget(widget)
        filters.addWidget(self.search, 1)
        layout.addLayout(filters)
        self._fill_choices()

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(250)
        self._search_timer.timeout.connect(self.apply_filters)
        self.search.textChanged.connect(self._search_timer.start)
        self.search.returnPressed.connect(self.apply_filters)
        for box in (self.server_box, self.tool_box, self.class_box, self.outcome_box):
            box.currentIndexChanged.connect(self.apply_filters)
        self.time_range.toggled.connect(self._time_range_toggled)
        self.since.dateTimeChanged.connect(self._time_changed)
        self.until.dateTimeChanged.connect(self._time_changed)

        # The table and the detail.
        splitter = QSplitter(Qt.Orientation.Vertical)
        self.model = RunsModel(store, parent=self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        # Newest first, then whatever column header the operator clicks (sorted in SQL).
        self.table.horizontalHeader().setSortIndicator(0, Qt.SortOrder.DescendingOrder)
        self.table.setSortingEnabled(True)
        self.table.doubleClicked.connect(self._double_clicked)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.model.modelReset.connect(self._model_reset)
        splitter.addWidget(self.table)

        tabs = QTabWidget()
        run_tab = QWidget()
        run_layout = QVBoxLayout(run_tab)
        request_row = QHBoxLayout()
        request_row.addWidget(QLabel("Request (canonical, exactly as stored):"), 1)
        self.copy_request = QPushButton("Copy request")
        self.copy_hash = QPushButton("Copy hash")
        self.copy_request.clicked.connect(self._copy_request)
        self.copy_hash.clicked.connect(self._copy_hash)
        request_row.addWidget(self.copy_request)
        request_row.addWidget(self.copy_hash)
        run_layout.addLayout(request_row)
        self.request_view = QPlainTextEdit()
        self.request_view.setReadOnly(True)
        self.request_view.setFont(mono)
        self.request_view.setMaximumHeight(90)
        run_layout.addWidget(self.request_view)
        self.hash_label = QLabel("")
        self.hash_label.setFont(mono)
        self.hash_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        run_layout.addWidget(self.hash_label)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setFont(mono)
        self.detail.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        run_layout.addWidget(self.detail, 1)
        tabs.addTab(run_tab, "Run")

        recheck_tab = QWidget()
        recheck_layout = QVBoxLayout(recheck_tab)
        recheck_row = QHBoxLayout()
        recheck_row.addWidget(QLabel("Would today's policy decide the same?"), 1)
        self.recheck_selected_button = QPushButton("Re-check the selected run")
        self.recheck_all_button = QPushButton("Re-check all runs")
        self.recheck_selected_button.clicked.connect(self.recheck_selected)
        self.recheck_all_button.clicked.connect(self.recheck_all)
        recheck_row.addWidget(self.recheck_selected_button)
        recheck_row.addWidget(self.recheck_all_button)
        recheck_layout.addLayout(recheck_row)
        self.recheck_view = QPlainTextEdit()
        self.recheck_view.setReadOnly(True)
        self.recheck_view.setFont(mono)
        recheck_layout.addWidget(self.recheck_view, 1)
        tabs.addTab(recheck_tab, "Re-check")
        splitter.addWidget(tabs)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout.addWidget(splitter, 1)

        actions = QHBoxLayout()
        self.count_label = QLabel("")
        actions.addWidget(self.count_label, 1)
        self.export_selected_button = QPushButton("Export selected…")
        self.export_all_button = QPushButton("Export all…")
        self.export_selected_button.clicked.connect(lambda: self._export_clicked(True))
        self.export_all_button.clicked.connect(lambda: self._export_clicked(False))
        actions.addWidget(self.export_selected_button)
        actions.addWidget(self.export_all_button)
        layout.addLayout(actions)

        self.selected_run_id: str | None = None
        self.current_detail: RunDetail | None = None

        self._verify_timer = QTimer(self)
        self._verify_timer.setInterval(0)
        self._verify_timer.timeout.connect(self._verify_tick)
        self._verifier: ChainVerifier | None = None
        self._verify_after = 0
        self._verify_end = 0
        self._verified_once = False

        self._recheck_timer = QTimer(self)
        self._recheck_timer.setInterval(0)
        self._recheck_timer.timeout.connect(self._recheck_tick)
        self._recheck_queue: list[str] = []
        self._recheck_policy: Any = None
        self._recheck_lines: list[str] = []
        self._recheck_counts = [0, 0, 0]  # runs, evaluations, differences
        self.rechecking = False
        self._model_reset()

    # --- refreshing and filtering -------------------------------------------------------

    def refresh(self) -> None:
        """Read the store again (the tray calls this on every change)."""
        self._fill_choices()
        self.model.reload(keep=len(self.model.rows))

    def filters(self) -> Filters:
        since = until = None
        if self.time_range.isChecked():
            since, until = _store_time(self.since.dateTime()), _store_time(self.until.dateTime())
        return Filters(
            server=self.server_box.currentData(),
            tool=self.tool_box.currentData(),
            side_effect=self.class_box.currentData(),
            outcome=self.outcome_box.currentData(),
            since=since,
            until=until,
            text=self.search.text().strip(),
        )

    def apply_filters(self) -> None:
        self._search_timer.stop()
        self.model.set_filters(self.filters())

    def _time_range_toggled(self, on: bool) -> None:
        self.since.setEnabled(on)
        self.until.setEnabled(on)
        self.apply_filters()

    def _time_changed(self) -> None:
        if self.time_range.isChecked():
            self.apply_filters()

    def _fill_choices(self) -> None:
        with self.store.snapshot() as conn:
            servers = [r[0] for r in conn.execute(
                "SELECT DISTINCT server FROM runs WHERE server IS NOT NULL ORDER BY 1"
            )]  # fmt: skip
            tools = [r[0] for r in conn.execute(
                "SELECT tool FROM runs WHERE tool IS NOT NULL UNION"
                " SELECT tool_name FROM steps WHERE tool_name IS NOT NULL ORDER BY 1")]  # fmt: skip
            classes = [r[0] for r in conn.execute(
                "SELECT DISTINCT json_extract(spec, '$.side_effect') AS c FROM tool_specs"
                " WHERE c IS NOT NULL ORDER BY 1")]  # fmt: skip
        for box, everything, values in (
            (self.server_box, "Any server", servers),
            (self.tool_box, "Any tool", tools),
            (self.class_box, "Any class", classes),
        ):
            current = box.currentData()
            box.blockSignals(True)
            box.clear()
            box.addItem(everything, None)
            for value in values:
                box.addItem(str(value), str(value))
            if current is not None and box.findData(current) < 0:
                box.addItem(str(current), current)  # a chosen filter stays chosen
            box.setCurrentIndex(max(box.findData(current), 0))
            box.blockSignals(False)

    def _model_reset(self) -> None:
        if self.selected_run_id is not None:
            row = self.model.row_of(self.selected_run_id)
            if row >= 0:
                self.table.selectRow(row)
                self.show_run(self.selected_run_id)
        more = "+" if self.model.canFetchMore() else ""
        self.count_label.setText(f"{len(self.model.rows)}{more} runs")

    # --- the selected run ---------------------------------------------------------------

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.show_run(self.model.rows[current.row()].id)

    def show_run(self, run_id: str) -> None:
        self.selected_run_id = run_id
        detail = read_detail(self.store, run_id)
        self.current_detail = detail
        if detail is None:
            self.request_view.setPlainText("")
            self.hash_label.setText("")
            self.detail.setPlainText(f"Run {run_id} is no longer in the store.")
            return
        self.request_view.setPlainText(detail.arguments)
        self.hash_label.setText(f"Request SHA-256: {detail.request_hash or '-'}")
        self.detail.setPlainText(detail.text)

    def selected_run_ids(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.rows[r].id for r in rows]

    def _copy_request(self) -> None:
        if self.current_detail is not None:
            QApplication.clipboard().setText(self.current_detail.arguments)

    def _copy_hash(self) -> None:
        if self.current_detail is not None:
            QApplication.clipboard().setText(self.current_detail.request_hash)

    def _double_clicked(self, index: QModelIndex) -> None:
        if not index.isValid():
            return
        row = self.model.rows[index.row()]
        if row.outcome == "pending" and row.approval_id:
            self.open_approval.emit(row.approval_id)

    # --- verifying the chain ------------------------------------------------------------

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if not self._verified_once and self._verifier is None:
            self.verify_now()

    @property
    def verifying(self) -> bool:
        return self._verifier is not None

    def verify_now(self) -> None:
        if self._verifier is not None:
            return
        self._verified_once = True
        self._verifier = ChainVerifier(self.store.database_id)
        self._verify_after = 0
        self._verify_end = self.store.head().seq
        self.progress.setRange(0, max(self._verify_end, 1))
        self.progress.setValue(0)
        self.verify_button.setEnabled(False)
        self._set_banner("verifying", f"Verifying the chain: 0 of {self._verify_end} events…")
        self._verify_timer.start()

    def _verify_tick(self) -> None:
        verifier = self._verifier
        if verifier is None:
            self._verify_timer.stop()
            return
        try:
            budget = VERIFY_PER_TICK
            while budget > 0 and self._verify_after < self._verify_end:
                rows = self.store.event_rows(
                    self._verify_after, self._verify_end, min(VERIFY_PAGE, budget)
                )
                if not rows:
                    raise ChainBroken(
                        f"event {self._verify_after + 1} is missing: events were deleted while"
                        " verifying",
                        seq=self._verify_after + 1,
                    )
                verifier.feed(rows)
                self._verify_after = rows[-1][0]
                budget -= len(rows)
            self.progress.setValue(self._verify_after)
            if self._verify_after < self._verify_end:
                self.banner.setText(
                    f"Verifying the chain: {self._verify_after} of {self._verify_end} events…"
                )
                return
            head = verifier.finish()
            if self._anchor(head):
                return  # the log grew past the kept head: verify on to it
        except ChainBroken as e:
            self._set_banner("broken", f"Chain broken at event {e.seq}: {e}")
        except SignoffError as e:
            self._set_banner("error", f"Chain not verified: {e}")
        self._stop_verifying()

    def _anchor(self, head: Head) -> bool:
        """Compare the verified head with the kept one; True when verification must go on."""
        try:
            kept = self.heads.load(self.store.path)
        except HeadUnavailable as e:
            self._set_banner(
                "not_anchored", f"Chain verified up to event {head.seq}; not anchored: {e}"
            )
            return False
        if kept is None:
            self._set_banner(
                "not_anchored",
                f"Chain verified up to event {head.seq}; not anchored: the keyring holds no"
                " head for this database yet",
            )
            return False
        if kept.database_id != self.store.database_id:
            raise ChainBroken(
                f"the head kept for this place belongs to database {kept.database_id}, but"
                f" this file is database {self.store.database_id}: the file was replaced",
                seq=kept.seq,
            )
        if kept.seq > head.seq:
            now = self.store.head().seq
            if now > head.seq:
                self._verify_end = now
                self.progress.setMaximum(now)
                return True
            raise ChainBroken(
                f"the log ends at event {head.seq}, but event {kept.seq} was witnessed: events"
                " were deleted from the end, or an older copy of the database was put back",
                seq=head.seq + 1,
            )
        if kept.seq > 0:
            rows = self.store.event_rows(kept.seq - 1, kept.seq, 1)
            if not rows or rows[0][6] != kept.hash:
                raise ChainBroken(
                    f"event {kept.seq} is not the event the keyring witnessed: the log was"
                    " rewritten from there or before",
                    seq=kept.seq,
                )
        self._set_banner(
            "anchored",
            f"Chain verified up to event {head.seq} and anchored in the keyring"
            f" (witnessed at event {kept.seq}).",
        )
        return False

    def _stop_verifying(self) -> None:
        self._verify_timer.stop()
        self._verifier = None
        self.progress.setValue(self.progress.maximum())
        self.verify_button.setEnabled(True)

    def _set_banner(self, state: str, text: str) -> None:
        self.banner_state = state
        self.banner.setText(text)
        color = {"anchored": "#067647", "not_anchored": "#b54708", "broken": "#b42318",
                 "error": "#b42318"}.get(state, "")  # fmt: skip
        weight = "bold" if state == "broken" else "normal"
        self.banner.setStyleSheet(f"color: {color}; font-weight: {weight};" if color else "")

    # --- re-checking --------------------------------------------------------------------

    def _policy(self) -> Any:
        from core.proxy.config import load

        return load(self.config_path).policy()

    def recheck_selected(self) -> None:
        ids = self.selected_run_ids() or ([self.selected_run_id] if self.selected_run_id else [])
        if not ids:
            self.recheck_view.setPlainText("Select a run to re-check.")
            return
        self._start_recheck(ids)

    def recheck_all(self) -> None:
        with self.store.snapshot() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY created_at, rowid")]
        self._start_recheck(ids)

    def _start_recheck(self, run_ids: list[str]) -> None:
        try:
            self._recheck_policy = self._policy()
        except SignoffError as e:
            self.recheck_view.setPlainText(f"Today's policy cannot be read: {e}")
            return
        self._recheck_queue = list(reversed(run_ids))
        self._recheck_lines = []
        self._recheck_counts = [0, 0, 0]
        self.rechecking = True
        self.recheck_all_button.setEnabled(False)
        self.recheck_selected_button.setEnabled(False)
        self.recheck_view.setPlainText(f"Re-checking {len(run_ids)} runs…")
        self._recheck_timer.start()

    def _recheck_tick(self) -> None:
        from core.recheck import recheck

        for _ in range(RECHECK_PER_TICK):
            if not self._recheck_queue:
                break
            run_id = self._recheck_queue.pop()
            self._recheck_counts[0] += 1
            try:
                result = recheck(self.store, run_id, self._recheck_policy)
            except SignoffError as e:
                self._recheck_lines.append(f"{run_id}: cannot be re-checked: {e}")
                continue
            self._recheck_counts[1] += result.evaluations
            for d in result.differences:
                self._recheck_counts[2] += 1
                self._recheck_lines.append(
                    f"{d.run_id} step {d.step}: then {_decision(d.then)}"
                    f" (policy {d.then_policy or '?'}); now {_decision(d.now)}"
                    f" (policy {d.now_policy or '?'})"
                )
        runs, evaluations, differences = self._recheck_counts
        head = (
            f"{runs} runs, {evaluations} evaluations re-checked with today's policy"
            f" ({self.config_path}): "
            + ("the same decisions." if differences == 0 else f"{differences} differ:")
        )
        if self._recheck_queue:
            self.recheck_view.setPlainText(head + f" ({len(self._recheck_queue)} runs to go…)")
            return
        self._recheck_timer.stop()
        self.rechecking = False
        self.recheck_all_button.setEnabled(True)
        self.recheck_selected_button.setEnabled(True)
        self.recheck_view.setPlainText("\n".join([head, *self._recheck_lines]))

    # --- exporting ----------------------------------------------------------------------

    def export_to(self, path: Path, run_ids: Sequence[str] | None = None) -> int:
        """Write the runs (all when ``run_ids`` is None) to ``path`` as JSON Lines."""
        from core.export import export_runs

        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8", newline="\n") as out:
            return export_runs(self.store, out, run_ids)

    def _export_clicked(self, selected: bool) -> None:
        run_ids = self.selected_run_ids() if selected else None
        if selected and not run_ids:
            self.count_label.setText("Select the runs to export first.")
            return
        name, _ = QFileDialog.getSaveFileName(
            self, "Export runs", "signoff-runs.jsonl", "JSON Lines (*.jsonl)"
        )
        if not name:
            return
        try:
            count = self.export_to(Path(name), run_ids)
        except (OSError, SignoffError) as e:
            self.count_label.setText(f"Not exported: {e}")
            return
        self.count_label.setText(f"Exported {count} runs to {name}")


def _decision(d: Any) -> str:
    kind = f" ({d.kind})" if d.kind else ""
    return f"{d.outcome.value}{kind}"


def _store_time(moment: QDateTime) -> str:
    return format_time(datetime.fromtimestamp(moment.toMSecsSinceEpoch() / 1000, UTC))
