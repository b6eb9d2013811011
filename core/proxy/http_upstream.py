"""Our own client for a remote MCP server over Streamable HTTP, keeping the raw bytes it sends.

``HttpUpstream`` is an ``Upstream`` (core/proxy/upstream.py) whose messages travel as HTTP
requests instead of lines on a pipe: everything the server sends (a JSON body, or each event of
an SSE stream) is handed as its raw bytes to the same ``_dispatch`` the stdio client uses, so
answers, pins over the listing's bytes, server requests and notifications, timeouts and
cancellations follow upstream.py's rules unchanged. ``upstream_for`` picks the transport a
server's configuration asks for.

Rules:

1. Each message is POSTed to the URL with ``Accept: application/json, text/event-stream``, the
   headers the configuration names (their secrets read at start, core/proxy/remote.py), the
   ``Mcp-Session-Id`` the server gave in its answer to ``initialize``, and
   ``MCP-Protocol-Version`` once agreed. A request's POST runs in a task of its own, so that a
   long call never holds up another; a notification's or an answer's is sent in order.
2. A request's answer is the POST's body (``application/json``) or an event of its SSE stream
   (``text/event-stream``), which may also carry the server's own requests and notifications.
   A body or an event is read whole up to ``ceiling`` bytes; a longer one is dropped and the
   request fails as upstream.py rule 3 says. Redirects are not followed.
3. Failures are named, and no token is ever shown (a URL only as ``remote.shown`` writes it,
   an HTTP library's words with the resolved URL and every secret's value hidden): 401/403
   ``UpstreamTokenRefused`` (not run); a server not reached ``UpstreamUnreachable`` (not
   sent); 404 to a request carrying a session id ``UpstreamSessionExpired`` (not run; the
   upstream is gone, and servers.py greets the server anew and sends it once more, its
   listing checked against the pins again); any
   other answer with no JSON-RPC answer in it, or a stream cut before one came,
   ``UpstreamNotMCP`` (a call's outcome then unknown). The handshake raises these by name.
4. After the handshake a GET stream is opened for messages the server sends outside any request
   (``tools/list_changed``); a server that offers none (405) is fine. It is not reopened when it
   ends: the log says so.
5. ``close`` ends the session (DELETE, its answer not awaited past a second) and the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2

from core import private_files
from core.errors import (
    UpstreamError,
    UpstreamGone,
    UpstreamNotMCP,
    UpstreamSessionExpired,
    UpstreamStartFailed,
    UpstreamTokenRefused,
    UpstreamUnreachable,
)
from core.proxy import remote
from core.proxy.config import ServerConfig
from core.proxy.upstream import CEILING, TAIL, Greeting, LongLine, OnMessage, Upstream

ACCEPT = "application/json, text/event-stream"
CONNECT_TIMEOUT = 15.0  # seconds to reach the server; an answer's own wait is the call's timeout
CLOSE_TIMEOUT = 1.0


def upstream_for(
    server: ServerConfig,
    log_path: Path,
    *,
    on_message: OnMessage | None = None,
    ceiling: int = CEILING,
) -> Upstream:
    """The client the server's configuration asks for: over HTTP for a ``url``, else stdio."""
    kind = HttpUpstream if server.url else Upstream
    return kind(server, log_path, on_message=on_message, ceiling=ceiling)


