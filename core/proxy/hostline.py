"""What the proxy makes of one line the host wrote: the message it says exactly, or a refusal.
Pure code.

Rules:

1. The host's bytes are read by Signoff's own parser (``canonical.loads``) before anything else
   reads them. A line it refuses (a key twice at any depth, a number a double cannot hold as
   written, an integer outside ±(2^53-1), NaN or Infinity, a lone surrogate, invalid UTF-8,
   text that is not JSON), one nested deeper than ``MAX_DEPTH`` levels and one longer than
   ``MAX_LINE`` bytes are refused by name: ``PARSE_ERROR``. Nothing past ``MAX_LINE`` is kept
   but the line's last ``TAIL`` bytes.
2. The message is the value that parser returned, never the text read again: no second
   decoder reads the host's bytes, so the arguments the gate records and the server receives
   are exactly the ones the host wrote. JSON that is not a JSON-RPC 2.0 message (not an object,
   no ``"jsonrpc": "2.0"``, a method that is not a string, params that are not an object, a
   response with neither or both of result and error) is refused, saying which:
   ``INVALID_REQUEST``.
3. A refused request is answered with a JSON-RPC error naming why (to a null id when its id
   cannot be read exactly: a float, a boolean, an integer beyond 2^53), to the id read from the
   line's top level (``rawjson.top_level``, no recursion, as far as the text reads; for a line
   too long, also backward from its end, where some hosts write the id). A line with no id to
   answer (a notification, a response, or too broken to tell) is refused unanswered: the proxy
   logs it. Nothing of a refused line runs.
4. A blank line is nothing: neither a message nor a refusal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core import canonical
from core.errors import HostLineTooLong, JSONRefused, NestedTooDeeply
from core.proxy import rawjson

MAX_LINE = 8 * 1024 * 1024  # bytes of one line, its newline not counted; as from a server
MAX_DEPTH = rawjson.MAX_DEPTH  # levels of arrays and objects in one message; as from a server
TAIL = 64 * 1024  # bytes of a line too long kept from its end, where its id may be
PARSE_ERROR = -32700  # JSON-RPC 2.0's codes
INVALID_REQUEST = -32600
_NEEDED = ("id", "method")
Message = dict[str, Any]


@dataclass(frozen=True)
class Refused:
    """A line the proxy does not pass on: why, and the answer the host gets (None: no id)."""

    why: str
    answer: Message | None


def read_line(line: bytes) -> Message | Refused | None:
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
    if request and _valid_id(request_id) is None:  # it could be taken for a notification
        why = "not a JSON-RPC message: id: must be a string or an integer"
        return Refused(why, _answer(True, None, INVALID_REQUEST, why))
    wrong = _not_a_message(value)
    if wrong:
        why = f"not a JSON-RPC message: {wrong}"
        return Refused(why, _answer(request, _valid_id(request_id), INVALID_REQUEST, why))
    assert isinstance(value, dict)  # _not_a_message says so otherwise
    return value


def _not_a_message(value: Any) -> str:
    """What makes ``value`` no JSON-RPC 2.0 message, or "" (rule 2)."""
    if not isinstance(value, dict):
        return "the message: not an object (a batch is not read)"
    if value.get("jsonrpc") != "2.0":
        return 'jsonrpc: must be "2.0"'
    if "method" in value:
        if not isinstance(value["method"], str):
            return "method: must be a string"
        if "params" in value and not isinstance(value["params"], dict):
            return "params: must be an object"
        return ""
    if "id" not in value or (_valid_id(value["id"]) is None and value["id"] is not None):
        return "id: a response needs the string or integer id it answers"
    if ("result" in value) == ("error" in value):
        return "a response has exactly one of result and error"
    error = value.get("error")
    if "error" in value and not (
        isinstance(error, dict)
        and type(error.get("code")) is int
        and isinstance(error.get("message"), str)
    ):
        return "error: must be an object with an integer code and a string message"
    return ""


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


def _answer(answered: bool, request_id: int | str | None, code: int, why: str) -> Message | None:
    if not answered:
        return None
    text = f"Signoff's proxy cannot read this request, so nothing was run: {why}"
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def _is_request(value: dict[str, Any]) -> bool:
    return "id" in value and "method" in value


def _valid_id(value: Any) -> int | str | None:
    return value if type(value) in (int, str) else None


def _refuse_too_deep(line: bytes) -> None:
    if rawjson.deeper_than(line, MAX_DEPTH):
        raise NestedTooDeeply(f"the message is nested deeper than {MAX_DEPTH} levels")


def dump(message: Message) -> bytes:
    """A message to the host as one line, its newline included: the values as they are (the
    server's result as it sent it, core/proxy/results.py), in the order they are in. A string
    UTF-8 cannot carry (a lone surrogate) is written as its JSON escape, the line otherwise
    unchanged; a message that is not JSON at all raises ``TypeError`` or ``ValueError``."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"
