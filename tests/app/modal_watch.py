"""Closes a modal widget that has waited too long for an answer in a test, and says what it
asked (tests/conftest.py's ``_no_unanswered_modal``)."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox, QWidget


def describe(widget: QWidget) -> str:
    text = widget.text() if isinstance(widget, QMessageBox) else ""
    return f"{type(widget).__name__} {widget.windowTitle()!r}" + (f": {text!r}" if text else "")


class ModalWatch:
    """Looks at the application's active modal widget every 100 ms, from the event loop that
    modal runs; one still there after ``limit`` seconds is closed and remembered."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.unanswered: list[str] = []
        self._seen: tuple[QWidget, float] | None = None
        self._timer = QTimer()
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._look)
        self._timer.start()

    def _look(self) -> None:
        modal = QApplication.activeModalWidget()
        if modal is None:
            self._seen = None
            return
        if self._seen is None or self._seen[0] is not modal:
            self._seen = (modal, time.monotonic())
            return
        if time.monotonic() - self._seen[1] < self.limit:
            return
        self.unanswered.append(describe(modal))
        self._seen = None
        if isinstance(modal, QDialog):
            modal.reject()
        modal.close()

    def stop(self) -> str:
        self._timer.stop()
        self._timer.timeout.disconnect(self._look)
        self._timer.deleteLater()
        return "; ".join(self.unanswered)
