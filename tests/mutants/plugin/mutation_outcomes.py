"""A pytest plugin for a mutation's own runs of the tests (tests/mutants/runner.py), loaded with
``-p mutation_outcomes`` from this folder (a top-level name: a mutation's copy of the tree, or a
tree of a test's own, may hold no ``tests`` package of this one).

- ``--mutation-outcomes PATH``: each failure, one JSON line in PATH: the test's id, the phase it
  failed in (``collect``, ``setup``, ``call``, ``teardown``), the exception's type, and whether
  it sees the claim's behaviour changed (``assertion``): any error of a test's call but the
  code failing to load (``ImportError``, ``SyntaxError``, ``NameError``) and a missing system
  part (``MissingSystemPart``); an exception group when each of its own is one. A fixture that
  errs, or a module that no longer imports, says nothing of the claim.
- ``--mutation-unmarked ID``: only the tests that do not carry ``guarantee(ID)`` (those that do
  have run already).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mutation outcomes")
    group.addoption("--mutation-outcomes", metavar="PATH", help="write each failure here")
    group.addoption("--mutation-unmarked", metavar="ID", help="only tests not marked with ID")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--mutation-outcomes")
    if path:
        config.pluginmanager.register(Outcomes(Path(path)), "mutation-outcomes-writer")


class Outcomes:
    """Writes each failure (the module's docstring says how)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _write(self, test: str, when: str, kind: str, assertion: bool) -> None:
        line = {"id": test, "when": when, "kind": kind, "assertion": assertion}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Iterator[None]:
        outcome = yield
        report = outcome.get_result()  # type: ignore[attr-defined]
        if report.failed and call.excinfo is not None:
            error = call.excinfo.value
            self._write(report.nodeid, report.when, _kind(error), _assertion(error))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._write(report.nodeid, "collect", "an error while collecting", False)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    claim = config.getoption("--mutation-unmarked")
    if not claim:
        return
    keep, drop = [], []
    for item in items:
        ids = {m.args[0] for m in item.iter_markers("guarantee") if m.args}
        (drop if claim in ids else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# What says nothing of a claim: the code no longer loads (a module that does not import, a name
# it no longer has), or the machine lacks a part (tests/conftest.py ``need``, by name: this
# plugin loads where no ``tests`` package of this tree may be).
NOT_THE_CLAIM = (ImportError, SyntaxError, NameError)
MISSING_PART = "MissingSystemPart"


def _assertion(error: BaseException) -> bool:
    """Whether a failure of a test's call sees the claim's behaviour changed: an assertion, a
    ``pytest.raises`` met by another error, a wait that ran out, an error the code now raises;
    not the code failing to load, nor a missing part; a group, when each of its own is one."""
    if isinstance(error, BaseExceptionGroup):
        return all(_assertion(e) for e in error.exceptions)
    if isinstance(error, pytest.skip.Exception):
        return False
    return not isinstance(error, NOT_THE_CLAIM) and type(error).__name__ != MISSING_PART


def _kind(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        inner = ", ".join(sorted({_kind(e) for e in error.exceptions}))
        return f"{type(error).__name__} of {inner}"
    return type(error).__name__
