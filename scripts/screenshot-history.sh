#!/usr/bin/env bash
# Regenerates docs/screenshots/history.png (or in the folder given): the history window over the
# demo's real record, a completed run selected, drawn by Qt on an Xvfb display at its default
# size.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/screenshots}")
export PYTHONPATH=$PWD  # this checkout's app, whichever checkout .venv was installed from
work=$(mktemp -d)
trap 'kill "${xvfb:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
.venv/bin/signoff demo --no-app --auto-approve --wait 30 --home "$work/home" >/dev/null
display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
for _ in $(seq 1 100); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done
SIGNOFF_HOME="$work/home" DISPLAY="$display" QT_QPA_PLATFORM=xcb .venv/bin/python - "$out" <<'PY'
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

app = QApplication([])
from app.history import HistoryWindow
from core import paths
from core.heads import MemoryHeadStore
from core.store import Store

store = Store.open(paths.database_path())
window = HistoryWindow(store, MemoryHeadStore(), paths.config_path())
window.show()
for _ in range(200):
    app.processEvents()
if window.table.model().rowCount() > 1:
    window.table.selectRow(1)
for _ in range(200):
    app.processEvents()
out = Path(sys.argv[1]) / "history.png"
window.grab().save(str(out))
print(out)
PY