class HttpUpstream(Upstream):
    """One session with a remote server, and the requests in flight to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: httpx2.AsyncClient | None = None
        self._headers: dict[str, str] = {}
        self._url = ""  # the URL with its query's references filled in: sent, never shown
        self._secrets: list[str] = []  # the values read for the references: never shown
        self._session_id: str | None = None
        self._posts: set[asyncio.Task[None]] = set()
        self._listening: asyncio.Task[None] | None = None
        self._named: UpstreamError | None = None  # why the handshake failed, by name

    @property
    def alive(self) -> bool:
        return self._gone is None and self._client is not None

    async def spawn(self) -> None:
        """Read the headers' secrets (``RemoteSecretMissing`` names one not there) and make the
        client; nothing is sent before the handshake."""
        # A keyring may take its time (a locked one): the proxy's other work goes on meanwhile.
        secrets: list[str] = []
        self._headers = await asyncio.to_thread(remote.resolve, self.server, found=secrets)
        self._url = await asyncio.to_thread(remote.resolve_url, self.server, found=secrets)
        self._secrets = secrets
        self._log = private_files.open_log_bytes(self.log_path)
        timeout = httpx2.Timeout(CONNECT_TIMEOUT, read=None)  # a call waits as long as it may
        self._client = httpx2.AsyncClient(timeout=timeout, follow_redirects=False)
        self._session_id = None
        self._gone = None

    async def handshake(self, timeout: float, greeting: Greeting | None = None) -> None:
        self._named = None
        try:
            await super().handshake(timeout, greeting)
        except UpstreamStartFailed:
            if self._named is not None:  # rule 3: by its own name, not "no handshake"
                raise self._named from None
            raise
        self._listening = asyncio.create_task(self._listen())

    async def close(self) -> None:
        tasks = [*self._posts, *([self._listening] if self._listening else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._listening = None
        client, self._client = self._client, None
        if client is not None:
            if self._session_id is not None:
                with contextlib.suppress(httpx2.HTTPError, TimeoutError):
                    await asyncio.wait_for(
                        client.delete(self._url, headers=self._request_headers()),
                        CLOSE_TIMEOUT,
                    )
            await client.aclose()
        await super().close()

    # --- sending (rule 1) ---------------------------------------------------------------

    def _request_headers(self) -> dict[str, str]:
        headers = {**self._headers, "Accept": ACCEPT, "Content-Type": "application/json"}
        if self._session_id is not None:
            headers["Mcp-Session-Id"] = self._session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def _send(self, message: dict[str, Any]) -> None:
        if self._client is None:
            raise UpstreamGone(f"server {self.server.name} is not connected")
        if self._gone is not None:
            raise self._gone
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        request_id = message.get("id") if "method" in message else None
        if request_id is None:  # a notification or an answer: in order, and accepted
            await self._post(body, None, str(message.get("method", "an answer")))
            return
        task = asyncio.create_task(self._post(body, request_id, str(message["method"])))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)

    async def _post(self, body: bytes, request_id: Any, method: str) -> None:
        """POST one message; a request's answer is dispatched, or the request failed by name."""
        client = self._client
        if client is None:
            return
        name = self.server.name
        try:
            request = client.build_request("POST", self._url, content=body,
                                           headers=self._request_headers())  # fmt: skip
            response = await client.send(request, stream=True)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.UnsupportedProtocol) as e:
            self._failed(request_id, method, UpstreamUnreachable(
                f"server {name} cannot be reached at {remote.shown(self.server.url)}:"
                f" {self._reason(e)}; {method}"
                " was not sent"
            ))  # fmt: skip
            return
        except httpx2.HTTPError as e:
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name}: the connection failed while sending {method}: {self._reason(e)}"
            ))  # fmt: skip
            return
        try:
            await self._answered(response, request_id, method)
        except httpx2.HTTPError as e:
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name}: the answer to {method} was cut off: {self._reason(e)}"
            ))  # fmt: skip
        except Exception as e:  # a request never hangs on a fault of ours: it fails, named
            if request_id is None:
                raise
            self.note(f"an answer could not be read here: {self._reason(e, repr(e))}".encode())
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name}: Signoff could not read the answer to {method}: {self._reason(e)}"
            ))  # fmt: skip
        finally:
            await response.aclose()
        if request_id is not None:
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name} answered {method} (HTTP {response.status_code}) with no"
                " JSON-RPC answer to it"
            ))  # fmt: skip

    def _reason(self, e: BaseException, words: str = "") -> str:
        """An HTTP failure in words, never its request (whose headers and URL carry the
        secrets): what the library says, with the URL and every secret's value hidden."""
        said = remote.scrubbed(words or str(e) or type(e).__name__, self._url, self._secrets)
        return said[:200]

    def _failed(self, request_id: Any, method: str, error: UpstreamError) -> None:
        """Fail the request still waiting (an answer already in wins); for a message with no
        answer, raise: its sender says what that means."""
        if request_id is None:
            raise error
        future = self._pending.get(request_id)
        if future is not None and not future.done():
            if method == "initialize":
                self._named = error
            future.set_exception(error)

    # --- reading (rules 2 and 3) --------------------------------------------------------

    async def _answered(self, response: httpx2.Response, request_id: Any, method: str) -> None:
        name, status = self.server.name, response.status_code
        if status in (401, 403):
            raise_or = UpstreamTokenRefused(
                f"server {name} refused the credentials Signoff sent (HTTP {status}): check the"
                " variable or keyring secret its headers name"
            )
            self._failed(request_id, method, raise_or)
            return
        if status == 404 and self._session_id is not None:
            self._fail(UpstreamSessionExpired(
                f"server {name} ended Signoff's session (HTTP 404); {method} was not run"
            ))  # fmt: skip
            if request_id is None:
                raise self._gone  # type: ignore[misc]
            return
        if 300 <= status < 400:
            where = remote.shown(response.headers.get("location", "elsewhere"))
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name} redirects to {where[:200]}: Signoff does not follow redirects;"
                " configure the address it points to"
            ))  # fmt: skip
            return
        if method == "initialize" and status < 300:
            self._session_id = response.headers.get("mcp-session-id") or None
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if status == 202 and request_id is not None:
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name} answered {method} with 202 Accepted: no answer will come"
            ))  # fmt: skip
            return
        if request_id is None:
            if status >= 300:
                raise UpstreamNotMCP(f"server {name} refused {method} (HTTP {status})")
            return  # 202 Accepted: nothing more to read
        if kind == "text/event-stream" and status < 300:
            await self._events(response, request_id)
        elif kind == "application/json":
            body = await self._body(response)
            if isinstance(body, LongLine):
                self._too_long(body)
            elif status < 300:
                await self._dispatch(body)
            else:  # a JSON-RPC error may come with a 4xx or 5xx: it is the answer
                await self._error_body(body, request_id)
        elif status < 300:
            self._failed(request_id, method, UpstreamNotMCP(
                f"server {name} answered {method} with {kind or 'no content type'}, not JSON"
                " or an event stream: is this the address of an MCP server?"
            ))  # fmt: skip

    async def _body(self, response: httpx2.Response) -> bytes | LongLine:
        kept = bytearray()
        head = b""
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            kept += chunk
            if size > self.ceiling:
                head = head or bytes(kept[:TAIL])
                del kept[:-TAIL]
        if head:
            return LongLine(head, bytes(kept), size)
        return bytes(kept).strip()

    async def _error_body(self, body: bytes, request_id: Any) -> None:
        """A JSON-RPC error answering the request, whatever id it carries (a server that
        refused the request before reading it answers with ``null``)."""
        with contextlib.suppress(ValueError, RecursionError):
            message = json.loads(body)
            if isinstance(message, dict) and isinstance(message.get("error"), dict):
                message["id"] = request_id
                await self._dispatch(json.dumps(message).encode())

    async def _events(self, response: httpx2.Response, request_id: Any) -> None:
        """Dispatch each event of the stream, until the request is answered."""
        async for data in events(response, self.ceiling):
            if isinstance(data, LongLine):
                self._too_long(data)
            elif data.strip():
                await self._dispatch(data)
            if request_id is not None:
                future = self._pending.get(request_id)
                if future is None or future.done():
                    return

    async def _listen(self) -> None:
        """The server's own stream (rule 4)."""
        client = self._client
        if client is None:
            return
        headers = {**self._request_headers(), "Accept": "text/event-stream"}
        del headers["Content-Type"]
        try:
            async with client.stream("GET", self._url, headers=headers) as response:
                kind = response.headers.get("content-type", "")
                if response.status_code != 200 or not kind.startswith("text/event-stream"):
                    self.note(
                        f"no stream of the server's own (HTTP {response.status_code})".encode()
                    )
                    return
                await self._events(response, None)
        except httpx2.HTTPError as e:
            self.note(f"the server's own stream failed: {self._reason(e)}".encode()[:300])
            return
        self.note(b"the server's own stream ended; messages outside a request no longer arrive")


