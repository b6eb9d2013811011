"""Draws docs/screenshots/rule-editor.png: the rule editor ("Always…" in the approval dialog)
prefilled from a request that writes a note, its path's condition set to "is in the folder",
with the real widgets on Qt's offscreen platform, in a throw-away home.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshot_rule_editor.py [OUT.png]
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ARGUMENTS = {
    "path": "/home/me/notes/2026-12-05.md",
    "text": "Release 0.2 ships on Friday",
    "append": True,
}
SCHEMA = {"required": ["path", "text"], "properties": {"path": {}, "text": {}, "append": {}}}


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots/rule-editor.png")
    with tempfile.TemporaryDirectory(prefix="signoff-rule-editor-") as home:
        os.chmod(home, 0o700)
        os.environ["SIGNOFF_HOME"] = home  # read (nothing is saved): never the operator's own
        from PySide6.QtWidgets import QApplication

        from app.model import Pending
        from app.rule_editor import RuleEditor
        from app.settings import SettingsState
        from core import canonical, paths

        app = QApplication.instance() or QApplication(sys.argv)
        created = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
        pending = Pending(
            "ap-1", "run-1", "notes", "write_note", canonical.dumps_text(ARGUMENTS),
            canonical.sha256_hex(ARGUMENTS), "local_mutation", "local_mutation", created,
            "the rule for local_mutation: approve", "Appends a line to a note.", schema=SCHEMA,
        )  # fmt: skip
        editor = RuleEditor(pending, SettingsState(paths.config_path(), None))
        editor.choose("path", "folder")
        editor.expires.setCurrentIndex(editor.expires.findData("30d"))
        editor.note.setText("my notes folder")
        editor.details_button.setChecked(True)
        editor.resize(720, 680)  # the condition's JSON Schema in sight whole
        editor.show()
        app.processEvents()
        if not editor.grab().save(str(out)):
            raise SystemExit(f"could not write {out}")
    print(out)


if __name__ == "__main__":
    main()
