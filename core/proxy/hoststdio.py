"""The proxy's stdio with the host: the host's bytes go to Signoff's reader, and nothing else.

The SDK's ``stdio_server`` decodes each line itself (invalid UTF-8 as U+FFFD, then pydantic's
JSON decoder: the last of a key named twice wins, ``0.10000000000000001`` becomes ``0.1``), so
the proxy reads its stdin itself and hands its host session (core/proxy/hostsession.py) the
messages ``core.proxy.hostline`` read exactly:

- each line is read as bytes, at most ``MAX_LINE`` of them kept (the rest of a longer line is
  read and dropped but for its last ``TAIL`` bytes, where its id may be, and the line refused
  by name);
- a message is passed on; a refusal is answered on the write stream (or, with no id to answer,
  logged); a blank line is passed over; the proxy goes on reading after each;
- a message is written whole or not at all: one that cannot be written as JSON is logged and,
  when it answers a request, replaced by an error saying so, so the host is never left waiting;
- once a write fails (the host closed its end), the host is gone: reading ends as at the end of
  its input, and what is still sent is dropped, so no sender ever waits on a wire that is gone;
- as ``stdio_server`` does, while serving fd 0 reads the null device and fd 1 writes to stderr,
  so nothing else in the process reads the host's bytes or writes on its wire; the wire is
  served from private, non-inherited duplicates, restored on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import BinaryIO, Literal

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from core.proxy.hostline import MAX_LINE, TAIL, Message, Refused, dump, read_line, too_long

log = logging.getLogger("signoff.proxy")

Read = MemoryObjectReceiveStream[Message]
Write = MemoryObjectSendStream[Message]
_DRAIN = 1 << 20  # bytes read at a time from the part of a line past MAX_LINE


@asynccontextmanager
async def host_stdio(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> AsyncIterator[tuple[Read, Write]]:
    """The host's messages and a stream of messages to the host, over this process's stdin and
    stdout (or the binary files given)."""
    with (
        _claimed(0, "rb", lambda: os.open(os.devnull, os.O_RDONLY), given=stdin) as source,
        _claimed(1, "wb", lambda: os.dup(2), given=stdout) as sink,
    ):
        to_server, read = anyio.create_memory_object_stream[Message](0)
        # Messages to the host wait in order while the host is slow to read, never the sender.
        write, to_host = anyio.create_memory_object_stream[Message](1024)
        reading = anyio.CancelScope()  # cancelled once the host is found gone
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_host, source, to_server, write.clone(), reading)
            tg.start_soon(_write_host, sink, to_host, reading)
            yield read, write


async def _read_host(
    source: BinaryIO,
    to_server: MemoryObjectSendStream[Message],
    answers: Write,
    reading: anyio.CancelScope,
) -> None:
    async with to_server, answers:
        with reading:
            await _pass_on(source, to_server, answers)


async def _pass_on(
    source: BinaryIO, to_server: MemoryObjectSendStream[Message], answers: Write
) -> None:
    async for line in _lines(source):
        try:
            verdict = line if isinstance(line, Refused) else read_line(line)
        except Exception:  # a fault of the reader's must not end the connection: fail closed
            log.exception("a line from the host could not be read; it is dropped")
            continue
        if verdict is None:
            continue
        if not isinstance(verdict, Refused):
            await to_server.send(verdict)
            continue
        if verdict.answer is None:
            log.warning("refused a line from the host with no id to answer: %s", verdict.why)
            continue
        log.warning("refused request %r from the host: %s", verdict.answer["id"], verdict.why)
        try:
            await answers.send(verdict.answer)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.warning("the refusal could not be sent: the connection is closing")


async def _lines(source: BinaryIO) -> AsyncIterator[bytes | Refused]:
    """The host's lines, each with its newline, until it closes stdin; a line longer than
    ``MAX_LINE`` bytes is its refusal, the rest of it read and dropped."""
    _read = _Reader(source).read
    while True:
        line = await _read(MAX_LINE + 2)  # the line, its newline, and one byte more
        if not line:
            return
        if len(line.rstrip(b"\r\n")) <= MAX_LINE:
            yield line
            continue
        head, tail = line, line[-TAIL:]
        while line and not line.endswith(b"\n"):
            line = await _read(_DRAIN)
            tail = (tail + line)[-TAIL:]
        yield too_long(head, tail)


class _Reader:
    """The host's input read in a daemon thread of its own, a line when asked (so a host that
    writes faster than the proxy reads waits, as on any pipe). A worker thread of anyio's would
    hold the interpreter's exit while blocked on a host that keeps its input open but writes
    nothing (one that stopped reading); this one ends with the process."""

    def __init__(self, source: BinaryIO) -> None:
        self._asks: queue.SimpleQueue[tuple[int, asyncio.Future[bytes]]] = queue.SimpleQueue()
        self._loop = asyncio.get_running_loop()
        thread = threading.Thread(target=self._run, args=(source,), daemon=True)
        thread.name = "signoff-host-reader"
        thread.start()

    async def read(self, limit: int) -> bytes:
        """The next line, at most ``limit`` bytes of it; b"" at the end of the input."""
        future: asyncio.Future[bytes] = self._loop.create_future()
        self._asks.put((limit, future))
        return await future  # cancelled: the line read for it is dropped with the proxy

    def _run(self, source: BinaryIO) -> None:
        while True:
            limit, future = self._asks.get()
            try:
                line = source.readline(limit)
            except BaseException as e:  # handed to the reader, which raises it
                self._settle(future, None, e)
                return
            self._settle(future, line, None)
            if not line:
                return

    def _settle(
        self, future: asyncio.Future[bytes], line: bytes | None, error: BaseException | None
    ) -> None:
        def settle() -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(line or b"")

        with contextlib.suppress(RuntimeError):  # the loop closed: the proxy is ending
            self._loop.call_soon_threadsafe(settle)


async def _write_host(
    sink: BinaryIO, to_host: MemoryObjectReceiveStream[Message], reading: anyio.CancelScope
) -> None:
    gone = False
    async with to_host:
        async for message in to_host:
            data = _line(message)
            while True:  # what else waits goes in the same write
                try:
                    data += _line(to_host.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            if gone or not data:
                continue
            try:
                await anyio.to_thread.run_sync(_write, sink, data)
            except OSError as e:
                log.warning("the host's end of the wire is closed (%s): the proxy ends", e)
                gone = True
                reading.cancel()


def _line(message: Message) -> bytes:
    """``message`` as its line; one that is not JSON as an error answering its request, or
    nothing."""
    try:
        return dump(message)
    except (TypeError, ValueError) as e:
        log.error("a message to the host could not be written as JSON: %r", e)
        if "id" in message and "method" not in message:
            why = f"Signoff's proxy could not write this answer: {e}"
            return dump({"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32603, "message": why[:500]}})  # fmt: skip
        return b""


def _write(sink: BinaryIO, data: bytes) -> None:
    sink.write(data)
    sink.flush()


@contextmanager
def _claimed(
    fd: int, mode: Literal["rb", "wb"], divert: Callable[[], int], *, given: BinaryIO | None
) -> Iterator[BinaryIO]:
    """The wire on ``fd`` as a binary file of a private duplicate, with ``fd`` itself pointed
    at ``divert()`` until the end; ``given`` instead when there is one."""
    if given is not None:
        yield given
        return
    private = os.dup(fd)  # not inheritable: no server the proxy starts holds the host's wire
    diversion = divert()
    try:
        os.dup2(diversion, fd)
    finally:
        os.close(diversion)
    try:
        # Never closed: a thread may still be blocked reading it when the proxy ends.
        yield os.fdopen(private, mode, closefd=False)
    finally:
        os.dup2(private, fd)
