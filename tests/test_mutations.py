"""The claims' tests fail when the claim is broken: each mutation of tests/mutants applied to
a temporary copy of the tree, with only its claim's marked tests run there (``--guarantee``).

    make test ARGS="-m mutation"              all of them
    make test ARGS="-m mutation -k verify"    one

The copy is imported first (``PYTHONPATH``), by these tests and by every ``signoff`` command
they start, so the installed package's editable link is never what runs. The test that caught
the mutation last time (``caught_by``) runs first, alone: when it fails, that is the answer.
Only when it passes does the claim's whole suite run (``-x``, that test's file first), to say
whether the mutation survived or which test catches it now.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.mutants import MUTATIONS, Mutation

pytestmark = [pytest.mark.mutation, pytest.mark.slow]

# What the copy leaves out: the venv, caches, build output, the repository itself.
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", ".cache", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", "build",
    "dist", ".hypothesis", "screenshots",
)  # fmt: skip
FAILED = re.compile(r"^FAILED (.+?)(?: - .*)?$", re.MULTILINE)  # an id may hold spaces
MARKED = re.compile(r'guarantee\("(G-[A-Z]+-\d+)"\)')
RUN_TIMEOUT = 900  # seconds: the slowest claim's suite, with room


def mutated_copy(mutation: Mutation, where: Path) -> Path:
    tree = where / "tree"
    shutil.copytree(ROOT, tree, ignore=LEFT_OUT, symlinks=True)
    if (ROOT / ".cache").is_dir():  # the third-party servers make test.sh installed
        (tree / ".cache").symlink_to(ROOT / ".cache")
    target = tree / mutation.path
    text = target.read_text()
    found = text.count(mutation.old)
    assert found == 1, (
        f"mutation {mutation.name!r} no longer applies: its text occurs {found} times in"
        f" {mutation.path} (update tests/mutants with the code)"
    )
    target.write_text(text.replace(mutation.old, mutation.new))
    return tree


def marked_files(tree: Path, guarantee: str, first: str) -> list[str]:
    """The test files that mark a test with ``guarantee`` (so nothing else is even collected),
    the one of ``first`` (a node id) first."""
    found = sorted(
        str(path.relative_to(tree))
        for path in (tree / "tests").rglob("test_*.py")
        if guarantee in MARKED.findall(path.read_text())
    )
    head = first.split("::")[0]
    return sorted(found, key=lambda f: f != head)


def run_claims_tests(tree: Path, where: Path, mutation: Mutation, *tests: str) -> RunResult:
    """Its claim's marked tests in ``tests`` (files or node ids), stopping at the first failure:
    the exit code, the failing tests' ids, and the end of the output."""
    done = subprocess.run(
        # Without hypothesis's pytest plugin, which imports all of hypothesis at start (half
        # of a small run's time): a test that uses hypothesis imports what it needs.
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
         "-p", "no:hypothesispytest", "--guarantee", mutation.guarantee, "-m", "not mutation",
         "--basetemp", str(where), *tests],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
        timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    return RunResult(done.returncode, FAILED.findall(done.stdout), tail)


@dataclass(frozen=True)
class RunResult:
    code: int
    failed: list[str]
    tail: str


@pytest.mark.timeout(2 * RUN_TIMEOUT + 60)
@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_the_claims_tests_fail_with_the_claim_broken(mutation: Mutation, tmp_path: Path) -> None:
    tree = mutated_copy(mutation, tmp_path)
    if mutation.caught_by:  # the test that caught it last time, alone: most often all it takes
        alone = run_claims_tests(tree, tmp_path / "alone", mutation, mutation.caught_by)
        if alone.code == 1 and alone.failed == [mutation.caught_by]:
            return
    done = run_claims_tests(
        tree, tmp_path / "runs", mutation,
        *marked_files(tree, mutation.guarantee, mutation.caught_by),
    )  # fmt: skip
    assert done.code != 0, f"{mutation.guarantee} survived {mutation.name!r}:\n{done.tail}"
    assert done.code == 1, f"not a test failure (exit {done.code}):\n{done.tail}"
    assert done.failed, f"no failing test named:\n{done.tail}"
    assert done.failed[0] == mutation.caught_by, (
        f"{mutation.name!r} is caught by {done.failed[0]} now, not"
        f" {mutation.caught_by or 'nothing'}: update caught_by in tests/mutants"
    )
