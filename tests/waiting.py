"""Waiting for something to happen in a test: poll a condition until a deadline, and fail naming
what was waited for. Nothing in the tests sleeps to wait for something."""

from __future__ import annotations

import inspect
import os
import select
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")
WAIT = 30.0  # seconds: the most any one thing may take to happen


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


async def until(probe: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """``wait_for`` on a running event loop; ``probe`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        await anyio.sleep(0.02)


def read_ready_line(fd: int, what: str, timeout: float = WAIT) -> str:
    """The first line a starting process writes to a pipe when it is ready (its address, its
    display number), with a deadline."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{what}: nothing within {timeout:.0f} s")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"{what}: the process exited first")
            data += chunk
    return data.split(b"\n", 1)[0].decode().strip()
