"""The mutation runner's verdicts (tests/mutants/runner.py), on a small tree of its own: one
module, one test marked with its claim and one that is not, judged by real pytest runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutants import Mutation
from tests.mutants.runner import (
    CAUGHT,
    MOVED,
    NOT_AN_ASSERTION,
    SURVIVED,
    UNMARKED,
    judge,
    mutated_copy,
)

CLAIM = "G-TINY-1"
FILES = {
    "pytest.ini": "[pytest]\nmarkers =\n    guarantee(id): backs a claim\n",
    # The option the runner passes, as the project's conftest gives it.
    "conftest.py": """
def pytest_addoption(parser):
    parser.addoption("--guarantee", action="append", default=[])


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--guarantee"))
    if wanted:
        items[:] = [i for i in items
                    if {m.args[0] for m in i.iter_markers("guarantee")} & wanted]
""",
    "core/__init__.py": "",
    "core/tiny.py": """
def double(n):
    return 2 * n


def half(n):
    return n // 2


def triple(n):
    return 3 * n
""",
    "tests/core/test_tiny.py": f'''
import pytest

from core import tiny


@pytest.mark.guarantee("{CLAIM}")
def test_doubles():
    assert tiny.double(2) == 4


@pytest.mark.guarantee("{CLAIM}")
def test_doubles_zero():
    assert tiny.double(0) == 0


def test_halves():
    assert tiny.half(4) == 2


@pytest.mark.guarantee("{CLAIM}")
def test_doubles_in_a_task():  # as an anyio task group raises a task's failure
    try:
        assert tiny.double(3) == 6
    except AssertionError as e:
        raise ExceptionGroup("unhandled errors in a TaskGroup", [e]) from None
''',
}
TEST_FILE = "tests/core/test_tiny.py"
DOUBLES = f"{TEST_FILE}::test_doubles"
DOUBLES_ZERO = f"{TEST_FILE}::test_doubles_zero"
HALVES = f"{TEST_FILE}::test_halves"
IN_A_TASK = f"{TEST_FILE}::test_doubles_in_a_task"


@pytest.fixture(scope="module")
def tiny_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip("\n"))
    return root


def _mutation(old: str, new: str, caught_by: str = DOUBLES) -> Mutation:
    return Mutation("a tiny mutation", CLAIM, "core/tiny.py", old, new, "doubling is wrong",
                    caught_by)  # fmt: skip


@pytest.mark.parametrize(
    ("mutation", "kind", "tests"),
    [
        pytest.param(_mutation("2 * n", "3 * n"), CAUGHT, [DOUBLES], id="caught"),
        pytest.param(_mutation("2 * n", "3 * n", IN_A_TASK), CAUGHT, [IN_A_TASK], id="in-a-task"),
        pytest.param(_mutation("2 * n", "3 * n", DOUBLES_ZERO), MOVED, [DOUBLES], id="moved"),
        pytest.param(_mutation("n // 2", "n"), UNMARKED, [HALVES], id="caught-only-unmarked"),
        pytest.param(_mutation("3 * n", "4 * n"), SURVIVED, [], id="survived"),
        pytest.param(
            _mutation("def double(n):\n", "import not_a_module\n\n\ndef double(n):\n"),
            NOT_AN_ASSERTION,
            [TEST_FILE],
            id="an-import-fails",
        ),
        pytest.param(
            _mutation("2 * n", "2 * n / 0"), CAUGHT, [DOUBLES], id="an-error-the-code-raises"
        ),
        pytest.param(
            _mutation("2 * n", "2 * m"), NOT_AN_ASSERTION, [DOUBLES], id="a-name-it-lacks"
        ),
    ],
)
def test_a_mutation_is_caught_only_by_a_failure_that_sees_it_in_a_test_marked_with_its_claim(
    tiny_tree: Path, tmp_path: Path, mutation: Mutation, kind: str, tests: list[str]
) -> None:
    verdict = judge(mutation, mutated_copy(mutation, tmp_path, tiny_tree), tmp_path)
    assert (verdict.kind, verdict.tests) == (kind, tests), verdict.message
    if kind != CAUGHT:
        assert CLAIM in verdict.message and mutation.breaks in verdict.message
