"""Every window, page and dialog fits: at 1280x800 and at 200 % (a 2560x1600 screen), at its
default size and over long, realistic data, no label or button is cut, no column that must be
read whole (a time, a state, a class) is elided or pushed out of sight, nothing lies outside
its window, no window is larger than the screen. Each screen is a process of its own
(tests/app/layout_probe.py): the offscreen platform's screen is set when it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WINDOWS = ["History", "Approval dialog", "Rule editor", "Settings, Servers", "Settings, Tools",
           "Settings, Prompts", "Settings, Policy", "Settings, Rules", "Settings, MCP hosts",
           "Wiring preview", "Add-server dialog", "Tray menu"]  # fmt: skip
SCREENS = {"1280x800": (1280, 800, 1), "200 %": (2560, 1600, 2)}
PROBE_SECONDS = 240


def probe(folder: Path, width: int, height: int, scale: int) -> dict[str, list[str]]:
    """Run the probe on a screen of ``width`` x ``height`` device pixels at ``scale``; its
    problems, by window."""
    home = folder / "home"
    home.mkdir(mode=0o700)
    screen = folder / "screen.json"
    screen.write_text(json.dumps({"screens": [
        {"name": "probe", "x": 0, "y": 0, "width": width, "height": height,
         "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))  # fmt: skip
    env = {**os.environ, "SIGNOFF_HOME": str(home), "QT_SCALE_FACTOR": str(scale),
           "QT_QPA_PLATFORM": f"offscreen:configfile={screen}"}  # fmt: skip
    command = [sys.executable, "-m", "tests.app.layout_probe"]
    done = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=PROBE_SECONDS, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["seen"] == WINDOWS, said["seen"]
    return {w: [p for p in said["problems"] if p.startswith(f"{w}:")] for w in WINDOWS}


# Its module fixture is set up once: the file's tests run on one worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("test_layout")


@pytest.fixture(scope="module", params=list(SCREENS))
def problems(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    width, height, scale = SCREENS[request.param]
    return probe(tmp_path_factory.mktemp("layout"), width, height, scale)


@pytest.mark.parametrize("window", WINDOWS)
def test_nothing_is_clipped_elided_or_out_of_sight_at_the_default_size(
    problems: dict[str, list[str]], window: str
) -> None:
    assert problems[window] == []
