#!/usr/bin/env bash
# Regenerates docs/screenshots/settings-*.png: the settings window over a real server (the
# demo's notes server), one of its tools reworded since it was pinned, and a sample Claude
# Desktop file being wired; drawn by Qt on an Xvfb display.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill "${xvfb:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
for _ in $(seq 1 100); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done
mkdir -m 700 "$work/home"
SIGNOFF_HOME="$work/home" HOME="$work" DISPLAY="$display" QT_QPA_PLATFORM=xcb \
    .venv/bin/python scripts/screenshot_settings.py "$work"
