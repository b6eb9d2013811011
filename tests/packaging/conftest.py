"""The Linux bundle, built once per test run by packaging/build-linux.sh into a temporary folder
and unpacked from its tarball, as a person would get it; and the packaging scripts' modules."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT, need

BUILD_TIMEOUT = 900  # seconds; a cold build takes about 25 s on the development machine
# docs/benchmarks.md states the budget in this form; the test reads it there, so they agree.
BUDGET = re.compile(r"Budget: (\d+) MiB unpacked, (\d+) MiB as a tarball")


def load(name: str) -> ModuleType:
    """packaging/NAME.py (a folder of scripts, not a package: `packaging` is also on PyPI)."""
    spec = importlib.util.spec_from_file_location(
        f"signoff_{name}", ROOT / "packaging" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def budget() -> tuple[int, int]:
    """(unpacked, tarball) in MiB, as docs/benchmarks.md states them."""
    found = BUDGET.search((ROOT / "docs" / "benchmarks.md").read_text())
    assert found is not None, "docs/benchmarks.md states no bundle budget"
    return int(found[1]), int(found[2])


@dataclass(frozen=True)
class Bundle:
    folder: Path  # unpacked from the tarball
    tarball: Path
    log: str  # what the build printed
    seconds: float

    @property
    def exe(self) -> Path:
        return self.folder / "signoff"


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    need(sys.platform.startswith("linux"), "the Linux bundle is built on Linux")
    for tool in ("ldd", "strip", "tar"):
        need(shutil.which(tool) is not None, f"{tool} is missing (scripts/system-packages.sh)")
    need((ROOT / ".venv" / "bin" / "python").exists(), "no .venv: run make test")
    where = tmp_path_factory.mktemp("bundle")
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build-linux.sh"), "--dist", str(where / "dist"),
         "--no-setup"],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False, cwd=ROOT,
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"the build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    [tarball] = (where / "dist").glob("signoff-*-linux-*.tar.gz")
    unpacked = where / "unpacked"
    unpacked.mkdir()
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(unpacked)], check=True, timeout=120)
    [folder] = unpacked.iterdir()
    return Bundle(folder, tarball, done.stdout + done.stderr, seconds)
