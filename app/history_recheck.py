"""The history window's Re-check tab: would today's policy decide each recorded run the same?

Runs are re-checked in slices on a timer (``RECHECK_PER_TICK`` a tick), with progress, so the
window never freezes (app/history.py rule 3); every difference is listed. Only reads.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.history_model import RECHECK_PER_TICK
from core.errors import SignoffError
from core.store import Store


class RecheckTab(QWidget):
    def __init__(
        self, store: Store, config_path: Path, selected: Callable[[], list[str]], mono: QFont
    ) -> None:
        super().__init__()
        self.store = store
        self.config_path = config_path
        # The runs the window has selected; weakly: the window owns this tab, and a strong
        # reference back would keep a closed window alive (tests/app/test_tray_lifetime.py).
        self._selected = weakref.WeakMethod(selected)  # type: ignore[arg-type]
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Would today's policy decide the same?"), 1)
        self.selected_button = QPushButton("Re-check the selected run")
        self.all_button = QPushButton("Re-check all runs")
        self.selected_button.clicked.connect(self.recheck_selected)
        self.all_button.clicked.connect(self.recheck_all)
        row.addWidget(self.selected_button)
        row.addWidget(self.all_button)
        layout.addLayout(row)
        self.view = QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setFont(mono)
        layout.addWidget(self.view, 1)

        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)
        self._queue: list[str] = []
        self._policy: Any = None
        self._lines: list[str] = []
        self._counts = [0, 0, 0]  # runs, evaluations, differences
        self.rechecking = False

    def recheck_selected(self) -> None:
        selected = self._selected()
        ids = selected() if selected is not None else []
        if not ids:
            self.view.setPlainText("Select a run to re-check.")
            return
        self._start(ids)

    def recheck_all(self) -> None:
        with self.store.snapshot() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY created_at, rowid")]
        self._start(ids)

    def _start(self, run_ids: list[str]) -> None:
        from core.proxy.config import load

        try:
            self._policy = load(self.config_path).policy()
        except SignoffError as e:
            self.view.setPlainText(f"Today's policy cannot be read: {e}")
            return
        self._queue = list(reversed(run_ids))
        self._lines = []
        self._counts = [0, 0, 0]
        self.rechecking = True
        self.all_button.setEnabled(False)
        self.selected_button.setEnabled(False)
        self.view.setPlainText(f"Re-checking {len(run_ids)} runs…")
        self._timer.start()

    def _tick(self) -> None:
        from core.recheck import recheck

        for _ in range(RECHECK_PER_TICK):
            if not self._queue:
                break
            run_id = self._queue.pop()
            self._counts[0] += 1
            try:
                result = recheck(self.store, run_id, self._policy)
            except SignoffError as e:
                self._lines.append(f"{run_id}: cannot be re-checked: {e}")
                continue
            self._counts[1] += result.evaluations
            for d in result.differences:
                self._counts[2] += 1
                self._lines.append(
                    f"{d.run_id} step {d.step}: then {_decision(d.then)}"
                    f" (policy {d.then_policy or '?'}); now {_decision(d.now)}"
                    f" (policy {d.now_policy or '?'})"
                )
        runs, evaluations, differences = self._counts
        head = (
            f"{runs} runs, {evaluations} evaluations re-checked with today's policy"
            f" ({self.config_path}): "
            + ("the same decisions." if differences == 0 else f"{differences} differ:")
        )
        if self._queue:
            self.view.setPlainText(head + f" ({len(self._queue)} runs to go…)")
            return
        self._timer.stop()
        self.rechecking = False
        self.all_button.setEnabled(True)
        self.selected_button.setEnabled(True)
        self.view.setPlainText("\n".join([head, *self._lines]))


def _decision(d: Any) -> str:
    kind = f" ({d.kind})" if d.kind else ""
    return f"{d.outcome.value}{kind}"
