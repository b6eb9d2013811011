"""Judging one mutation: applied to a copy of a tree, its claim's marked tests run there, and
what they said turned into a verdict (tests/test_mutations.py asks for each mutation;
tests/test_mutation_runner.py for the mutations of a small tree of its own).

Rules:

1. The copy is imported first (``PYTHONPATH``), by the tests and by every ``signoff`` command
   they start, so the installed package's editable link is never what runs.
2. The test that caught the mutation last time (``caught_by``) runs first, alone: when it fails
   as rule 3 says, that is the answer. Otherwise the claim's marked tests run (``--guarantee``,
   ``-x``, that test's file first) and the first failure is the one judged.
3. A mutation is caught only by a failure of a test's call that sees the claim's behaviour
   changed: an assertion, a ``pytest.raises`` met by another error, a wait that ran out, an
   error the mutated code now raises (an exception group of those alone, as an anyio task
   group raises them). A module that no longer imports or a name it no longer has
   (``ImportError``, ``SyntaxError``, ``NameError``), a system part missing
   (``MissingSystemPart``), a fixture that errs or a collection that fails is not a test
   seeing the claim broken: the verdict says which test failed, where and with what
   (tests/mutants/plugin records it).
4. When the marked tests all pass (a survivor), and only then, the other tests of the mutated
   file's part run (``tests/core``, ``tests/proxy`` or ``tests/app``: tests/touched.py): an
   assertion failing there is a gap to mark (the verdict names the tests and the claim), and
   none is a survivor. The run costs time only when something is wrong already.
5. Every verdict but ``caught`` says the claim and what the mutation breaks, so the first
   failing assertion of a mutation's test names the claim.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.mutants.mutation import Mutation
from tests.touched import package_tests

ROOT = Path(__file__).resolve().parent.parent.parent
PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"  # mutation_outcomes (rule 3)
# What the copy leaves out: the venv, caches, build output, the repository itself.
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", ".cache", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", "build",
    "dist", ".hypothesis", "screenshots",
)  # fmt: skip
MARKED = re.compile(r'guarantee\("(G-[A-Z]+-\d+)"\)')
RUN_TIMEOUT = 900  # seconds: the slowest claim's suite, with room
AREA_MOST_FAILURES = 3  # enough to name the tests to mark, without running a whole part (rule 4)

CAUGHT = "caught"
SURVIVED = "survived"
UNMARKED = "caught only by unmarked tests"
NOT_AN_ASSERTION = "not caught by a failure that sees the claim"
MOVED = "caught by another test"
NOT_A_FAILURE = "not a test failure"


@dataclass(frozen=True)
class Failure:
    """A test that failed, as tests/mutants/plugin recorded it."""

    test: str
    when: str  # collect, setup, call or teardown
    kind: str  # the exception's type
    assertion: bool

    @property
    def catches(self) -> bool:
        """Rule 3."""
        return self.when == "call" and self.assertion


@dataclass(frozen=True)
class RunResult:
    code: int
    failures: list[Failure]
    tail: str  # the end of the output


@dataclass(frozen=True)
class Verdict:
    kind: str  # CAUGHT, SURVIVED, UNMARKED, NOT_AN_ASSERTION, MOVED or NOT_A_FAILURE
    message: str = ""  # rule 5
    tests: list[str] = field(default_factory=list)  # the tests it is about


def mutated_copy(mutation: Mutation, where: Path, root: Path = ROOT) -> Path:
    """``root`` copied to ``where/tree``, with the mutation applied."""
    tree = where / "tree"
    shutil.copytree(root, tree, ignore=LEFT_OUT, symlinks=True)
    if (root / ".cache").is_dir():  # the third-party servers make test.sh installed
        (tree / ".cache").symlink_to(root / ".cache")
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


def run_tests(tree: Path, where: Path, *args: str) -> RunResult:
    """pytest in ``tree`` on ``args`` (options, files or node ids), its temporary folders in
    ``where``: the exit code, the failures (rule 3), and the end of the output."""
    outcomes = where.with_name(where.name + ".failures.jsonl")  # --basetemp empties ``where``
    outcomes.unlink(missing_ok=True)
    done = subprocess.run(
        # Without hypothesis's pytest plugin, which imports all of hypothesis at start (half
        # of a small run's time): a test that uses hypothesis imports what it needs.
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:hypothesispytest", "-p", "mutation_outcomes",
         "--mutation-outcomes", str(outcomes), "-m", "not mutation", "--basetemp", str(where),
         *args],
        cwd=tree, env={**os.environ, "PYTHONPATH": os.pathsep.join((str(tree), str(PLUGIN_DIR)))},
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip
    failures = []
    if outcomes.exists():
        for line in outcomes.read_text().splitlines():
            found = json.loads(line)
            failures.append(Failure(found["id"], found["when"], found["kind"], found["assertion"]))
    return RunResult(done.returncode, failures, done.stdout[-3000:] + done.stderr[-2000:])


def area_of(path: str) -> str:
    """The tests of the mutated file's part (rule 4)."""
    return package_tests(path).rstrip("/")


