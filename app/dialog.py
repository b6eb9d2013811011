"""The approval dialog: everything needed to decide, nothing that can mislead.

The exact canonical arguments, pretty-printed in a scrollable read-only view (never cut); the
full SHA-256 of the request and its fingerprint; tool, server, class, the pinned description,
the policy's reason, how long it has waited, and what kind of approval it is. Approve and
Reject take an optional reason. No button is the default, so a stray Enter approves nothing.
The decision goes through ``core.approvals`` with the hash shown as the expected hash.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.model import Pending

KIND_TEXT = {
    "interrupted_side_effect": "Interrupted: this call started and its outcome is unknown."
    " Approving runs it again, once.",
    "duplicate": "Duplicate: the same call already ran ({reason}).",
}


def waited(created_at: str, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - datetime.fromisoformat(created_at)).total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class ApprovalDialog(QDialog):
    decided = Signal(str, str, str)  # approval id, "approve" or "reject", reason
    details = Signal(str)  # run id: show it in the history window

    def __init__(self, pending: Pending, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pending = pending
        self.setWindowTitle(f"Signoff: {pending.title} asks for approval")
        self.setMinimumWidth(560)
        layout = QVBoxLayout(self)

        kind = KIND_TEXT.get(pending.kind, "").format(reason=pending.reason)
        self.kind_label = QLabel(kind or f"Approval of a {pending.side_effect or '?'} call.")
        self.kind_label.setWordWrap(True)
        if pending.kind in KIND_TEXT or pending.side_effect == "destructive":
            self.kind_label.setStyleSheet("font-weight: bold; color: #b42318;")
        layout.addWidget(self.kind_label)

        form = QFormLayout()
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        for label, value in (
            ("Tool", pending.tool or "?"),
            ("Server", pending.server or "(library run)"),
            ("Class", pending.side_effect or "?"),
            ("Policy", pending.reason or "-"),
            ("Waiting", waited(pending.created_at)),
        ):
            form.addRow(label, QLabel(value))
        self.description = QLabel(pending.description or "(no description)")
        self.description.setWordWrap(True)
        self.description.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow("Description", self.description)
        self.hash_label = QLabel(f"{pending.request_hash}\n{pending.fingerprint}")
        self.hash_label.setFont(mono)
        self.hash_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow("Request SHA-256", self.hash_label)
        layout.addLayout(form)

        layout.addWidget(QLabel("Arguments, exactly as they will be sent:"))
        self.arguments = QPlainTextEdit()
        self.arguments.setReadOnly(True)
        self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.arguments.setFont(QFont(mono))
        self.arguments.setPlainText(_pretty(pending.arguments))
        layout.addWidget(self.arguments, 1)

        self.reason = QLineEdit()
        self.reason.setPlaceholderText("Reason (optional, recorded with your decision)")
        layout.addWidget(self.reason)

        buttons = QHBoxLayout()
        self.history_button = QPushButton("Details in history…")
        self.history_button.setAutoDefault(False)
        self.history_button.clicked.connect(lambda: self.details.emit(pending.run_id))
        buttons.addWidget(self.history_button)
        buttons.addStretch(1)
        self.reject_button = QPushButton("Reject")
        self.approve_button = QPushButton("Approve")
        for button in (self.reject_button, self.approve_button):
            button.setAutoDefault(False)
            button.setDefault(False)
            buttons.addWidget(button)
        layout.addLayout(buttons)
        self.reject_button.clicked.connect(lambda: self._decide("reject"))
        self.approve_button.clicked.connect(lambda: self._decide("approve"))

    def _decide(self, decision: str) -> None:
        self.decided.emit(self.pending.id, decision, self.reason.text())
        self.accept()


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return arguments
