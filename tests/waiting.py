"""Waiting for something to happen in a test: poll a condition until a deadline, and fail naming
what was waited for. Nothing in the tests sleeps to wait for something."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")
WAIT = 20.0  # seconds: the most any one thing may take to happen


def wait_for(probe: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.02)


async def until(probe: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """``wait_for`` on a running event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        await anyio.sleep(0.02)
