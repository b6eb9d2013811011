"""What the proxy makes of one line the host wrote: the message it says exactly, or a refusal.
Pure code.

Rules:

1. The host's bytes are read by Signoff's own parser (``canonical.loads``) before anything else
   reads them. A line it refuses (a key twice at any depth, a number a double cannot hold as
   written, an integer outside ±(2^53-1), NaN or Infinity, a lone surrogate, invalid UTF-8,
   text that is not JSON), one nested deeper than ``MAX_DEPTH`` levels and one longer than
   ``MAX_LINE`` bytes are refused by name: ``PARSE_ERROR``. Nothing past ``MAX_LINE`` is kept
   but the line's last ``TAIL`` bytes.
2. The SDK's message is built from the value that parser returned (``validate_python``), never
   from the text: no second decoder reads the host's bytes, so the arguments the gate records
   and the server receives are exactly the ones the host wrote. JSON that is not a JSON-RPC
   message (a params that is not an object, a method that is not a string) is refused with the
   SDK's reason: ``INVALID_REQUEST``.
3. A refused request is answered with a JSON-RPC error naming why (to a null id when its id
   cannot be read exactly: a float, a boolean, an integer beyond 2^53), to the id read from the
   line's top level (``rawjson.top_level``, no recursion, as far as the text reads; for a line
   too long, also backward from its end, where some hosts write the id). A line with no id to
   answer (a notification, a response, or too broken to tell) is refused unanswered: the proxy
   logs it. Nothing of a refused line runs.
4. A blank line is nothing: neither a message nor a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from core import canonical
from core.errors import HostLineTooLong, JSONRefused, NestedTooDeeply
from core.proxy import rawjson

MAX_LINE = 8 * 1024 * 1024  # bytes of one line, its newline not counted; as from a server
MAX_DEPTH = rawjson.MAX_DEPTH  # levels of arrays and objects in one message; as from a server
TAIL = 64 * 1024  # bytes of a line too long kept from its end, where its id may be
PARSE_ERROR = types.PARSE_ERROR
INVALID_REQUEST = types.INVALID_REQUEST
_NEEDED = ("id", "method")


@dataclass(frozen=True)
class Refused:
    """A line the proxy does not pass on: why, and the answer the host gets (None: no id)."""

    why: str
    answer: types.JSONRPCError | None


def read_line(line: bytes) -> SessionMessage | Refused | None:
    """The message ``line`` holds, exactly as written, or why it is refused; None for a blank
    line. ``line`` may end with its newline. Never raises."""
    line = line.rstrip(b"\r\n")
    if not line.strip():
        return None
    if len(line) > MAX_LINE:
        return too_long(line, line[-TAIL:])
    try:
        _refuse_too_deep(line)  # first: the parser below then never exhausts the stack
        value = canonical.loads(line)
    except JSONRefused as e:
        return _refused(line, PARSE_ERROR, f"{e} [{type(e).__name__}]")
    request_id = value.get("id") if isinstance(value, dict) else None
    request = isinstance(value, dict) and _is_request(value)
    if request and _valid_id(request_id) is None:  # the SDK would take it for a notification
        why = "not a JSON-RPC message: id: must be a string or an integer"
        return Refused(why, _answer(True, None, INVALID_REQUEST, why))
    try:
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
        why = f"not a JSON-RPC message: {where}: {first['msg']}"
        return Refused(why, _answer(request, _valid_id(request_id), INVALID_REQUEST, why))
    return SessionMessage(message)


def too_long(head: bytes, tail: bytes = b"") -> Refused:
    """The refusal of a line longer than ``MAX_LINE`` bytes, of which ``head`` is the start and
    ``tail`` the end: answered when its id is read in either (hosts write it first or last)."""
    e = HostLineTooLong(
        f"the message is longer than {MAX_LINE} bytes; send large contents in parts or as a file"
    )
    why = f"{e} [{type(e).__name__}]"
    members = _members(head[:MAX_LINE])
    for key, raw in rawjson.top_level_tail(tail[-TAIL:].rstrip(b"\r\n")).items():
        members.setdefault(key, raw)
    return Refused(why, _answer(*_request_id(members), PARSE_ERROR, why))


def _refused(line: bytes, code: int, why: str) -> Refused:
    return Refused(why, _answer(*_request_id(_members(line)), code, why))


def _members(line: bytes) -> dict[str, bytes]:
    try:
        return rawjson.top_level(line, stop_after=_NEEDED)
    except ValueError:  # a key that is not JSON ends the reading
        return {}


def _request_id(members: dict[str, bytes]) -> tuple[bool, int | str | None]:
    """Whether the line is a request to answer (it has an id and a method), and its id as
    exactly written: None when Signoff cannot read it exactly, answered then with a null id,
    as JSON-RPC says for an id that cannot be told."""
    if "method" not in members or "id" not in members:
        return False, None
    try:
        return True, _valid_id(canonical.loads(members["id"]))
    except JSONRefused:
        return True, None


def _answer(
    answered: bool, request_id: int | str | None, code: int, why: str
) -> types.JSONRPCError | None:
    if not answered:
        return None
    text = f"Signoff's proxy cannot read this request, so nothing was run: {why}"
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=text)
    )


def _is_request(value: dict[str, Any]) -> bool:
    return "id" in value and "method" in value


def _valid_id(value: Any) -> int | str | None:
    return value if type(value) in (int, str) else None


def _refuse_too_deep(line: bytes) -> None:
    if rawjson.deeper_than(line, MAX_DEPTH):
        raise NestedTooDeeply(f"the message is nested deeper than {MAX_DEPTH} levels")


def dump(message: SessionMessage) -> bytes:
    """A message to the host as one line, its newline included."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
