#!/usr/bin/env bash
# Regenerates the screenshots in docs/screenshots/ (or the folder given) from the real app:
#   first-run.png        the first start on an empty home: the welcome beside the tray icon
#   notification.png     the approval's desktop notification, with Approve / Reject
#   tray-menu.png        the tray icon's menu, with the pending request in it
#   approval-dialog.png  the approval dialog (arguments, request hash), opened by a second `signoff`
# on Xvfb with xfce4-notifyd, trayer and openbox, in a throw-away SIGNOFF_HOME whose one pending
# approval is made by a real call through `signoff proxy` (the fake notes server of the tests).
# Uses the desktop of tests/app/test_xvfb_desktop.py; ends everything it started. Then, into
# the same folder: the dialog for a long request (scripts/screenshot_dialog.py), its scope
# choice open (scripts/screenshot_scopes.py), the rule editor prefilled from a request
# (scripts/screenshot_rule_editor.py), the history
# window (scripts/screenshot-history.sh), and every settings page with the add-server dialog
# and the wiring preview (scripts/screenshot-settings.sh).
# SIGNOFF_NO_SETUP=1 uses .venv as it is (a worktree sharing another checkout's .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/screenshots}")
if [ -z "${SIGNOFF_NO_SETUP:-}" ]; then
    bash scripts/system-packages.sh
    bash scripts/setup.sh test
fi
for tool in Xvfb xdotool xwininfo xprop import convert display trayer openbox dbus-daemon \
    dbus-send; do
    command -v "$tool" >/dev/null || {
        echo "screenshots: $tool is missing (scripts/system-packages.sh installs it)" >&2
        exit 2
    }
done
mkdir -p "$out"
export PYTHONPATH=$PWD
timeout 300 .venv/bin/python - "$out" <<'PY'
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.app.test_xvfb_desktop import (
    SIGNOFF, Call, Desktop, Window, app_env, demo_server, find_buttons, start_app, wait_for,
)
from tests.proxy.rig import Rig

out = Path(sys.argv[1])
MARGIN = 16
ARGUMENTS = {"text": "Release 0.2 ships on Friday"}  # short: shown whole


def around(*windows: Window, margin: int = MARGIN) -> tuple[int, int, int, int]:
    """The box holding the windows, with a margin, kept on the 1280x800 screen."""
    left = max(0, min(w.x for w in windows) - margin)
    top = max(0, min(w.y for w in windows) - margin)
    right = min(1280, max(w.x + w.width for w in windows) + margin)
    bottom = min(800, max(w.y + w.height for w in windows) + margin)
    return left, top, right - left, bottom - top


with tempfile.TemporaryDirectory(prefix="signoff-screens-") as scratch:
    tmp = Path(scratch)
    home = tmp / "home"
    home.mkdir(mode=0o700)
    os.environ["SIGNOFF_HOME"] = str(home)
    rig = Rig(home)
    demo_server(rig, tmp / "notes.txt")
    with Desktop(tmp / "desktop") as desktop:
        desktop.start(window_manager=True, expire=6)  # the notification leaves room later
        desktop.env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # the app of this checkout
        backdrop = tmp / "backdrop.png"
        subprocess.run(["convert", "-size", "1280x800", "gradient:#4f6d8a-#23364a",
                        str(backdrop)], check=True, timeout=60)
        # display sets the root window's background, then exits 1 all the same.
        desktop.run("display", "-window", "root", str(backdrop), check=False, timeout=60)

        # The first start, on a home with nothing set up: the welcome, beside the icon.
        first = tmp / "first"
        first.mkdir(mode=0o700)
        newcomer = start_app(desktop, first, name="first")
        panel = desktop.tray_panel()
        assert panel is not None
        welcome = wait_for(lambda: desktop.notifications() or desktop.popups(),
                           "the welcome shown on the first start")
        desktop.screenshot(out / "first-run.png", around(*welcome, panel))
        desktop.end(newcomer)
        wait_for(lambda: desktop.tray_icon() is None, "the first app's icon gone")
        wait_for(lambda: not desktop.notifications(), "the welcome gone", timeout=30)
        start_app(desktop, home)

        # A real call through the proxy, held briefly: it stays pending for the operator.
        call = Call(rig, ARGUMENTS, hold=0.5)
        try:
            assert "pending" in call.result(60)
        finally:
            call.close()
        [waiting] = rig.pending()

        def drawn() -> Window | None:
            shown = desktop.notifications()
            ok = len(shown) == 1 and len(find_buttons(desktop.image(), shown[0])) == 2
            return shown[0] if ok else None

        notification = wait_for(drawn, "the notification with Approve / Reject")
        desktop.screenshot(out / "notification.png", around(notification))

        icon = desktop.tray_icon()
        panel = desktop.tray_panel()
        assert icon is not None and panel is not None
        desktop.click(*icon.centre, button=3)
        [menu] = wait_for(desktop.popups, "the tray icon's menu")
        desktop.screenshot(out / "tray-menu.png", around(menu, panel))
        desktop.keys("Escape")
        wait_for(lambda: not desktop.popups(), "the menu closing")

        # A second start hands over to the running app, which opens the first pending dialog
        # (the notification stays on the screen until acted on; the shot is cropped to the
        # dialog).
        second = subprocess.run([str(SIGNOFF)], env=app_env(desktop, home), capture_output=True,
                                text=True, timeout=60, check=False)
        assert "already running" in second.stdout, (second.stdout, second.stderr)
        title = f"Signoff: {waiting['server']}/{waiting['tool']} asks for approval"
        dialog = wait_for(lambda: desktop.window_named(title), f"the dialog {title!r}")
        frame = wait_for(lambda: desktop.toplevel(dialog), "the dialog's frame")
        # The notification stays until it is acted on; taken off the screen (not closed), so
        # that it does not cover the dialog's corner in the shot.
        for shown in desktop.notifications():
            desktop.run("xdotool", "windowunmap", "--sync", shown.id)
        wait_for(lambda: not desktop.notifications(), "the notification off the screen")
        desktop.screenshot(out / "approval-dialog.png", around(frame))

for name in ("first-run.png", "notification.png", "tray-menu.png", "approval-dialog.png"):
    print(out / name)
PY
QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshot_dialog.py \
    "$out/approval-dialog-long.png" 2> >(grep -v propagateSizeHints >&2)
QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshot_scopes.py \
    "$out/approval-dialog-scopes.png" 2> >(grep -v -e propagateSizeHints -e "does not support" >&2)
QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshot_rule_editor.py \
    "$out/rule-editor.png" 2> >(grep -v propagateSizeHints >&2)
bash scripts/screenshot-history.sh "$out"
bash scripts/screenshot-settings.sh "$out"
