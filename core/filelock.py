"""An exclusive lock on a file beside the database, taken with a deadline.

Two processes (or two threads of one) that lock the same path are serialised: ``flock`` locks
belong to an open file, so each ``locked()`` opens its own. Used where a compare-before-write on
something outside the database must not interleave: the kept head, the operator key's creation
(core/anchor.py, core/operator_key.py), and every keyring call (core/keyring_calls.py).

What stands at the path must be a regular file of the user's (or nothing, and the lock file is
made): a folder, a symbolic link, a FIFO, a device or another user's file is refused at once
with ``LockRefused``, saying what is there, never waited on (decision 0067).
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.errors import LockRefused, LockTimeout

POLL_SECONDS = 0.01


@contextmanager
def locked(path: Path, timeout: float | None) -> Iterator[None]:
    """Hold the lock on ``path`` (created owner-only) or raise ``LockTimeout`` after
    ``timeout`` seconds of another holder; with no timeout, wait blocked in the kernel until it
    is free (no polling; the caller bounds the wait some other way)."""
    deadline = time.monotonic() + (timeout or 0.0)
    while True:
        fd = _open(path)
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


def _open(path: Path) -> int:
    """The lock file at ``path``, made when missing; ``LockRefused`` when something else is
    there (O_NONBLOCK: a FIFO is never waited on to open)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError:
        what = what_is_at(path)
        if what:
            raise LockRefused(refused(path, what)) from None
        raise
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
        os.close(fd)
        raise LockRefused(refused(path, _kind(found)))
    return fd


def what_is_at(path: Path) -> str:
    """What stands at ``path`` when it is not a lock file of the user's ("a folder", "a
    symbolic link", ...); "" when it is one, or nothing is there."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return ""
    if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid():
        return ""
    return _kind(found)


def refused(path: Path, what: str) -> str:
    return (
        f"{path} is {what}, not Signoff's lock file: remove it (nothing was waited on, and"
        " nothing that needs the lock is done until it is gone)"
    )


def _kind(found: os.stat_result) -> str:
    mode = found.st_mode
    if found.st_uid != os.geteuid():
        return f"a file of another user (uid {found.st_uid})"
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"),
                        (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return words
    return "not a regular file" if not stat.S_ISREG(mode) else ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
