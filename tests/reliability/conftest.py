"""The reliability suites: load, soak, faults and bad input. Every test here is marked
``reliability`` so the suites can be run alone (``make test ARGS="-m reliability"``); they also
run with everything else in CI."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().parent == HERE:
            item.add_marker(pytest.mark.reliability)
