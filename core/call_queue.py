"""Calls on one session, one at a time: a first-come queue that threads and asyncio tasks wait in.

A session's calls are serialised (seed 002: "its calls are serialised"): a second call waits for
the first, then runs against the state the first left. ``Session.execute`` is a coroutine and the
others are plain calls, so the queue is waited in both ways.

Rules:

1. One holder at a time. A call that finds the queue held waits its turn: a thread blocks, an
   asyncio task awaits (its event loop goes on). Turns are handed over in arrival order.
2. A task cancelled while it waits leaves the queue; a turn handed to it as it was cancelled
   is passed on, never lost.
3. A call that could only wait for itself is refused with ``RunStateError`` before it waits: a
   call made from inside a call of the same session (a tool calling back into its session; the
   context is the call's, as ``asyncio.to_thread`` copies it), and a plain call on the thread
   whose asyncio task holds the queue (blocking that thread would stop the holder).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from core.errors import RunStateError

_INSIDE: ContextVar[frozenset[int]] = ContextVar("signoff_calls_inside", default=frozenset())

_Waiter = threading.Event | tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class CallQueue:
    def __init__(self, what: str) -> None:
        self._what = what
        self._mutex = threading.Lock()
        self._held = False
        self._holder_thread: int | None = None  # the thread of a holding asyncio task
        self._waiters: deque[_Waiter] = deque()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Wait (blocking this thread) for the turn, hold it for the block."""
        self._refuse_self_wait()
        with self._mutex:
            if self._held and self._holder_thread == threading.get_ident():
                raise RunStateError(
                    f"{self._what}: a call under way in an asyncio task on this thread holds it;"
                    " waiting here would stop that task (await it instead)"
                )
            turn = threading.Event()
            waiting = self._take_or_queue(turn) is not None
        if waiting:
            turn.wait()  # the turn is ours once set (rule 1)
        token = _INSIDE.set(_INSIDE.get() | {id(self)})
        try:
            yield
        finally:
            _INSIDE.reset(token)
            self._release()

    @asynccontextmanager
    async def held_async(self) -> AsyncIterator[None]:
        """Await the turn (the event loop goes on), hold it for the block."""
        self._refuse_self_wait()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._mutex:
            waiting = self._take_or_queue((loop, future)) is not None
        if waiting:
            try:
                await future
            except asyncio.CancelledError:
                with self._mutex:
                    ours = (loop, future) not in self._waiters
                    if not ours:
                        self._waiters.remove((loop, future))
                if ours:  # handed to us as we were cancelled: pass it on (rule 2)
                    self._release()
                raise
        self._holder_thread = threading.get_ident()
        token = _INSIDE.set(_INSIDE.get() | {id(self)})
        try:
            yield
        finally:
            _INSIDE.reset(token)
            self._holder_thread = None
            self._release()

    def _refuse_self_wait(self) -> None:
        if id(self) in _INSIDE.get():
            raise RunStateError(
                f"{self._what}: a call from inside another of its calls would wait for itself"
            )

    def _take_or_queue(self, waiter: _Waiter) -> _Waiter | None:
        """Under the mutex: take the free turn (None), or queue ``waiter`` and return it."""
        if not self._held:
            self._held = True
            return None
        self._waiters.append(waiter)
        return waiter

    def _release(self) -> None:
        with self._mutex:
            if not self._waiters:
                self._held = False
                return
            waiter = self._waiters.popleft()  # the turn is the waiter's from here (rule 2)
        if isinstance(waiter, threading.Event):
            waiter.set()
        else:
            loop, future = waiter
            loop.call_soon_threadsafe(_hand, future)


def _hand(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled waiter passes the turn on itself
        future.set_result(None)
