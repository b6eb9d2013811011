#!/usr/bin/env bash
# Regenerates docs/screenshots/history.png (or in the folder given): the history window over the
# demo's real record, then a rule on write_note and a call through `signoff proxy demo` that it
# allows unasked (its row says "allowed by rule R..."), a completed run selected, drawn by Qt on
# an Xvfb display at its default size.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/screenshots}")
export PYTHONPATH=$PWD  # this checkout's app, whichever checkout .venv was installed from
work=$(mktemp -d)
trap 'kill "${xvfb:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
.venv/bin/signoff demo --no-app --auto-approve --wait 30 --home "$work/home" >/dev/null
SIGNOFF_HOME="$work/home" .venv/bin/signoff rule add --server demo --tool write_note --allow \
    --pattern 'name=^todo-' --note "the agent's to-do notes" >/dev/null
SIGNOFF_HOME="$work/home" .venv/bin/python - <<'PY'
# One call as a host makes it, through the proxy: the rule allows it without asking.
import os

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main() -> None:
    params = StdioServerParameters(command=".venv/bin/signoff", args=["proxy", "demo"],
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("write_note", {"name": "todo-shopping.md",
                                                        "text": "Milk and bread.\n"})
        assert not getattr(result, "is_error", getattr(result, "isError", False)), result


anyio.run(main)
PY
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
