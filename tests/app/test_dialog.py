"""The approval dialog shows what is needed to decide, and a stray Enter approves nothing."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from app.dialog import ApprovalDialog
from app.model import read_pending
from core.store import Store
from tests.app.pending import make_pending


def _dialog(store: Store, qtbot, **kw) -> ApprovalDialog:
    make_pending(store, **kw)
    [pending] = read_pending(store)
    dialog = ApprovalDialog(pending)
    qtbot.addWidget(dialog)
    return dialog


@pytest.mark.guarantee("G-APP-1")
def test_the_dialog_shows_the_exact_arguments_whole_and_the_full_hash(store: Store, qtbot) -> None:
    long_value = "x" * 5000
    dialog = _dialog(store, qtbot, arguments={"n": 1, "text": long_value})
    shown = dialog.arguments.toPlainText()
    assert json.loads(shown) == {"n": 1, "text": long_value}  # whole, never cut
    assert dialog.pending.request_hash in dialog.hash_label.text()
    assert dialog.pending.fingerprint in dialog.hash_label.text()
    assert dialog.arguments.isReadOnly()


@pytest.mark.guarantee("G-APP-1")
def test_enter_approves_nothing(store: Store, qtbot) -> None:
    dialog = _dialog(store, qtbot)
    decided: list[tuple[str, str, str]] = []
    dialog.decided.connect(lambda *a: decided.append(a))
    dialog.show()
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    qtbot.keyClick(dialog.reason, Qt.Key.Key_Enter)
    qtbot.keyClick(dialog.approve_button, Qt.Key.Key_Return)
    assert decided == []
    assert not dialog.approve_button.isDefault() and not dialog.approve_button.autoDefault()


def test_approve_and_reject_carry_the_reason(store: Store, qtbot) -> None:
    dialog = _dialog(store, qtbot)
    with qtbot.waitSignal(dialog.decided) as signal:
        dialog.reason.setText("looked at it")
        qtbot.mouseClick(dialog.reject_button, Qt.MouseButton.LeftButton)
    assert signal.args == [dialog.pending.id, "reject", "looked at it"]


def test_a_destructive_request_says_so(store: Store, qtbot) -> None:
    dialog = _dialog(store, qtbot, tool="delete")
    assert dialog.pending.side_effect == "destructive"
    assert "destructive" in dialog.kind_label.text()
