"""The benchmarks keep running: each is run small and must print its ratio."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("script", "args", "ratio_line"),
    [
        ("verify.py", ["--events", "3000", "--repeat", "1"], "ratio verify/floor:"),
        ("gate.py", ["--calls", "50", "--rounds", "5"], "ratio call/commit:"),
        ("history.py", ["--runs", "500"], "extra for the large record:"),
        ("proxy.py", ["--calls", "20"], "ratio proxied/direct:"),
        ("notify.py", ["--calls", "3"], "ratio notify/datagram:"),
        ("classify.py", ["--tools", "5", "--repeat", "1"], "ratio batch/single:"),
        ("cli.py", ["--times", "1"], "ratio command/baseline:"),
    ],
)
def test_each_benchmark_runs_and_prints_its_ratio(
    script: str, args: list[str], ratio_line: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert ratio_line in done.stdout
