"""A D-Bus peer of the tests (a notification daemon, a tray host) on a thread of its own with
its own asyncio loop, as another process would be: the app under test reaches it only over the
bus. A subclass writes ``_serve``: connect, export, set ``_ready``, await ``_stop``."""

from __future__ import annotations

import asyncio
import threading
from typing import Self


class BusThread:
    def __init__(self, what: str) -> None:
        self.what = what  # for messages: "the tray host"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=what, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"{self.what} did not start within 10 s")
        if self._error is not None:
            self._thread.join(10)
            raise RuntimeError(f"{self.what} did not start: {self._error}")
        return self

    def __exit__(self, *exc: object) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)
        if self._thread.is_alive():
            raise RuntimeError(f"{self.what} did not stop within 10 s")

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported to the thread that waits in __enter__
            self._error = e
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self._serve()

    async def _serve(self) -> None:
        raise NotImplementedError
