"""Draws docs/screenshots/notification-*.png (run by screenshot-notifications.sh).

Each picture is one real request (a call through ``signoff proxy`` to the fake mail server of
tests/app/test_xvfb_notification_markup.py, left pending) notified by the installed app and
drawn by the real xfce4-notifyd on Xvfb, on a desktop of its own. The picture is taken once
the daemon's window reads back as drawn (over the accessibility bus) and its pixels have
settled; what it reads is checked as the tests check it, and a notification that misleads is
still drawn but named, and the run fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.app.test_xvfb_desktop import Desktop, Window, start_app, wait_for
from tests.app.test_xvfb_notification_markup import (
    PAYLOADS,
    approval_drawn,
    mail_rig,
    make_pending,
    problems_with,
    watch_notify_calls,
)

SHOTS = {
    # A long body before the recipient: its line cut and saying how much is missing, the
    # recipient whole after it, and only Review….
    "notification-long.png": "long-body-before-the-recipient",
    # Markup in the arguments (a span closed in `to`, entities in `body`), drawn as text.
    "notification-markup.png": "span-closes-to-and-entities-forge-bob",
}
MARGIN = 16


def around(window: Window, width: int = 1280, height: int = 800) -> tuple[int, int, int, int]:
    left, top = max(0, window.x - MARGIN), max(0, window.y - MARGIN)
    right = min(width, window.x + window.width + MARGIN)
    bottom = min(height, window.y + window.height + MARGIN)
    return left, top, right - left, bottom - top


def settled(desktop: Desktop, box: tuple[int, int, int, int]) -> bool:
    """The box's pixels the same in two captures in a row: the daemon has finished drawing."""
    x, y, w, h = box
    crops = []
    for _ in range(2):
        image = desktop.image()
        rows = (image.pixels[(r * image.width + x) * 3 : (r * image.width + x + w) * 3]
                for r in range(y, y + h))  # fmt: skip
        crops.append(b"".join(rows))
    return crops[0] == crops[1]


def shoot(out: Path, name: str, scratch: Path) -> list[str]:
    payload = PAYLOADS[name]
    home = scratch / "home"
    home.mkdir(mode=0o700)
    os.environ["SIGNOFF_HOME"] = str(home)
    with Desktop(scratch / "desktop") as desktop:
        desktop.start(accessible=True)
        backdrop = scratch / "backdrop.png"
        desktop.run("convert", "-size", "1280x800", "gradient:#4f6d8a-#23364a", str(backdrop))
        # display sets the root window's background, then exits 1 all the same.
        desktop.run("display", "-window", "root", str(backdrop), check=False, timeout=60)
        watch_notify_calls(desktop)
        rig = mail_rig(home, payload.tool)
        start_app(desktop, home)
        request = make_pending(rig, payload.tool, payload.arguments)
        drawn = wait_for(lambda: approval_drawn(desktop), "xfce4-notifyd drawing the request")
        [window] = wait_for(desktop.notifications, "the notification's window")
        box = around(window)
        wait_for(lambda: settled(desktop, box), "the notification drawn to the end")
        desktop.screenshot(out, box)
        found = problems_with(drawn, request, payload)
        return [*found, drawn.report()] if found else []


def main() -> int:
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    failed = False
    for filename, name in SHOTS.items():
        with tempfile.TemporaryDirectory(prefix="signoff-notifications-") as scratch:
            problems = shoot(folder / filename, name, Path(scratch))
        print(folder / filename)
        if problems:
            failed = True
            print(f"  it shows a notification that misleads ({name}):", file=sys.stderr)
            lines = (line for problem in problems for line in problem.splitlines())
            print("\n".join(f"  {line}" for line in lines), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