def judge(mutation: Mutation, tree: Path, where: Path) -> Verdict:
    """What the claim's tests say of ``mutation``, applied in ``tree`` (rules 2 to 5)."""
    claim = f"{mutation.guarantee} ({mutation.breaks})"
    if mutation.caught_by:
        alone = run_tests(tree, where / "alone", "-x", "--guarantee", mutation.guarantee,
                          mutation.caught_by)  # fmt: skip
        first = alone.failures[0] if alone.failures else None
        if first is not None and first.test == mutation.caught_by and first.catches:
            return Verdict(CAUGHT, tests=[first.test])
    done = run_tests(tree, where / "runs", "-x", "--guarantee", mutation.guarantee,
                     *marked_files(tree, mutation.guarantee, mutation.caught_by))  # fmt: skip
    if not done.failures:
        if done.code not in (0, 5):  # 5: no test collected
            return Verdict(
                NOT_A_FAILURE,
                f"{claim}: {mutation.name!r} ends its marked tests' run with no failing test"
                f" (exit {done.code}):\n{done.tail}",
            )
        return _survivor(mutation, tree, where, claim)
    first = done.failures[0]
    if not first.catches:
        return Verdict(
            NOT_AN_ASSERTION,
            f"{claim}: {mutation.name!r} is not caught: {first.test} fails in its {first.when}"
            f" with {first.kind}, which says nothing of the claim (a module that no longer"
            f" imports, a name it lacks, a fixture that errs, a missing system part: rule 3 of"
            f" tests/mutants/runner.py):\n"
            f"{done.tail}",
            [first.test],
        )
    if first.test != mutation.caught_by:
        return Verdict(
            MOVED,
            f"{claim}: {mutation.name!r} is caught by {first.test} now, not"
            f" {mutation.caught_by or 'nothing'}: update caught_by in tests/mutants",
            [first.test],
        )
    return Verdict(CAUGHT, tests=[first.test])


def _survivor(mutation: Mutation, tree: Path, where: Path, claim: str) -> Verdict:
    """Rule 4: the part's other tests, for an assertion that sees what the marked ones miss."""
    area = area_of(mutation.path)
    done = run_tests(tree, where / "area", "--maxfail", str(AREA_MOST_FAILURES),
                     "--mutation-unmarked", mutation.guarantee, area)  # fmt: skip
    caught = [f.test for f in done.failures if f.catches]
    if caught:
        return Verdict(
            UNMARKED,
            f"{claim}: {mutation.name!r} is {UNMARKED}: {', '.join(caught)}: mark them with"
            f" {mutation.guarantee}",
            caught,
        )
    return Verdict(
        SURVIVED,
        f"{claim} survived {mutation.name!r}: no test marked with it fails, nor any assertion"
        f" of the other tests in {area}:\n{done.tail}",
    )
