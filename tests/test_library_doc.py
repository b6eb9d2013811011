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


def _examples() -> list[tuple[str, str]]:
    """The page's examples, each with what the page says it prints."""
    return re.findall(r"```python\n(.*?)```\n\nIt prints:\n\n```text\n(.*?)```", PAGE.read_text(),
                      re.S)  # fmt: skip


def _example() -> tuple[str, str]:
    """The page's first example (the agent loop) and what it prints."""
    found = _examples()
    assert found, "docs/library.md has no example followed by what it prints"
    return found[0]


def test_the_page_has_its_loop_and_its_telemetry_example() -> None:
    assert len(_examples()) == 2


@pytest.mark.parametrize("which", [0, 1], ids=["agent-loop", "telemetry"])
def test_the_library_examples_run_as_written_and_print_what_the_page_says(
    capsys, which: int
) -> None:
    code, prints = _examples()[which]
    exec(compile(code, str(PAGE), "exec"), {"__name__": "__main__"})  # noqa: S102  # our own page
    assert capsys.readouterr().out == prints


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
        model=example.model_config, limits=example.LIMITS,
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
