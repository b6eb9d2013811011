"""A request from the host that the MCP SDK cannot read is answered, never left unanswered.

The SDK's stdio transport parses each line with pydantic. A line it cannot parse (a lone UTF-16
surrogate escape, nesting past its parser's 200 levels, text that is not JSON, a message of the
wrong shape) reaches the server as an exception, which the SDK drops: the host then waits for an
answer that never comes. ``AnswerUnreadable`` wraps the transport's read stream; for such a line
it reads the request's id as far as the text allows (``rawjson.top_level``, no recursion) and
answers a JSON-RPC error saying why, then goes on reading. A line with no id to answer (a
notification, or too broken to tell) is passed on to the SDK as before.
"""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from core import canonical
from core.errors import JSONRefused
from core.proxy import rawjson

log = logging.getLogger("signoff.proxy")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_NEEDED = ("id", "method")


class _Read(Protocol):
    async def receive(self) -> SessionMessage | Exception: ...
    async def aclose(self) -> None: ...


class _Write(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class AnswerUnreadable:
    """The transport's read stream, less the requests it could not read, which are answered."""

    def __init__(self, inner: _Read, write: _Write) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:  # the SDK restores the sender's context from it
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            try:
                answer = unreadable_answer(item)
            except Exception:  # this sits in the transport's read loop: it must never raise
                log.exception("could not tell which request the SDK failed to read")
                answer = None
            if answer is None:
                return item
            log.warning("answered request %r the SDK could not read: %s", answer.id,
                        answer.error.message)  # fmt: skip
            await self._write.send(SessionMessage(answer))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnswerUnreadable:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnswerUnreadable:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def unreadable_answer(error: Exception) -> types.JSONRPCError | None:
    """The error answering the request the SDK failed to read with ``error``, or None when
    there is no request id to answer."""
    if not isinstance(error, ValidationError):
        return None
    details = error.errors()
    texts = [d["input"] for d in details if d["type"] == "json_invalid"]
    line = texts[0] if texts and isinstance(texts[0], str) else None
    if line is not None:
        members = rawjson.top_level(line.encode("utf-8", "replace"), stop_after=_NEEDED)
        request_id = _request_id(members.get("id")) if "method" in members else None
        code, why = PARSE_ERROR, details[0]["msg"] + _named(line)
    else:
        message = next(
            (d["input"] for d in details
             if isinstance(d["input"], dict) and all(k in d["input"] for k in _NEEDED)),
            None,
        )  # fmt: skip
        request_id = None if message is None else _valid_id(message["id"])
        first = details[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
        code, why = INVALID_REQUEST, f"not a JSON-RPC request: {where}: {first['msg']}"
    if request_id is None:
        return None
    text = f"Signoff's proxy cannot read this request: {why}"
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=text)
    )


def _request_id(raw: bytes | None) -> int | str | None:
    if raw is None:
        return None
    try:
        return _valid_id(json.loads(raw))
    except (ValueError, RecursionError):
        return None


def _valid_id(value: Any) -> int | str | None:
    return value if type(value) in (int, str) else None


def _named(line: str) -> str:
    """The named refusal of the text, when Signoff's own reader refuses it too."""
    try:
        canonical.loads(line)
    except JSONRefused as e:
        return f" ({e} [{type(e).__name__}])"
    return ""
