"""Where each value sits in the raw bytes of a JSON text. Pure code.

A pin must be taken over the bytes a server sent, not over a decoded model: a float64 decoder
moves 9007199254740993 to 9007199254740992, escapes get rewritten, unknown fields dropped.
``spans(data)`` returns a tree mirroring the JSON value whose leaves and nodes carry the
``(start, end)`` byte offsets of each value in ``data``; ``data[start:end]`` is the value exactly
as sent. The text must already be known to be JSON (it is parsed first); anything else raises
``ValueError``.

``top_level(data)`` reads only the members of a top-level object, skipping nested values without
recursion, so that a request too deep or too odd for the strict parsers can still be answered by
its id; ``top_level_tail(data)`` reads the scalar members that end one, backward from its closing
brace, for a request too long to keep whole whose id comes last. ``deeper_than(data, levels)``
says whether any text, JSON or not, nests deeper than that, without parsing it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field

_WS = b" \t\r\n"
MAX_DEPTH = 128  # deeper JSON is refused (ValueError) rather than exhausting the stack


@dataclass
class Node:
    start: int
    end: int
    members: dict[str, Node] = field(default_factory=dict)  # an object's values by key
    items: list[Node] = field(default_factory=list)  # an array's values
    duplicate_keys: list[str] = field(default_factory=list)

    def raw(self, data: bytes) -> bytes:
        return data[self.start : self.end]


def spans(data: bytes) -> Node:
    node, end = _value(data, _skip(data, 0), 0)
    if _skip(data, end) != len(data):
        raise ValueError("trailing data after the JSON value")
    return node


def _skip(data: bytes, i: int) -> int:
    n = len(data)
    while i < n and data[i] in _WS:
        i += 1
    return i


def _value(data: bytes, i: int, depth: int) -> tuple[Node, int]:
    if i >= len(data):
        raise ValueError("unexpected end of JSON")
    if depth > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    c = data[i]
    if c == 0x7B:  # {
        return _object(data, i, depth + 1)
    if c == 0x5B:  # [
        return _array(data, i, depth + 1)
    if c == 0x22:  # "
        end = _string_end(data, i)
        return Node(i, end), end
    end = i
    while end < len(data) and data[end] not in b",]} \t\r\n":
        end += 1
    if end == i:
        raise ValueError(f"no value at byte {i}")
    return Node(i, end), end


def _string_end(data: bytes, i: int) -> int:
    j = i + 1
    n = len(data)
    while j < n:
        c = data[j]
        if c == 0x5C:  # backslash: skip the escaped byte
            j += 2
            continue
        if c == 0x22:
            return j + 1
        j += 1
    raise ValueError("unterminated string")


def _object(data: bytes, i: int, depth: int) -> tuple[Node, int]:
    node = Node(i, i)
    j = _skip(data, i + 1)
    if data[j : j + 1] == b"}":
        node.end = j + 1
        return node, j + 1
    while True:
        if data[j : j + 1] != b'"':
            raise ValueError(f"expected a key at byte {j}")
        key_end = _string_end(data, j)
        key = json.loads(data[j:key_end])
        j = _skip(data, key_end)
        if data[j : j + 1] != b":":
            raise ValueError(f"expected ':' at byte {j}")
        value, j = _value(data, _skip(data, j + 1), depth)
        if key in node.members:
            node.duplicate_keys.append(key)
        node.members[key] = value
        j = _skip(data, j)
        if data[j : j + 1] == b",":
            j = _skip(data, j + 1)
            continue
        if data[j : j + 1] == b"}":
            node.end = j + 1
            return node, j + 1
        raise ValueError(f"expected ',' or '}}' at byte {j}")


def _array(data: bytes, i: int, depth: int) -> tuple[Node, int]:
    node = Node(i, i)
    j = _skip(data, i + 1)
    if data[j : j + 1] == b"]":
        node.end = j + 1
        return node, j + 1
    while True:
        value, j = _value(data, j, depth)
        node.items.append(value)
        j = _skip(data, j)
        if data[j : j + 1] == b",":
            j = _skip(data, j + 1)
            continue
        if data[j : j + 1] == b"]":
            node.end = j + 1
            return node, j + 1
        raise ValueError(f"expected ',' or ']' at byte {j}")


def repeated_keys(node: Node) -> list[str]:
    """Every key an object anywhere under ``node`` names twice."""
    found: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.extend(current.duplicate_keys)
        stack.extend(current.members.values())
        stack.extend(current.items)
    return found


def top_level(data: bytes, stop_after: Collection[str] = ()) -> dict[str, bytes]:
    """The raw bytes of each member of the object ``data`` holds, as far as they can be read.

    Nested values are skipped by counting brackets, never by recursion, so any depth is read;
    reading stops, keeping what was found, where the text stops being an object's members, or
    once every key of ``stop_after`` (when given) was read."""
    found: dict[str, bytes] = {}
    j = _skip(data, 0)
    if data[j : j + 1] != b"{":
        return found
    j = _skip(data, j + 1)
    while data[j : j + 1] == b'"':
        try:
            key_end = _string_end(data, j)
            key = json.loads(data[j:key_end])
        except ValueError:
            return found
        j = _skip(data, key_end)
        if data[j : j + 1] != b":" or not isinstance(key, str):
            return found
        start = _skip(data, j + 1)
        end = _value_end(data, start)
        if end is None:
            return found
        found[key] = data[start:end]
        if stop_after and all(k in found for k in stop_after):
            return found
        j = _skip(data, end)
        if data[j : j + 1] != b",":
            return found
        j = _skip(data, j + 1)
    return found


def _value_end(data: bytes, i: int) -> int | None:
    """Where the value starting at ``i`` ends, brackets balanced; None when it does not."""
    n = len(data)
    depth = 0
    start = i
    while i < n:
        c = data[i]
        if c == 0x22:  # "
            try:
                i = _string_end(data, i)
            except ValueError:
                return None
        elif c in b"[{":
            depth += 1
            i += 1
        elif c in b"]}":
            if depth == 0:
                break  # the end of the enclosing object: a scalar ended here
            depth -= 1
            i += 1
        elif depth == 0 and c in b", \t\r\n":
            break
        else:
            i += 1
        if depth == 0 and data[start] in b'[{"':
            return i
    return i if depth == 0 and i > start else None


def top_level_tail(data: bytes) -> dict[str, bytes]:
    """The raw bytes of the members that end the object ``data`` ends (its last bytes), read
    backward from its closing brace while their values are strings, numbers, true, false or
    null; a nested value, or text that does not read so, ends the reading. ``data`` may start
    anywhere in the text; a key written twice keeps its last value."""
    found: dict[str, bytes] = {}
    j = _skip_back(data, len(data))
    if data[j - 1 : j] != b"}":
        return found
    j -= 1
    while True:
        end = _skip_back(data, j)
        if data[end - 1 : end] == b'"':
            start = _string_start(data, end - 1)
        else:
            start = end
            while start > 0 and data[start - 1] not in _WS + b',:[]{}"':
                start -= 1
        if start is None or start == end:
            return found
        colon = _skip_back(data, start)
        key_end = _skip_back(data, colon - 1)
        if data[colon - 1 : colon] != b":" or data[key_end - 1 : key_end] != b'"':
            return found
        key_start = _string_start(data, key_end - 1)
        if key_start is None:
            return found
        try:
            key = json.loads(data[key_start:key_end])
        except ValueError:
            return found
        found.setdefault(key, data[start:end])
        j = _skip_back(data, key_start) - 1
        if data[j : j + 1] != b",":
            return found


def _skip_back(data: bytes, i: int) -> int:
    """Where the white space ending at ``i`` starts."""
    while i > 0 and data[i - 1] in _WS:
        i -= 1
    return i


def _string_start(data: bytes, close: int) -> int | None:
    """The opening quote of the string whose closing quote is at ``close``: the first quote
    before it not escaped (an even number of backslashes before it)."""
    i = close - 1
    while i >= 0:
        if data[i] == 0x22:
            k = i
            while k > 0 and data[k - 1] == 0x5C:
                k -= 1
            if (i - k) % 2 == 0:
                return i
        i -= 1
    return None


# A string (to its closing quote, or the end of the text), or a bracket.
_STRING_OR_BRACKET = re.compile(rb'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.DOTALL)


def deeper_than(data: bytes, levels: int) -> bool:
    """Whether ``data`` nests more than ``levels`` arrays and objects deep: its brackets outside
    strings counted, whatever else the text holds (a string runs to its closing quote or the
    text's end)."""
    if data.count(b"[") + data.count(b"{") <= levels:
        return False  # too few brackets to nest deeper: no need to look
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(data):
        c = data[token.start()]
        if c in b"[{":
            depth += 1
            if depth > levels:
                return True
        elif c in b"]}":
            depth -= 1
    return False
