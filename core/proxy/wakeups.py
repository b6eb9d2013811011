"""A proxy woken while it holds a call: its own datagram socket, and a slow poll as a backstop.

Rules:

1. While a call is held (or waits for another proxy's run of it), the proxy listens on a socket
   of its own, ``<pid>-<random>.sock`` in the private ``proxies/`` folder of the runtime
   directory (core/wake.py), made 0700 if missing and refused when it is not private. The
   socket is bound when the first wait begins and removed when the last one ends; one socket
   serves every call the proxy holds at once. A proxy that dies leaves its socket behind: the
   next ``wake`` removes it.
2. A datagram, whoever sent it and whatever it says, only ends the current wait: the waiter
   reads the store again. The store is the truth; a datagram is a hint.
3. A wait ends on a datagram received since the waiter last read the store (none is missed
   between its read and its wait), on the host's cancellation, or at the backstop: the store
   is read each ``BACKSTOP_SECONDS`` anyway, for a wake that was lost.
4. Without a socket (Windows has no Unix datagram sockets; a runtime path too long to bind; a
   folder that is not private) the wait is the poll it always was, every ``POLL_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core import private_files, wake
from core.errors import SignoffError
from core.proxy.upstream import Cancelled

BACKSTOP_SECONDS = 1.0  # with a socket (rule 3)
POLL_SECONDS = 0.05  # without one (rule 4)
# Tests only: a backstop so long that a held call that returns can only have been woken.
BACKSTOP_VARIABLE = "SIGNOFF_TEST_WAKE_BACKSTOP"

log = logging.getLogger("signoff.proxy")


class Wakeups:
    """The proxy's socket while it holds calls, and the waits on it (one per proxy)."""

    def __init__(self) -> None:
        self._users = 0
        self._sock: socket.socket | None = None
        self._path: Path | None = None
        self._rung = asyncio.Event()
        self.received = 0  # datagrams so far: a waiter notes it before reading the store

    @property
    def listening(self) -> bool:
        return self._sock is not None

    @contextlib.contextmanager
    def listening_while(self) -> Iterator[None]:
        """Listen for the time of one wait loop (rule 1); nested and concurrent uses share it."""
        if self._users == 0:
            self._rung = asyncio.Event()  # of this loop: a proxy may be driven by several
            self._open()
        self._users += 1
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0:
                self._close()

    async def wait(self, seen: int, most: float, cancelled: Cancelled | None = None) -> None:
        """Until a datagram beyond ``seen`` (rule 3), ``cancelled`` is set, or the interval:
        the backstop when listening, the poll otherwise, never past ``most`` seconds."""
        interval = backstop() if self.listening else POLL_SECONDS
        timeout = max(0.0, min(interval, most))
        if self.received != seen or timeout == 0.0:
            return
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._rung.wait())]
        if cancelled is not None:
            waits.append(asyncio.ensure_future(cancelled.wait()))
        try:
            done, _ = await asyncio.wait(waits, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            for w in waits:
                w.cancel()
        for w in done:
            w.result()  # a wait that failed is raised, never taken for a wake

    def _open(self) -> None:
        if not hasattr(socket, "AF_UNIX"):
            return  # Windows: the poll (rule 4)
        folder = wake.proxies_dir()
        path = folder / f"{os.getpid()}-{secrets.token_hex(4)}{wake.SUFFIX}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        bound = False
        try:
            wake.make_runtime_dir()
            private_files.make_dir(folder)
            sock.bind(str(path))
            bound = True
            sock.setblocking(False)
            asyncio.get_running_loop().add_reader(sock.fileno(), self._drain)
        except (OSError, SignoffError) as e:
            sock.close()
            log.warning("held calls poll the store: no wake-up socket at %s (%s)", path, e)
            if bound:  # only what this proxy made is removed
                with contextlib.suppress(OSError):
                    path.unlink()
            return
        self._sock, self._path = sock, path

    def _close(self) -> None:
        sock, path = self._sock, self._path
        self._sock = self._path = None
        if sock is None or path is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            asyncio.get_running_loop().remove_reader(sock.fileno())
        sock.close()
        with contextlib.suppress(OSError):
            path.unlink()

    def _drain(self) -> None:
        if self._sock is None:
            return
        while True:
            try:
                self._sock.recv(64)  # the word is not read: the store says what changed
            except OSError:  # BlockingIOError: nothing more queued
                break
        self.received += 1
        self._rung.set()
        self._rung = asyncio.Event()


def backstop() -> float:
    value = os.environ.get(BACKSTOP_VARIABLE)
    if value:
        with contextlib.suppress(ValueError):
            return max(POLL_SECONDS, float(value))
    return BACKSTOP_SECONDS
