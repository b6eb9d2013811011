"""An exclusive lock on a file beside the database, taken with a deadline.

Two processes (or two threads of one) that lock the same path are serialised: ``flock`` locks
belong to an open file, so each ``locked()`` opens its own. Used where a compare-before-write on
something outside the database must not interleave: the kept head, the operator key's creation
(core/anchor.py, core/operator_key.py).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.errors import LockTimeout

POLL_SECONDS = 0.01


@contextmanager
def locked(path: Path, timeout: float | None) -> Iterator[None]:
    """Hold the lock on ``path`` (created owner-only) or raise ``LockTimeout`` after
    ``timeout`` seconds of another holder; with no timeout, wait blocked in the kernel until it
    is free (no polling; the caller bounds the wait some other way)."""
    deadline = time.monotonic() + (timeout or 0.0)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            while True:
                if timeout is None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    break
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockTimeout(
                            f"{path} stayed locked by another Signoff process for {timeout:g} s"
                        ) from None
                    time.sleep(POLL_SECONDS)
            # The file locked must still be the one at the path: one deleted or replaced
            # meanwhile would let a second writer lock another file at the same time.
            if _same_file(fd, path):
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                return
        finally:
            os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
