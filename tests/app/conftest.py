"""App tests: Qt objects left behind are collected on the main thread, after each test, so a
garbage collection started on another thread never deletes a Qt timer there; ``tray`` is the
app on the test's store, its head kept in memory, notifying through its own fallback (a test
file may define its own)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tray import TrayApp
from core.heads import MemoryHeadStore
from core.store import Store


@pytest.fixture(autouse=True)
def _collect_qt_objects_here() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture
def tray(store: Store, home: Path, qtbot):
    app = TrayApp(store, MemoryHeadStore(), home, native=False)
    app.start()
    yield app
    app.stop()
