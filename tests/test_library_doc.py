"""docs/library.md's example runs as written, prints what the page says, and keeps the contract
when its process is killed at every crash point: the page and what runs cannot drift."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from core.testkit import CrashPoint, Death, Scenario, crash_and_resume
from core.tools import SideEffect

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "library.md"


def _example() -> tuple[str, str]:
    """The page's example and what it says the example prints."""
    found = re.search(r"```python\n(.*?)```\n\nIt prints:\n\n```text\n(.*?)```", PAGE.read_text(),
                      re.S)  # fmt: skip
    assert found is not None, "docs/library.md has no example followed by what it prints"
    return found.group(1), found.group(2)


def test_the_library_example_runs_as_written_and_prints_what_the_page_says(capsys) -> None:
    code, prints = _example()
    exec(compile(code, str(PAGE), "exec"), {"__name__": "__main__"})  # noqa: S102  # our own page
    assert capsys.readouterr().out == prints


def test_the_page_keeps_the_places_the_other_parts_fill() -> None:
    headings = re.findall(r"^## (.+)$", PAGE.read_text(), re.M)
    assert "Model calls and limits" in headings
    assert "Telemetry" in headings


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The page's example as a module a child process can import (``library_example``)."""
    code, _ = _example()
    home = tmp_path / "module"
    home.mkdir()
    (home / "library_example.py").write_text(code)
    monkeypatch.syspath_prepend(str(home))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(home), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delitem(sys.modules, "library_example", raising=False)
    return importlib.import_module("library_example")


@pytest.mark.slow
@pytest.mark.parametrize("point", list(CrashPoint))
def test_the_example_loop_killed_at_each_point_is_resumed_by_another_process(
    tmp_path: Path, example: ModuleType, point: CrashPoint
) -> None:
    scenario = Scenario(
        SideEffect.LOCAL_MUTATION, False, tmp_path / "effects.txt",
        loop=example.agent_loop, render=example.render, tool_name="append",
        policy_allows=point is CrashPoint.AFTER_ALLOWED,
    )  # fmt: skip
    result = crash_and_resume(scenario, point, Death.SIGKILL, tmp_path)
    assert result.crashed
    assert result.status == "COMPLETED"
    assert result.same_renders
    assert result.inputs  # the loop's renders crossed the process boundary
    died_in_the_tool = point in (CrashPoint.TOOL_STARTED, CrashPoint.TOOL_DONE)
    assert result.interrupted_approved == (1 if died_in_the_tool else 0)
    assert result.effects == (2 if point is CrashPoint.TOOL_DONE else 1)
