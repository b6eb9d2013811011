"""Our own client for an upstream MCP server over stdio, keeping the raw bytes it sends.

The SDK's stdio client parses every line into models before anyone sees the bytes, and rejects
a whole listing when one tool is invalid; pins need the bytes, and a faithful proxy needs every
answer as the server wrote it, so this speaks newline-delimited JSON-RPC itself.

Rules:

1. The server gets only PATH, HOME and TMPDIR (and the platform's essentials on Windows), plus
   the variables the operator named. Its stderr goes to a log file.
2. The handshake sends the ``Greeting`` it is given: the protocol version the host chose and
   the client capabilities the proxy may declare for it (roots and elicitation as the host
   declared them; sampling to a server allowed it: core/proxy/asks.py rule 1). A restart
   sends the same greeting again.
3. A line is read whole up to ``ceiling`` bytes; a longer one is read to its end and dropped,
   and the request it answers (its id read from its start or its end) fails with
   ``UpstreamAnswerTooLarge``: the server answered, so it acted. The connection goes on.
4. An answer is parsed by Signoff's exact parser; one it refuses (a key twice, an integer
   beyond 2^53), result or error, fails a ``tools/call`` with ``UpstreamAnswerInexact`` (the
   server acted), while a listing keeps its raw bytes (pins are taken over them,
   core/proxy/pins.py). A JSON-RPC error fails the request with ``UpstreamRefused``, the error
   kept whole (one read inexactly is replaced by Signoff's own, naming why); a result that is
   not an object with ``UpstreamAnswerUnreadable``. Lines that are not JSON are logged and
   skipped.
5. A request from the server is answered in a task of its own (the reader never waits on it):
   by ``on_message`` when given, else ping with ``{}`` and anything else "method not found".
   Notifications go to ``on_message`` too; without it they are logged and dropped.
6. A server that exits fails every call in flight with ``UpstreamGone``. A call not answered
   within its timeout, or one the host cancelled, is cancelled at the server
   (``notifications/cancelled``) and its answer awaited ``grace`` seconds more: an answer in that
   time is the call's answer (the server acted; its result is not lost); without one the call
   fails with ``UpstreamTimeout`` or ``UpstreamCancelled``. A request that could not be written
   (the server was already gone, noticed or not) fails with ``UpstreamNotDelivered``: a server
   acts on whole lines only, so it was never made.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from core import canonical, private_files
from core.errors import (
    JSONRefused,
    UpstreamAnswerInexact,
    UpstreamAnswerTooLarge,
    UpstreamAnswerUnreadable,
    UpstreamCancelled,
    UpstreamError,
    UpstreamGone,
    UpstreamNotDelivered,
    UpstreamProtocolError,
    UpstreamRefused,
    UpstreamStartFailed,
    UpstreamTimeout,
)
from core.proxy import rawjson
from core.proxy.config import ServerConfig


class Cancelled(Protocol):
    """An event the host's cancellation sets (an ``anyio.Event`` or ``asyncio.Event``)."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


CEILING = 16 * 1024 * 1024  # bytes of one line read whole, unless the proxy asks for more
READ_LIMIT = 1024 * 1024  # bytes the stream buffers before handing a long line over in parts
TAIL = 64 * 1024  # bytes kept from the end of a line too long, where its id may be
# What Signoff asks for when no host chose (signoff pin, the demo, a proxy driven directly).
PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = {"name": "signoff", "version": "0.1"}
BASE_ENV = ("PATH", "HOME", "TMPDIR")
WINDOWS_ENV = ("SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP",
               "USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA")  # fmt: skip
METHOD_NOT_FOUND = -32601


