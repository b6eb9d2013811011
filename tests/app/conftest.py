"""App tests: Qt objects left behind are collected on the main thread, after each test, so a
garbage collection started on another thread never deletes a Qt timer there."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_qt_objects_here() -> Iterator[None]:
    yield
    gc.collect()
