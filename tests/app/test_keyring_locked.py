"""A locked keyring never freezes the app: the menu and the notifications go on, the tray says
the keyring is locked, the wakes do not ask the keyring again and again, and no decision is
made unsigned. Each case runs tests/app/locked_keyring.py in a private D-Bus session with its
own gnome-keyring (a locked keyring cannot be unlocked there without a prompt)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, need

pytestmark = pytest.mark.slow


def scenario(mode: str, tmp_path: Path) -> dict[str, Any]:
    need(
        shutil.which("dbus-run-session") is not None
        and shutil.which("gnome-keyring-daemon") is not None,
        "dbus-run-session and gnome-keyring-daemon are needed (scripts/system-packages.sh)",
    )
    out = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    done = subprocess.run(
        ["dbus-run-session", "--", "bash", str(ROOT / "scripts/with-secret-service.sh"),
         sys.executable, "-m", "tests.app.locked_keyring", mode, str(out)],
        env=env, capture_output=True, text=True, timeout=240, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0 and out.exists(), (done.stdout, done.stderr)
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_a_keyring_locked_by_the_secret_service_leaves_the_app_working(tmp_path: Path) -> None:
    result = scenario("lock", tmp_path)
    assert result["locked_shown"] is True
    assert len(result["notified"]) == 5  # every request notified, the keyring locked
    assert "Keyring locked: chain not anchored, decisions cannot be signed" in result["menu"]
    assert "keyring locked" in result["tooltip"] and "chain not anchored" in result["tooltip"]
    assert result["keyring_calls_by_wakes"] == 0  # five wakes, no keyring call, no prompt
    assert result["on_app_thread"] == []  # and none the app's thread waited on
    assert (result["history_verified"], result["banner"]) == (True, "not_anchored")
    assert result["decided"] is False and result["said"][0] == "Signoff: not decided"
    assert result["statuses"] == ["pending"] * 5


def test_a_keyring_that_does_not_answer_leaves_the_menu_and_notifications_working(
    tmp_path: Path,
) -> None:
    """Every keyring call waits, as one does while the unlock prompt is up, and is released
    only at the end: meanwhile all five requests were notified and listed in the menu, so no
    keyring call held the app's thread."""
    result = scenario("block", tmp_path)
    assert result["released_during"] is False
    assert result["on_app_thread"] == []  # the history's banner included
    assert (result["history_verified"], result["banner"]) == (True, "not_anchored")
    assert len(result["notified"]) == 5
    assert sum("fingerprint" in line for line in result["menu"]) == 5
    assert result["decided"] is False
    assert result["said"][1].startswith("Keyring locked or unavailable: "), result["said"]
    assert result["statuses"] == ["pending"] * 5