@dataclass(frozen=True)
class Greeting:
    """What the handshake tells the server: the protocol version and the client's
    capabilities (rule 2)."""

    protocol_version: str = PROTOCOL_VERSION
    capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] = field(default_factory=lambda: dict(CLIENT_INFO))
    # The host's sampling, declared only to the servers the operator allowed (core/proxy/asks.py).
    sampling: dict[str, Any] | None = None
    sampling_for: frozenset[str] = frozenset()

    def capabilities_for(self, server: str) -> dict[str, Any]:
        """The capabilities declared to ``server``: sampling only to one allowed it."""
        if self.sampling is None or server not in self.sampling_for:
            return self.capabilities
        return {**self.capabilities, "sampling": self.sampling}


# What `signoff pin` and `servers test` declare: roots, answered with none (``no_roots``), so
# that a server lists what it lists to a host that has roots (server-everything lists
# get-roots-list to such a host only), and the tool can be pinned before a host asks for it.
LISTING = Greeting(capabilities={"roots": {}})


@dataclass(frozen=True)
class Answer:
    """A server's answer to a request: its ``result`` as parsed exactly, the raw line, and why
    the exact parser refused it ("" when it did not)."""

    result: dict[str, Any]
    raw: bytes
    inexact: str = ""


async def no_roots(upstream: Upstream, message: dict[str, Any]) -> dict[str, Any] | None:
    """Answers a server's ``roots/list`` with no roots, as ``signoff pin`` and ``servers test``
    do (``LISTING``)."""
    if message.get("method") == "roots/list" and "id" in message:
        return {"result": {"roots": []}}
    return None


# What the proxy does with a server's own message: a request's answer ({"result": ...} or
# {"error": ...}), or None for a notification (rule 5).
OnMessage = Callable[["Upstream", dict[str, Any]], Awaitable[dict[str, Any] | None]]


def server_environment(
    server: ServerConfig, environ: dict[str, str] | None = None
) -> dict[str, str]:
    source = dict(os.environ if environ is None else environ)
    names = [*BASE_ENV, *(WINDOWS_ENV if sys.platform == "win32" else ()), *server.env]
    return {name: source[name] for name in names if name in source}


