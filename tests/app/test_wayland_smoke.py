"""The approval dialog and the history window on Wayland: a smoke test.

Debian's weston with its headless backend is the compositor (no screen, no GPU); Qt's wayland
platform plugin comes in PySide6's wheel. A private session bus carries a stand-in
StatusNotifierItem host (tests/app/tray_host.py), as KDE Plasma and GNOME's AppIndicator
extension carry theirs on Wayland, and the tray app's windows are opened from its tray menu
by the dbusmenu click a panel sends. The app runs in tests/app/wayland_probe.py, which reports
what Qt itself knows (the compositor exposed the window, what it painted, what Qt logged):
Wayland gives a client no way to look at another's windows, as xwininfo does on X11.

What this covers: the windows open, are exposed by the compositor, paint their content,
close, and Qt logs no warning on the way. What it does not: how they look (no screenshot), input
from a real seat. docs/decisions/0046-real-desktops-in-tests.md says why weston.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.test_labels import dbusmenu_shows
from tests.app.test_xvfb_desktop import PACKAGES, Desktop
from tests.app.tray_host import TrayHost
from tests.conftest import ROOT, need
from tests.waiting import read_ready_line, wait_for

# Run apart (whole_machine): side by side with the other tests, the history window it asks for
# through the tray's menu did not open within 60 s in two clean runs of three, for a reason not
# yet found (docs/reliability.md, "The suite's time"); alone, it opens at once.
pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]

SOCKET = "signoff-test"
KEYRING = "keyrings.alt.file.PlaintextKeyring"  # in the test's XDG_DATA_HOME

REPORT_WAIT = 90.0  # seconds: the probe's own deadline (60 s), and its start


def _wayland_plugin() -> Path:
    import PySide6

    return Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqwayland.so"


@pytest.fixture
def compositor(tmp_path: Path) -> Iterator[Desktop]:
    """weston, headless, and a private session bus: a Desktop with no X server."""
    for tool in ("weston", "dbus-daemon"):
        need(shutil.which(tool) is not None, f"{tool} is not installed ({PACKAGES})")
    need(_wayland_plugin().exists(), f"PySide6 has no Wayland plugin at {_wayland_plugin()}")
    root = tmp_path / "wayland"
    for sub in ("logs", "runtime", "home", "data"):
        (root / sub).mkdir(mode=0o700, parents=True)
    with Desktop(root) as desktop:
        desktop.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(root / "home"),
            "XDG_RUNTIME_DIR": str(root / "runtime"),
            "XDG_DATA_HOME": str(root / "data"),
        }
        desktop._start_bus()
        argv = ["weston", "--backend=headless-backend.so", f"--socket={SOCKET}", "--idle-time=0"]
        weston = desktop.spawn("weston", argv)

        def listening() -> bool:
            assert weston.poll() is None, f"weston exited: {desktop.log('weston')}"
            return (root / "runtime" / SOCKET).exists()

        wait_for(listening, "weston listening on its socket")
        desktop.env["WAYLAND_DISPLAY"] = SOCKET
        yield desktop


def _entry(host: TrayHost, item: str, starts: str) -> int:
    entries = host.menu(item)
    found = [e.id for e in entries if dbusmenu_shows(e.label).startswith(starts) and e.enabled]
    assert len(found) == 1, (starts, [dbusmenu_shows(e.label) for e in entries])
    return found[0]


def test_the_dialog_and_the_history_open_paint_and_close_on_wayland(
    compositor: Desktop, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {**compositor.env, "QT_QPA_PLATFORM": "wayland", "SIGNOFF_HOME": str(home),
           "PYTHONPATH": str(ROOT), "PYTHON_KEYRING_BACKEND": KEYRING}  # fmt: skip
    with TrayHost(compositor.bus) as host:
        process = compositor.spawn(
            "probe", [sys.executable, "-m", "tests.app.wayland_probe", str(home)],
            env=env, cwd=ROOT, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert process.stdout is not None
        out = process.stdout.fileno()
        try:
            started = json.loads(read_ready_line(out, "the app on Wayland, started"))
            assert started["platform"] == "wayland"
            assert started["dbus_menu"] is True
            item = host.wait_for_item(20)
            host.click(item, _entry(host, item, "srv/push "))
            host.click(item, _entry(host, item, "History…"))
            report: dict[str, Any] = json.loads(
                read_ready_line(out, "the windows, shown", REPORT_WAIT)
            )
            assert process.wait(20) == 0
        except (AssertionError, json.JSONDecodeError) as e:
            raise AssertionError(f"{e}; its log:\n{compositor.log('probe')}") from None

    dialog, history = report["dialog"], report["history"]
    assert dialog is not None and history is not None, report
    assert dialog["title"] == "Signoff: srv/push asks for approval"
    assert history["title"] == "Signoff: history"
    for window in (dialog, history):
        assert window["exposed"] and window["closed"], window
        assert window["width"] >= 400 and window["height"] >= 200, window
        assert window["colours"] > 16, window  # text and frames drawn, not a blank surface
    assert {"Approve", "Reject"} <= set(dialog["texts"]), dialog["texts"]
    assert history["rows"] == 1, history  # the request's run
    assert report["messages"] == []
    assert "Traceback" not in compositor.log("probe")
