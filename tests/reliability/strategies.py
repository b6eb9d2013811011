"""Hypothesis strategies and settings for the bad-input suites (tests/reliability/test_bad_input_*).

Determinism: every suite runs under the ``bad-input`` profile below, applied per test with
``examples(n)`` rather than loaded globally (loading it would change the other suites' Hypothesis
tests too). It derandomizes (each test's examples follow from the test's name, the same on every
machine and run), keeps no example database, and has no deadline: a single example may start a
subprocess or commit to SQLite with a full sync, whose time a loaded CI machine does not bound;
the suites bound their time by the number of examples instead. No health check is suppressed.

``SIGNOFF_FUZZ_SCALE=N`` multiplies every suite's number of examples, for a longer hunt by hand
(``SIGNOFF_FUZZ_SCALE=20 .venv/bin/pytest tests/reliability/test_bad_input_*.py``); CI leaves it
unset.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

settings.register_profile("bad-input", derandomize=True, database=None, deadline=None)
SCALE = max(1, int(os.environ.get("SIGNOFF_FUZZ_SCALE", "1")))


def examples(n: int) -> settings:
    """The bad-input profile with ``n`` examples (times ``SIGNOFF_FUZZ_SCALE``)."""
    return settings(settings.get_profile("bad-input"), max_examples=n * SCALE)


class Raw(bytes):
    """Bytes that print short: Hypothesis prints each example, and a repr of megabytes is slow
    (and warns, which the test run turns into an error)."""

    def __repr__(self) -> str:
        if len(self) <= 160:
            return super().__repr__()
        return f"<{len(self)} bytes: {bytes(self[:100])!r}…{bytes(self[-40:])!r}>"


# --- JSON values and texts ------------------------------------------------------------------

SAFE = 2**53 - 1
EDGE_NUMBERS = [
    "0", "-0", "1.0", "1e400", "-1e400", "1e-400", "9007199254740991", "9007199254740992",
    "9007199254740993", "-9007199254740993", "18446744073709551616", "1" * 40, "1" * 5000,
    "0.1000000000000000055511151231257827", "1e21", "1E+2", "2.5e-3", "NaN", "Infinity",
    "-Infinity", "01", "1.", ".5", "+1", "0x10",
]  # fmt: skip
TRICKY_STRINGS = [
    "", "\u202eevil", "a\u200bb", "\x00", "\x1b[31m", "\ufeff", "é", "e\u0301", "\U0001f600",
    "\u2028", "\\", '"', "\t\n\r", "\U0001d41a\U0001d41d\U0001d426\U0001d422\U0001d427",
    "\u0430dmin",  # bold "admin", then "admin" with a Cyrillic a
]  # fmt: skip
# Raw string literals (the text between the quotes) no encoder writes: lone surrogates,
# surrogate pairs written as escapes, escapes that are not JSON.
TRICKY_ESCAPES = [
    "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\ud83d", "x\\udfffy", "\\u0000", "\\x41", "\\u12",
    "\\", "\\uD800\\uD800",
]  # fmt: skip

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20) | st.sampled_from(
    TRICKY_STRINGS
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-SAFE, SAFE)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)


@st.composite
def raw_json(draw: st.DrawFn, *, value: Any = None) -> bytes:
    """A JSON-looking text in bytes: a generated value written several ways, then perhaps
    spoiled: a raw number or string no encoder writes, a key twice, deep nesting, a cut, bytes
    that are not UTF-8."""
    v = draw(json_values) if value is None else value
    indent = draw(st.sampled_from([None, 0, 2]))
    data = json.dumps(v, indent=indent, ensure_ascii=draw(st.booleans())).encode()
    tricks = draw(st.lists(st.sampled_from(TRICKS), max_size=3))
    for trick in tricks:
        data = trick(draw, data)
    return Raw(data)


def _with_number(draw: st.DrawFn, data: bytes) -> bytes:
    return b'{"n":' + draw(st.sampled_from(EDGE_NUMBERS)).encode() + b',"v":' + data + b"}"


def _with_escape(draw: st.DrawFn, data: bytes) -> bytes:
    return b'{"s":"' + draw(st.sampled_from(TRICKY_ESCAPES)).encode() + b'","v":' + data + b"}"


def _key_twice(draw: st.DrawFn, data: bytes) -> bytes:
    return b'{"k":' + data + b',"k":' + draw(st.sampled_from([b"1", b"null", data])) + b"}"


def _deep(draw: st.DrawFn, data: bytes) -> bytes:
    depth = draw(st.sampled_from([64, 129, 201, 999, 5000, 100_000]))
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    return opener * depth + data + closer * depth


def _cut(draw: st.DrawFn, data: bytes) -> bytes:
    return data[: draw(st.integers(0, max(0, len(data) - 1)))]


def _not_utf8(draw: st.DrawFn, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    bad = draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]))
    return data[:at] + bad + data[at:]


def _spliced(draw: st.DrawFn, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.binary(max_size=8)) + data[at:]


TRICKS = [_with_number, _with_escape, _key_twice, _deep, _cut, _not_utf8, _spliced]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """One of ``seeds`` with a few bytes changed, inserted, deleted or repeated."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "repeat"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 16))]
    return Raw(data)


def key_paths(value: Any, prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    """Every path into ``value`` (object keys and array indexes) with the value found there."""
    found: dict[tuple[Any, ...], Any] = {prefix: value}
    stack: list[tuple[tuple[Any, ...], Any]] = [(prefix, value)]
    while stack:
        path, current = stack.pop()
        children = (
            current.items()
            if isinstance(current, dict)
            else enumerate(current)
            if isinstance(current, list)
            else ()
        )
        for key, child in children:
            found[(*path, key)] = child
            stack.append(((*path, key), child))
    return found
