"""One app per database: a second start hands over and exits. Start at login, on Linux."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from app import autostart
from tests.conftest import SIGNOFF


def test_a_second_start_hands_over_to_the_running_app_and_exits(home: Path) -> None:
    env = {**os.environ, "SIGNOFF_HOME": str(home), "QT_QPA_PLATFORM": "offscreen",
           "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}  # fmt: skip
    first = subprocess.Popen([str(SIGNOFF)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (home / "run" / "wake.sock").exists():  # the app listens: it is up
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the app did not start"
            time.sleep(0.05)
        second = subprocess.run([str(SIGNOFF)], env=env, capture_output=True, text=True,
                                timeout=60, check=False)  # fmt: skip
        assert second.returncode == 0, second.stderr
        assert "already running" in second.stdout
        assert first.poll() is None  # the first one goes on
    finally:
        first.terminate()
        first.communicate(timeout=30)


def test_start_at_login_writes_and_removes_an_xdg_autostart_entry(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert not autostart.enabled()
    autostart.set_enabled(True)
    entry = tmp_path / "autostart" / "signoff.desktop"
    assert autostart.enabled()
    text = entry.read_text()
    assert text.startswith("[Desktop Entry]\n") and "\nExec=" in text and "Type=Application" in text
    autostart.set_enabled(False)
    assert not entry.exists() and not autostart.enabled()
