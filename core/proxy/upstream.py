"""Our own client for an upstream MCP server over stdio, keeping the raw bytes it sends.

The SDK's stdio client parses every line into models before anyone sees the bytes, and rejects
a whole listing when one tool is invalid; pins need the bytes, so this speaks the few messages
the proxy needs itself (initialize, tools/list, tools/call, ping) as newline-delimited JSON-RPC.

- The server gets only PATH, HOME and TMPDIR (and the platform's essentials on Windows), plus
  the variables the operator named. Its stderr goes to a log file.
- A line longer than ``MAX_LINE`` ends the connection (``UpstreamAnswerUnreadable``: a call in
  flight reached the server, whose answer cannot be read); an answer whose ``result`` is not
  an object is ``UpstreamAnswerUnreadable`` too, and a JSON-RPC error ``UpstreamProtocolError``
  (the server's own refusal); lines that
  are not JSON are logged and skipped, never trusted; ``notifications/tools/list_changed`` is
  logged and ignored (the tool set is fixed at start); requests from the server are answered
  "method not found", except ping.
- A server that exits fails every call in flight with ``UpstreamGone``. A call not answered
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
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from core import private_files
from core.errors import (
    UpstreamAnswerUnreadable,
    UpstreamCancelled,
    UpstreamError,
    UpstreamGone,
    UpstreamNotDelivered,
    UpstreamProtocolError,
    UpstreamStartFailed,
    UpstreamTimeout,
)
from core.proxy.config import ServerConfig


class Cancelled(Protocol):
    """An event the host's cancellation sets (an ``anyio.Event`` or ``asyncio.Event``)."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


MAX_LINE = 8 * 1024 * 1024
PROTOCOL_VERSION = "2025-06-18"
BASE_ENV = ("PATH", "HOME", "TMPDIR")
WINDOWS_ENV = ("SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP",
               "USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA")  # fmt: skip


def server_environment(
    server: ServerConfig, environ: dict[str, str] | None = None
) -> dict[str, str]:
    source = dict(os.environ if environ is None else environ)
    names = [*BASE_ENV, *(WINDOWS_ENV if sys.platform == "win32" else ()), *server.env]
    return {name: source[name] for name in names if name in source}


