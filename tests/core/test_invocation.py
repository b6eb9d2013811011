"""The command Signoff suggests is one that works where it runs (issue 21: from a source
checkout, ``signoff demo`` was "command not found")."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from core import invocation
from tests.conftest import SIGNOFF


def test_a_suggested_command_is_the_scripts_absolute_path_when_signoff_is_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a shell where `signoff` is not found
    line = invocation.suggest("verify", "--help")
    argv = shlex.split(line)
    assert Path(argv[0]).is_absolute() and Path(argv[0]).samefile(SIGNOFF)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PATH": str(tmp_path)})  # fmt: skip
    assert done.returncode == 0 and "usage: signoff verify" in done.stdout, done.stderr


def test_a_suggested_command_is_the_bare_name_when_signoff_on_path_is_this_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{SIGNOFF.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert invocation.suggest("demo") == "signoff demo"


def test_a_program_runs_this_signoff_by_its_absolute_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    [script] = invocation.signoff_command()
    assert Path(script).is_absolute() and Path(script).samefile(SIGNOFF)
