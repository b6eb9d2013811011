#!/usr/bin/env bash
# Regenerates docs/screenshots/ (or the folder given):
#   notification-long.png    a long request: its long line cut, saying how much is missing, the
#                            decisive argument whole after it, and only Review…
#   notification-markup.png  a request whose arguments are markup (`</span>`, entities), drawn
#                            as the text it is
# from the installed app and the real xfce4-notifyd on Xvfb, each request a real call through
# `signoff proxy` (the fake mail server of tests/app/test_xvfb_notification_markup.py) in a
# throw-away SIGNOFF_HOME (scripts/screenshot_notifications.py). What the daemon drew is read
# back and checked as that test checks it: a misleading notification is still drawn, named,
# and the script fails. Uses the desktop of tests/app/test_xvfb_desktop.py; ends everything it
# started.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/screenshots}")
bash scripts/system-packages.sh
bash scripts/setup.sh test
for tool in Xvfb xwininfo import convert display trayer dbus-daemon dbus-send dbus-monitor \
    /usr/bin/python3; do
    command -v "$tool" >/dev/null || {
        echo "screenshots: $tool is missing (scripts/system-packages.sh installs it)" >&2
        exit 2
    }
done
mkdir -p "$out"
export PYTHONPATH=$PWD
exec timeout 300 .venv/bin/python scripts/screenshot_notifications.py "$out"