class Upstream:
    """One running upstream server and the requests in flight to it."""

    def __init__(
        self,
        server: ServerConfig,
        log_path: Path,
        *,
        on_message: OnMessage | None = None,
        ceiling: int = CEILING,
    ) -> None:
        self.server = server
        self.log_path = log_path
        self.on_message = on_message
        self.ceiling = ceiling
        self.protocol_version = ""
        self.server_info: dict[str, Any] = {}
        self.initialize_result: dict[str, Any] = {}  # the handshake's answer, as parsed
        self.greeting = Greeting()
        self.skipped_lines = 0
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Answer]] = {}
        self._methods: dict[int, str] = {}
        self._next_id = 0
        self._gone: UpstreamError | None = None
        self._log: BinaryIO | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def alive(self) -> bool:
        return self._gone is None and self._process is not None

    @property
    def capabilities(self) -> dict[str, Any]:
        """The capabilities the server declared in its handshake."""
        found = self.initialize_result.get("capabilities")
        return found if isinstance(found, dict) else {}

    async def spawn(self) -> None:
        """Start the server's process (the handshake is ``handshake``): a proxy starts its
        servers' processes at once, and greets them once the host said who it is."""
        self._log = private_files.open_log_bytes(self.log_path)
        try:
            self._process = await asyncio.create_subprocess_exec(
                self.server.command,
                *self.server.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._log,
                env=server_environment(self.server),
                limit=READ_LIMIT,
            )
        except OSError as e:
            self._log.close()
            self._log = None
            raise UpstreamStartFailed(
                f"server {self.server.name}: cannot start {self.server.command!r}: {e}"
            ) from None
        self._gone = None
        self._reader = asyncio.create_task(self._read())

    async def start(self, timeout: float, greeting: Greeting | None = None) -> None:
        """Spawn the server and complete the MCP handshake."""
        await self.spawn()
        await self.handshake(timeout, greeting)

    async def handshake(self, timeout: float, greeting: Greeting | None = None) -> None:
        self.greeting = greeting or Greeting()
        try:
            answer = await self.request(
                "initialize",
                {
                    "protocolVersion": self.greeting.protocol_version,
                    "capabilities": self.greeting.capabilities_for(self.server.name),
                    "clientInfo": self.greeting.client_info,
                },
                timeout,
            )
        except UpstreamError as e:
            await self.close()
            raise UpstreamStartFailed(f"server {self.server.name}: no handshake: {e}") from None
        result = answer.result
        self.initialize_result = result
        self.protocol_version = str(result.get("protocolVersion", ""))
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def list_tools(self, timeout: float) -> list[bytes]:
        """The raw response lines of ``tools/list``, following ``nextCursor``."""
        from core.errors import ListingRefused
        from core.proxy.pins import MAX_LISTING_BYTES

        pages: list[bytes] = []
        params: dict[str, Any] = {}
        total = 0
        for _ in range(100):
            answer = await self.request("tools/list", params, timeout)
            pages.append(answer.raw)
            total += len(answer.raw)
            if total > MAX_LISTING_BYTES:  # stop reading at once, not after every page
                raise ListingRefused(
                    f"server {self.server.name}: the listing is {total} bytes, over the"
                    f" {MAX_LISTING_BYTES} allowed"
                )
            cursor = answer.result.get("nextCursor")
            if not cursor:
                return pages
            params = {"cursor": cursor}
        raise UpstreamProtocolError(f"server {self.server.name}: a listing of over 100 pages")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout: float,
        *,
        grace: float = 0.0,
        cancelled: Cancelled | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Answer:
        """``cancelled``: set when the host cancels the call (the server is then told);
        ``meta``: the request's ``_meta`` (the host's progress token)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        return await self.request("tools/call", params, timeout, grace=grace, cancelled=cancelled)

    async def answers_ping(self, timeout: float) -> bool:
        """Whether the server still answers: one that does keeps its session state."""
        try:
            await self.request("ping", {}, timeout)
        except UpstreamError:
            return False
        return True

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send the server a notification (the host's, passed on); a server gone is noted."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        with contextlib.suppress(UpstreamError):
            await self._send(message)

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        timeout: float,
        *,
        grace: float = 0.0,
        cancelled: Cancelled | None = None,
    ) -> Answer:
        if self._gone is not None:
            raise UpstreamNotDelivered(f"{self._gone}; {method} was not sent")
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._methods[request_id] = method
        try:
            try:
                await self._send(
                    {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                )
            except UpstreamGone as e:
                if future.done() and not future.cancelled():
                    future.exception()  # failed by _fail; raised here instead
                raise UpstreamNotDelivered(f"{e}; {method} was not sent") from None
            return await self._answer(future, request_id, method, timeout, grace, cancelled)
        finally:
            self._pending.pop(request_id, None)
            self._methods.pop(request_id, None)

    async def _answer(
        self,
        future: asyncio.Future[Answer],
        request_id: int,
        method: str,
        timeout: float,
        grace: float,
        cancelled: Cancelled | None,
    ) -> Answer:
        """The answer to a request sent: by ``timeout``, or once ``cancelled`` is set, the
        server is told the request is cancelled, and an answer within ``grace`` more is still
        the answer."""
        if cancelled is None:
            # The common case: no second task to watch a cancellation that cannot come.
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(future), timeout)
        else:
            watch = asyncio.ensure_future(cancelled.wait())
            try:
                await asyncio.wait([future, watch], timeout=timeout,
                                   return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            finally:
                watch.cancel()
        if future.done():
            return future.result()
        by_host = cancelled is not None and cancelled.is_set()
        if method != "tools/call":  # initialize is never cancelled; a listing is just retried
            raise UpstreamTimeout(
                f"server {self.server.name} did not answer {method} within {timeout:g} s"
            )
        why = "the host cancelled it" if by_host else f"no answer within {timeout:g} s"
        with contextlib.suppress(UpstreamError):  # gone: the future says so
            await self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": request_id, "reason": why}})  # fmt: skip
        try:
            return await asyncio.wait_for(asyncio.shield(future), grace)
        except TimeoutError:
            error = UpstreamCancelled if by_host else UpstreamTimeout
            raise error(
                f"server {self.server.name}: {method} cancelled ({why}), and no answer came"
                f" within {grace:g} s more"
            ) from None

    async def close(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                if process.stdin is not None:
                    process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 2)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for task in list(self._handlers):
            task.cancel()
        self._fail(UpstreamGone(f"server {self.server.name} was stopped"))
        if self._log is not None:
            self._log.close()
            self._log = None

    def note(self, text: bytes) -> None:
        """A line in the server's log, marked as Signoff's."""
        self.skipped_lines += 1
        if self._log is not None:
            self._log.write(b"[signoff] " + text + b"\n")
            self._log.flush()

    # --- internals ----------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise UpstreamGone(f"server {self.server.name} is not running")
        try:
            data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
            process.stdin.write(data + b"\n")
            # A write to a pipe whose reader is gone fails inside the transport, which closes
            # at once but reports it only later: drain() would still return.
            if process.stdin.transport.is_closing():
                raise ConnectionResetError("its input is closed; nothing was written")
            await process.stdin.drain()
        except (ConnectionError, OSError) as e:
            self._fail(UpstreamGone(f"server {self.server.name} closed its input: {e}"))
            raise self._gone from None  # type: ignore[misc]

    async def _read(self) -> None:
        process = self._process
        if process is None or process.stdout is None:
            return
        stdout = process.stdout
        while True:
            line = await read_line(stdout, self.ceiling)
            if line is None:
                code = await process.wait()
                self._fail(UpstreamGone(f"server {self.server.name} exited (code {code})"))
                return
            try:
                if isinstance(line, LongLine):
                    self._too_long(line)
                else:
                    await self._dispatch(line.rstrip(b"\r\n"))
            except UpstreamError:
                return  # sending an answer failed: the server is gone, and said so
            except Exception as e:  # one bad line never ends the connection
                self.note(f"skipped a line that could not be handled: {e!r}"[:300].encode())

    def _too_long(self, line: LongLine) -> None:
        """A line over the ceiling: the request it answers, if its id can be read, has an
        answer too large to read (rule 3)."""
        members: dict[str, bytes] = {}
        with contextlib.suppress(ValueError):
            members = rawjson.top_level(line.head, stop_after=("id", "method"))
        with contextlib.suppress(ValueError):
            for key, raw in rawjson.top_level_tail(line.tail.rstrip(b"\r\n")).items():
                members.setdefault(key, raw)
        request_id: Any = None
        with contextlib.suppress(ValueError):
            request_id = json.loads(members.get("id", b"null"))
        future = self._pending.get(request_id) if type(request_id) is int else None
        self.note(f"dropped a line of {line.size} bytes, over the {self.ceiling} read".encode())
        if future is not None and not future.done() and "method" not in members:
            future.set_exception(UpstreamAnswerTooLarge(
                f"server {self.server.name} answered with {line.size} bytes, over the"
                f" {self.ceiling} Signoff reads",
                line.size,
            ))  # fmt: skip

    async def _dispatch(self, line: bytes) -> None:
        if not line.strip():
            return
        inexact = ""
        try:
            message: Any = canonical.loads(line)
        except JSONRefused as e:
            inexact = f"{e} [{type(e).__name__}]"
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                self.note(b"skipped a line that is not JSON: " + line[:200])
                return
        if not isinstance(message, dict):
            self.note(b"skipped a JSON line that is not a message")
            return
        if "method" in message:
            await self._from_server(message, inexact)
            return
        request_id = message.get("id")
        # Not a bool: true would otherwise answer request 1 (bool subclasses int).
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            request_id = None
        future = self._pending.get(request_id) if request_id is not None else None
        if future is None or request_id is None or future.done():
            self.note(b"skipped an answer to no request in flight")
            return
        if inexact and self._methods.get(request_id) == "tools/call":
            # Result or error alike: the server answered, so it acted (rule 4).
            future.set_exception(UpstreamAnswerInexact(
                f"server {self.server.name} answered with JSON Signoff cannot read exactly:"
                f" {inexact}"
            ))  # fmt: skip
        elif "error" in message:
            error = message["error"]
            if inexact or not isinstance(error, dict):
                why = inexact or "its error is not an object"
                error = {"code": -32603, "message": f"an error Signoff cannot read: {why}"}
            text = error.get("message")
            future.set_exception(UpstreamRefused(f"server {self.server.name}: {text}", error))
        elif isinstance(message.get("result"), dict):
            future.set_result(Answer(message["result"], line, inexact))
        else:
            future.set_exception(UpstreamAnswerUnreadable(
                f"server {self.server.name} answered without a result object"
            ))  # fmt: skip

    async def _from_server(self, message: dict[str, Any], inexact: str) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            self.note(b"skipped a message from the server: its method is not a string")
            if "id" in message:
                await self._reply(message["id"], _error(-32600, "the method is not a string"))
            return
        if "id" not in message:
            if inexact:  # nothing read inexactly is passed on
                self.note(f"skipped a notification: {inexact}".encode()[:300])
            elif self.on_message is not None:
                await self.on_message(self, message)
            elif method == "notifications/tools/list_changed":
                self.note(b"tools/list_changed ignored: this connection lists the tools once")
            return
        if inexact and method != "ping":
            self.note(f"refused a request: {inexact}".encode()[:300])
            await self._reply(message["id"], _error(-32700, f"not exact JSON: {inexact}"))
            return
        task = asyncio.create_task(self._answer_server(message))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _answer_server(self, message: dict[str, Any]) -> None:
        answer: dict[str, Any] | None = None
        if self.on_message is not None:
            try:
                answer = await self.on_message(self, message)
            except Exception as e:  # a fault of ours answers the server, never hangs it
                self.note(f"a request from the server failed here: {e!r}"[:300].encode())
                answer = _error(-32603, "Signoff's proxy could not answer this request")
        if answer is None:
            if message["method"] == "ping":
                answer = {"result": {}}
            else:
                answer = _error(METHOD_NOT_FOUND, "Signoff's proxy does not offer this")
        with contextlib.suppress(UpstreamError):
            await self._reply(message["id"], answer)

    async def _reply(self, request_id: Any, answer: dict[str, Any]) -> None:
        await self._send({"jsonrpc": "2.0", "id": request_id, **answer})

    def _fail(self, error: UpstreamError) -> None:
        if self._gone is None:
            self._gone = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._gone)


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


@dataclass(frozen=True)
class LongLine:
    """A line longer than the ceiling: its start, its end, and its length."""

    head: bytes
    tail: bytes
    size: int


async def read_line(stream: asyncio.StreamReader, ceiling: int) -> bytes | LongLine | None:
    """The next line of ``stream`` with its newline, a ``LongLine`` when it is longer than
    ``ceiling`` bytes, or None at the end. A long line is read in parts as it arrives, and only
    its start and end are kept."""
    kept = bytearray()
    head = b""  # once the line is known to be too long: its start; ``kept`` is then its end
    size = 0
    while True:
        try:
            chunk = await stream.readuntil(b"\n")
            ended = True
        except asyncio.LimitOverrunError as e:
            chunk = await stream.readexactly(e.consumed)
            ended = False
        except asyncio.IncompleteReadError as e:  # the end of the stream
            chunk = e.partial
            ended = True
            if not chunk and not size:
                return None
        size += len(chunk)
        kept += chunk
        if not head and size > ceiling + 2:  # past the line and a newline of one or two bytes
            head = bytes(kept[:TAIL])
        if head:
            del kept[:-TAIL]
        if ended:
            if head or len(kept.rstrip(b"\r\n")) > ceiling:
                return LongLine(head or bytes(kept[:TAIL]), bytes(kept[-TAIL:]), size)
            return bytes(kept)
