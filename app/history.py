"""The history window: every run, what it asked, who decided, what came of it, and whether the
record still verifies.

Rules:

1. The store is the truth and the window scales with it: runs are read a page at a time
   (keyset paging on ``(created_at, rowid)``, newest first) and every filter is SQL, so a
   database of 100,000 runs opens at once.
2. What is shown is what is stored: the canonical arguments, the request hash of the run's
   approval (the hash the operator approved; "Copy request hash" copies it) and the step's
   call hash (the same tool and arguments anywhere, never approved) verbatim, never
   re-encoded, each under its own name. The values Signoff set on the call (the tool's fixed
   values, from its recorded spec) are shown apart from the arguments, marked so. A value the
   policy read as meaning other than it says (``$.decision.read`` of the run's evaluations) is
   shown with that meaning beside the tool in the table, and under its evaluation in the detail.
3. Nothing long runs on a click: verifying the chain and re-checking every run go in slices on a
   timer, with progress, so the window never freezes.
   The banner follows the witness: a change in what it says (anchored, an alarm) verifies an
   open window again, after any verification under way.
4. The window only reads. A pending run opens the approval dialog (``open_approval``); the
   decision is the tray's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QDateTime,
    QModelIndex,
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

from app.dialog import plain_label
from app.history_model import (  # the data side of the window
    CALL_HASH_HELP,
    CLASS,
    DECIDED,
    DURATION,
    FIXED_LABEL,
    OUTCOME,
    OUTCOMES,
    SERVER,
    TIME,
    TIME_FORMAT,
    TOOL,
    VERIFY_PAGE,
    VERIFY_PER_TICK,
    Filters,
    RunDetail,
    RunsModel,
    intact,
    kept_banner,
    outcome_words,
    read_detail,
)
from app.history_recheck import RecheckTab
from app.words import WORDS, class_words
from core import present
from core.chain import ChainVerifier, Head
from core.errors import ChainBroken, DatabaseRestored, HeadUnavailable, SignoffError
from core.heads import HeadStore, kept_head
from core.store import Store, format_time

KEPT_POLL_MS = 20
# One thread for the window's keyring reads; each has its own deadline (core/keyring_calls.py).
_KEYRING = ThreadPoolExecutor(1, thread_name_prefix="signoff-history-keyring")


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
        self.banner = plain_label("Record: not verified yet in this window.")
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
            self.outcome_box.addItem(outcome_words(outcome), outcome)
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
        for box in (self.server_box, self.tool_box, self.class_box, self.outcome_box):
            # A long server or tool name must not widen the row past the window.
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            box.setMinimumContentsLength(9)
        self.search.setMinimumWidth(
            self.search.fontMetrics().horizontalAdvance(self.search.placeholderText()) + 48
        )  # the placeholder whole, and the clear button
        # Two rows: what a run is (server, tool, class, outcome), then when and what it says;
        # one row would squeeze the search out of sight at 1100 px.
        for box in (self.server_box, self.tool_box, self.class_box, self.outcome_box):
            filters.addWidget(box, 1)
        when = QHBoxLayout()
        for widget in (self.time_range, self.since, QLabel("and"), self.until):
            when.addWidget(widget)
        when.addWidget(self.search, 1)
        layout.addLayout(filters)
        layout.addLayout(when)
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
        self.table.setWordWrap(False)  # a cell is one line: a time is never broken in two
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        # The free text (the tool's name) takes the spare width; the others are as wide as
        # what they show, and the operator can widen any of them.
        header.setSectionResizeMode(TOOL, QHeaderView.ResizeMode.Stretch)
        # Newest first, then whatever column header the operator clicks (sorted in SQL).
        self.table.horizontalHeader().setSortIndicator(0, Qt.SortOrder.DescendingOrder)
        self.table.setSortingEnabled(True)
        self.table.doubleClicked.connect(self._double_clicked)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.model.modelReset.connect(self._model_reset)
        self.model.rowsInserted.connect(self._fit_columns)
        splitter.addWidget(self.table)

        tabs = self.tabs = QTabWidget()
        run_tab = QWidget()
        run_layout = QVBoxLayout(run_tab)
        request_row = QHBoxLayout()
        request_row.addWidget(QLabel("Request (canonical, exactly as stored):"), 1)
        self.copy_request = QPushButton("Copy request")
        self.copy_hash = QPushButton("Copy request hash")
        self.copy_hash.setToolTip("The request hash of the run's approval: the hash approved")
        self.copy_hash.setEnabled(False)  # until a run with an approval is shown
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
        # The values Signoff set on the call, apart from the arguments and marked so; the hashes.
        self.fixed_label = plain_label("")
        self.hash_label, self.call_hash_label = (plain_label("", wrap=False) for _ in range(2))
        for label in (self.fixed_label, self.hash_label, self.call_hash_label):
            label.setFont(mono)
            run_layout.addWidget(label)
        self.fixed_label.hide()
        self.call_hash_label.setToolTip(f"Call hash: {CALL_HASH_HELP}.")
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setFont(mono)
        self.detail.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        run_layout.addWidget(self.detail, 1)
        tabs.addTab(run_tab, "Run")

        self.recheck_tab = RecheckTab(store, config_path, self._runs_to_recheck, mono)
        tabs.addTab(self.recheck_tab, "Re-check")
        splitter.addWidget(tabs)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout.addWidget(splitter, 1)

        actions = QHBoxLayout()
        self.count_label = QLabel("")
        actions.addWidget(self.count_label, 1)
        self.export_selected_button = QPushButton("Export selected…")
        self.export_all_button = QPushButton("Export all…")
        # Bound methods, not lambdas holding self (see app/tray.py).
        self.export_selected_button.clicked.connect(self._export_selected_clicked)
        self.export_all_button.clicked.connect(self._export_all_clicked)
        actions.addWidget(self.export_selected_button)
        actions.addWidget(self.export_all_button)
        layout.addLayout(actions)

        self.selected_run_id: str | None = None
        self.current_detail: RunDetail | None = None

        self._kept: Future[Head | None] | None = None  # the kept head, read off this thread
        self._verify_timer = QTimer(self)
        self._verify_timer.setInterval(0)
        self._verify_timer.timeout.connect(self._verify_tick)
        self._verifier: ChainVerifier | None = None
        self._verify_after = 0
        self._verify_end = 0
        self._verified_once = False
        self._verify_again = False  # the witness changed while verifying: once more after

        self._model_reset()
        self.setMinimumSize(760, 520)

    def _fit_columns(self) -> None:
        """Widen the columns that must be read whole (time, class, outcome, duration) to
        what they show, never narrowing one the operator widened."""
        metrics = self.table.fontMetrics()
        style = self.table.style()
        pad = 2 * (style.pixelMetric(style.PixelMetric.PM_FocusFrameHMargin) + 1) + 8
        header = self.table.horizontalHeader()
        samples = {
            TIME: [datetime(2026, 12, 28, 23, 58, 58).strftime(TIME_FORMAT)],
            CLASS: [*WORDS.values(), class_words(None)],
            OUTCOME: [outcome_words(o) for o in OUTCOMES],
            DURATION: ["59 min 59 s"],
            SERVER: [],
            DECIDED: [],
        }
        for column, texts in samples.items():
            need = max(
                [header.sectionSizeHint(column), self.table.sizeHintForColumn(column)]
                + [metrics.horizontalAdvance(t) + pad for t in texts]
            )
            if column in (SERVER, DECIDED):
                need = min(need, 260)  # free text: the tooltip and the detail show it whole
            if self.table.columnWidth(column) < need:
                self.table.setColumnWidth(column, need)

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
                shown = class_words(str(value)) if box is self.class_box else str(value)
                box.addItem(shown, str(value))
            if current is not None and box.findData(current) < 0:
                box.addItem(str(current), current)  # a chosen filter stays chosen
            box.setCurrentIndex(max(box.findData(current), 0))
            box.blockSignals(False)

    def _model_reset(self) -> None:
        self._fit_columns()
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
        self.fixed_label.setVisible(detail is not None and detail.fixed != "{}")
        if detail is None:
            self.request_view.setPlainText("")
            self.hash_label.setText("")
            self.call_hash_label.setText("")
            self.copy_hash.setEnabled(False)
            self.detail.setPlainText(f"Run {run_id} is no longer in the store.")
            return
        self.request_view.setPlainText(detail.arguments)
        self.fixed_label.setText(f"{FIXED_LABEL}: {detail.fixed}")
        if detail.request_hash:
            self.hash_label.setText(
                f"Request hash: {detail.request_hash}"
                f" (fingerprint {present.fingerprint(detail.request_hash)})"
            )
        else:
            self.hash_label.setText("Request hash: - (no approval was asked for this run)")
        self.copy_hash.setEnabled(bool(detail.request_hash))
        self.call_hash_label.setText(f"Call hash: {detail.call_hash or '-'}")
        self.detail.setPlainText(detail.text)

    def selected_run_ids(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.rows[r].id for r in rows]

    def _copy_request(self) -> None:
        if self.current_detail is not None:
            QApplication.clipboard().setText(self.current_detail.arguments)

    def _copy_hash(self) -> None:
        if self.current_detail is not None and self.current_detail.request_hash:
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

    def witness_changed(self) -> None:
        """What the witness says changed (rule 3): an open window verifies again."""
        if not self.isVisible():
            self._verified_once = False  # verified afresh when next shown
        elif self._verifier is not None:
            self._verify_again = True
        else:
            self.verify_now()

    def verify_now(self) -> None:
        if self._verifier is not None:
            return
        self._verify_again = False
        self._verified_once = True
        self._verifier = ChainVerifier(self.store.database_id)
        self._verify_after = 0
        self._verify_end = self.store.head().seq
        self.progress.setRange(0, max(self._verify_end, 1))
        self.progress.setValue(0)
        self.verify_button.setEnabled(False)
        self._set_banner("verifying", f"Verifying the record: 0 of {self._verify_end} events…")
        # The kept head is read on a thread of its own while the chain verifies here: a
        # keyring call never holds the window (a locked keyring may wait on its prompt).
        store, heads = self.store, self.heads
        self._kept = _KEYRING.submit(lambda: kept_head(heads, store.path, store.database_id)[0])
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
                    f"Verifying the record: {self._verify_after} of {self._verify_end} events…"
                )
                return
            head = verifier.finish()
            if self._anchor(head):
                return  # the log grew past the kept head: verify on to it
        except ChainBroken as e:
            self._set_banner("broken", f"Record broken at event {e.seq}: {e}")
        except SignoffError as e:
            self._set_banner("error", f"Record not verified: {e}")
        self._stop_verifying()

    def _anchor(self, head: Head) -> bool:
        """Compare the verified head with the kept one once it is read; True while
        verification goes on (the log grew past the kept head, or the keyring has not
        answered yet)."""
        if self._kept is None or not self._kept.done():
            self._verify_timer.stop()
            QTimer.singleShot(KEPT_POLL_MS, self, self._kept_read)
            return True
        return self._compare_kept(head)

    def _kept_read(self) -> None:
        """Once the kept head is read, the verification's tick goes on and compares it."""
        if self._verifier is None:
            return
        if self._kept is not None and not self._kept.done():
            QTimer.singleShot(KEPT_POLL_MS, self, self._kept_read)
        else:
            self._verify_timer.start()

    def _compare_kept(self, head: Head) -> bool:
        """Compare the verified head with the kept one; True when verification must go on."""
        try:
            banner = kept_banner(self.store, head, self._kept.result() if self._kept else None)
        except HeadUnavailable as e:
            banner = ("not_anchored", f"{intact(head.seq)}; not anchored: {e}")
        except DatabaseRestored as e:  # another database where this one was anchored
            banner = ("broken", f"Record NOT trusted: {e}")
        if banner is None:  # the log grew past the kept head: verify on to it
            self._verify_end = self.store.head().seq
            self.progress.setMaximum(self._verify_end)
            return True
        self._set_banner(*banner)
        return False

    def _stop_verifying(self) -> None:
        self._verify_timer.stop()
        self._verifier = None
        self.progress.setValue(self.progress.maximum())
        self.verify_button.setEnabled(True)
        if self._verify_again:
            self.verify_now()

    def _set_banner(self, state: str, text: str) -> None:
        self.banner_state = state
        self.banner.setText(text)
        color = {"anchored": "#067647", "not_anchored": "#b54708", "broken": "#b42318",
                 "error": "#b42318"}.get(state, "")  # fmt: skip
        weight = "bold" if state == "broken" else "normal"
        self.banner.setStyleSheet(f"color: {color}; font-weight: {weight};" if color else "")

    # --- re-checking (app/history_recheck.py) ---------------------------------------------

    def _runs_to_recheck(self) -> list[str]:
        return self.selected_run_ids() or ([self.selected_run_id] if self.selected_run_id else [])

    def recheck_selected(self) -> None:
        self.recheck_tab.recheck_selected()

    def recheck_all(self) -> None:
        self.recheck_tab.recheck_all()

    @property
    def rechecking(self) -> bool:
        return self.recheck_tab.rechecking

    @property
    def recheck_view(self) -> QPlainTextEdit:
        return self.recheck_tab.view

    # --- exporting ----------------------------------------------------------------------

    def export_to(self, path: Path, run_ids: Sequence[str] | None = None) -> int:
        """Write the runs (all when ``run_ids`` is None) to ``path`` as JSON Lines."""
        from core.export import export_runs

        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8", newline="\n") as out:
            return export_runs(self.store, out, run_ids)

    def _export_selected_clicked(self) -> None:
        self._export_clicked(True)

    def _export_all_clicked(self) -> None:
        self._export_clicked(False)

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


def _store_time(moment: QDateTime) -> str:
    return format_time(datetime.fromtimestamp(moment.toMSecsSinceEpoch() / 1000, UTC))
