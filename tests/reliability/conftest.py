"""The reliability suites: load, soak, faults and bad input. Every test here is marked
``reliability`` so the suites can be run alone (``make test ARGS="-m reliability"``); they also
run with everything else in CI."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().parent == HERE:
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(autouse=True)
def _collect_qt_objects_here() -> Iterator[None]:
    """As in tests/app: Qt objects a test leaves behind (a TrayApp and its timers) are collected
    on the main thread after it, never by a collection that starts on the load suite's operator
    thread, which deletes Qt objects off their thread and crashed the run at exit."""
    yield
    gc.collect()