class Upstream:
    """One running upstream server and the requests in flight to it."""

    def __init__(self, server: ServerConfig, log_path: Path) -> None:
        self.server = server
        self.log_path = log_path
        self.protocol_version = ""
        self.server_info: dict[str, Any] = {}
        self.initialize_result: dict[str, Any] = {}  # the handshake's answer, as parsed
        self.skipped_lines = 0
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], bytes]]] = {}
        self._next_id = 0
        self._gone: UpstreamError | None = None
        self._log: BinaryIO | None = None

    @property
    def alive(self) -> bool:
        return self._gone is None and self._process is not None

    async def start(self, timeout: float) -> None:
        """Spawn the server and complete the MCP handshake."""
        self._log = private_files.open_log_bytes(self.log_path)
        try:
            self._process = await asyncio.create_subprocess_exec(
                self.server.command,
                *self.server.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._log,
                env=server_environment(self.server),
                limit=MAX_LINE,
            )
        except OSError as e:
            raise UpstreamStartFailed(
                f"server {self.server.name}: cannot start {self.server.command!r}: {e}"
            ) from None
        self._gone = None
        self._reader = asyncio.create_task(self._read())
        try:
            result, _ = await self.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "signoff", "version": "0.1"},
                },
                timeout,
            )
        except UpstreamError as e:
            await self.close()
            raise UpstreamStartFailed(f"server {self.server.name}: no handshake: {e}") from None
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
            result, raw = await self.request("tools/list", params, timeout)
            pages.append(raw)
            total += len(raw)
            if total > MAX_LISTING_BYTES:  # stop reading at once, not after every page
                raise ListingRefused(
                    f"server {self.server.name}: the listing is {total} bytes, over the"
                    f" {MAX_LISTING_BYTES} allowed"
                )
            cursor = result.get("nextCursor")
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
    ) -> dict[str, Any]:
        """``cancelled``: set when the host cancels the call (the server is then told)."""
        result, _ = await self.request(
            "tools/call", {"name": name, "arguments": arguments}, timeout,
            grace=grace, cancelled=cancelled,
        )  # fmt: skip
        return result

    async def answers_ping(self, timeout: float) -> bool:
        """Whether the server still answers: one that does keeps its session state."""
        try:
            await self.request("ping", {}, timeout)
        except UpstreamError:
            return False
        return True

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        timeout: float,
        *,
        grace: float = 0.0,
        cancelled: Cancelled | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        if self._gone is not None:
            raise UpstreamNotDelivered(f"{self._gone}; {method} was not sent")
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[tuple[dict[str, Any], bytes]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[request_id] = future
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

    async def _answer(
        self,
        future: asyncio.Future[tuple[dict[str, Any], bytes]],
        request_id: int,
        method: str,
        timeout: float,
        grace: float,
        cancelled: Cancelled | None,
    ) -> tuple[dict[str, Any], bytes]:
        """The answer to a request sent: by ``timeout``, or once ``cancelled`` is set, the
        server is told the request is cancelled, and an answer within ``grace`` more is still
        the answer."""
        watch = asyncio.ensure_future(cancelled.wait()) if cancelled is not None else None
        try:
            await asyncio.wait([future, *([watch] if watch else [])], timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            if watch is not None:
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
        self._fail(UpstreamGone(f"server {self.server.name} was stopped"))
        if self._log is not None:
            self._log.close()
            self._log = None

    # --- internals ----------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise UpstreamGone(f"server {self.server.name} is not running")
        try:
            process.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
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
        try:
            while True:
                try:
                    line = await stdout.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    self._fail(UpstreamAnswerUnreadable(
                        f"server {self.server.name} sent a line over {MAX_LINE} bytes"
                    ))  # fmt: skip
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    return
                if not line:
                    code = await process.wait()
                    self._fail(UpstreamGone(f"server {self.server.name} exited (code {code})"))
                    return
                try:
                    await self._dispatch(line.rstrip(b"\r\n"))
                except UpstreamError:
                    return  # sending an answer failed: the server is gone, and said so
                except Exception as e:  # one bad line never ends the connection
                    self._note(f"skipped a line that could not be handled: {e!r}"[:300].encode())
        except asyncio.CancelledError:
            raise

    async def _dispatch(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self._note(b"skipped a line that is not JSON: " + line[:200])
            return
        if not isinstance(message, dict):
            self._note(b"skipped a JSON line that is not a message")
            return
        if "method" in message:
            method = message.get("method")
            if "id" in message:  # a request from the server
                if method == "ping":
                    await self._send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                else:
                    error = {"code": -32601, "message": "Signoff's proxy does not offer this"}
                    await self._send({"jsonrpc": "2.0", "id": message["id"], "error": error})
            elif method == "notifications/tools/list_changed":
                self._note(b"tools/list_changed ignored: the tool set is fixed at start")
            return
        request_id = message.get("id")
        # type(...) is int: true would otherwise answer request 1 (bool subclasses int).
        future = self._pending.get(request_id) if type(request_id) is int else None
        if future is None or future.done():
            self._note(b"skipped an answer to no request in flight")
            return
        if "error" in message:
            error = message["error"]
            text = error.get("message") if isinstance(error, dict) else str(error)
            future.set_exception(UpstreamProtocolError(f"server {self.server.name}: {text}"))
        elif isinstance(message.get("result"), dict):
            future.set_result((message["result"], line))
        else:
            future.set_exception(UpstreamAnswerUnreadable(
                f"server {self.server.name} answered without a result object"
            ))  # fmt: skip

    def _note(self, text: bytes) -> None:
        self.skipped_lines += 1
        if self._log is not None:
            self._log.write(b"[signoff] " + text + b"\n")
            self._log.flush()

    def _fail(self, error: UpstreamError) -> None:
        if self._gone is None:
            self._gone = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._gone)
