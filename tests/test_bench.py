"""The benchmarks keep running: each is run small and must print its ratio."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_verify_benchmark_runs_and_prints_its_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "verify.py"), "--events", "3000", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "ratio verify/floor:" in done.stdout