async def events(response: httpx2.Response, ceiling: int) -> AsyncIterator[bytes | LongLine]:
    """The data of each event of an SSE stream as raw bytes (its ``data:`` lines joined by a
    newline), or a ``LongLine`` for one over ``ceiling`` bytes."""
    reader = EventReader(ceiling)
    async for chunk in response.aiter_bytes():
        for event in reader.feed(chunk):
            yield event


class EventReader:
    """SSE events from bytes as they arrive. Lines end with CRLF, LF or CR; an empty line ends
    an event; fields other than ``data`` (event, id, retry, comments) carry no message. An
    event, or one line, past ``ceiling`` bytes is kept as its start and end only."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer known to hold no line end
        self._data: list[bytes] = []
        self._size = 0
        self._head = b""  # once the event is too long: its start
        self._skipping = False  # inside a line too long to keep: its bytes are counted only

    def feed(self, chunk: bytes) -> list[bytes | LongLine]:
        found: list[bytes | LongLine] = []
        self._buffer += chunk
        while (cut := self._line_end()) is not None:
            line = bytes(self._buffer[: cut[0]])
            del self._buffer[: cut[1]]
            self._searched = 0
            if self._skipping:
                self._add(line)
                self._skipping = False
            elif not line:
                found.extend(self._event())
            elif line.startswith(b"data:") or line == b"data":
                self._add(line[5:].removeprefix(b" "))
        if not self._skipping and len(self._buffer) > self.ceiling + 2 * TAIL:
            if self._buffer.startswith(b"data:"):  # a data line too long: keep its ends
                self._skipping = True
                self._add(bytes(self._buffer[5:]).removeprefix(b" "))
            del self._buffer[:]
            self._searched = 0
        elif self._skipping:
            self._add(bytes(self._buffer))
            del self._buffer[:]
            self._searched = 0
        return found

    def _add(self, value: bytes) -> None:
        """A part of the event's data (a line, or a piece of one too long to keep)."""
        if self._data and not self._skipping:
            value = b"\n" + value
        self._size += len(value)
        self._data.append(value)
        if self._size > self.ceiling:
            joined = b"".join(self._data)
            self._head = self._head or joined[:TAIL]
            self._data = [joined[-TAIL:]]

    def _event(self) -> list[bytes | LongLine]:
        data, head, size = b"".join(self._data), self._head, self._size
        self._data, self._head, self._size = [], b"", 0
        if head:
            return [LongLine(head, data[-TAIL:], size)]
        return [data] if data else []

    def _line_end(self) -> tuple[int, int] | None:
        """Where the buffer's first line ends, and where the next begins."""
        buffer = self._buffer
        newline = buffer.find(b"\n", self._searched)
        ret = buffer.find(b"\r", self._searched, newline if newline >= 0 else len(buffer))
        if ret < 0:
            if newline < 0:
                self._searched = len(buffer)
                return None
            return newline, newline + 1
        if ret + 1 == len(buffer):  # a CR last: an LF may follow in the next chunk
            self._searched = ret
            return None
        return ret, ret + 2 if buffer[ret + 1] == 0x0A else ret + 1
