"""Draws docs/screenshots/approval-dialog-scopes.png: the approval dialog of a request the policy
asked about, with its scope choice open (once, this exact request for 15 min, 1 h, until Signoff
quits), with the real widgets on Qt's offscreen platform. The open list is a window of its own,
so it is grabbed apart and painted above the box, over the dialog's picture.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshot_scopes.py [OUT.png]
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QApplication

from app.dialog import ApprovalDialog
from app.model import Pending
from core import canonical

ARGUMENTS = {"path": "/home/me/notes/2026-12-05.md", "content": "Call the printer shop at 10."}
SCHEMA = {"required": ["path", "content"], "properties": {"path": {}, "content": {}}}


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots/approval-dialog-scopes.png")
    app = QApplication.instance() or QApplication(sys.argv)
    created = (datetime.now(UTC) - timedelta(seconds=3)).isoformat()
    pending = Pending(
        "ap-1", "run-1", "notes", "write_note", canonical.dumps_text(ARGUMENTS),
        canonical.sha256_hex(ARGUMENTS), "local_mutation", "local_mutation", created,
        "the rule for local_mutation: approve", "Write a note.", schema=SCHEMA,
    )  # fmt: skip
    dialog = ApprovalDialog(pending)
    dialog.show()
    app.processEvents()
    dialog.scope.setCurrentIndex(1)  # the list opens at the choice the operator points at
    dialog.scope.showPopup()
    app.processEvents()
    popup = dialog.scope.view().window()
    picture = dialog.grab()
    # Offscreen, every window stands at the screen's corner: the list is placed under its box.
    box = dialog.scope
    where = box.mapTo(dialog, box.rect().bottomLeft())
    where.setY(where.y() - popup.height() - box.height())  # it opens upwards at the bottom
    painter = QPainter(picture)
    painter.drawPixmap(where, popup.grab())
    painter.end()
    if not picture.save(str(out)):
        raise SystemExit(f"could not write {out}")
    print(out)


if __name__ == "__main__":
    main()
