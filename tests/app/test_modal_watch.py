"""A modal question nobody answers ends and is named (tests/app/modal_watch.py), so that a test
waiting on one fails instead of hanging the suite."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox

from tests.app.modal_watch import ModalWatch


def test_a_modal_question_nobody_answers_is_closed_and_named(qtbot) -> None:
    watch = ModalWatch(0.5)
    box = QMessageBox(QMessageBox.Icon.Question, "Not saved", "Nobody answers this.")
    box.setStandardButtons(QMessageBox.StandardButton.Cancel)
    box.exec()  # returns only because the watch closed it
    assert watch.stop() == "QMessageBox 'Not saved': 'Nobody answers this.'"


def test_a_modal_question_answered_in_time_is_left_alone(qtbot) -> None:
    watch = ModalWatch(30)
    box = QMessageBox(QMessageBox.Icon.Question, "Asked", "Answered at once.")
    box.setStandardButtons(QMessageBox.StandardButton.Ok)
    QTimer.singleShot(200, box.accept)
    box.exec()
    assert watch.stop() == ""
