"""Canonical JSON (RFC 8785) for everything Signoff hashes, and a parser that loses nothing.

Rules:

1. Whatever is hashed is first written in its RFC 8785 form (``dumps``): keys sorted by their
   UTF-16 code units, no white space, numbers in their shortest ECMAScript form, strings with
   the minimal escapes, UTF-8.
2. JSON that will be hashed is parsed by ``loads``, which returns exactly what the text says or
   raises a named ``JSONRefused``; it never substitutes a value:
   - invalid UTF-8                         -> ``InvalidUTF8``
   - not JSON                              -> ``MalformedJSON``
   - nested deeper than the runtime reads  -> ``NestedTooDeeply`` (a ``MalformedJSON``)
   - an object naming a key twice          -> ``DuplicateKey``
   - an integer outside ±(2^53-1)          -> ``IntegerOutOfRange``
   - NaN, Infinity, or a number overflowing a double -> ``NonFiniteNumber``
   - a number a double cannot hold exactly as written (``0.10000000000000001``)
                                           -> ``ImpreciseNumber``
   - a string holding a lone surrogate     -> ``LoneSurrogate``
3. An integral number from 2^53 up to 10^21 has its canonical form written as an integer, which
   rule 2 refuses on reading; such a number is refused by both (``IntegerOutOfRange``).
4. Hence ``loads(dumps(v)) == v`` for every value ``dumps`` accepts, and ``dumps(loads(t))``
   names the same value ``t`` names.
5. A value parsed once is carried as a ``Canonical``: the value and its RFC 8785 text, made
   together, so no layer that receives it parses or writes it again. Its value is shared:
   whoever holds one reads it and never changes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

import rfc8785

from core.errors import (
    DuplicateKey,
    ImpreciseNumber,
    IntegerOutOfRange,
    InvalidUTF8,
    LoneSurrogate,
    MalformedJSON,
    NestedTooDeeply,
    NonFiniteNumber,
    NotJSON,
)

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"

MAX_SAFE_INTEGER = 2**53 - 1

_SURROGATE = re.compile("[\ud800-\udfff]")
# A \uD800-\uDFFF escape in the text; only then can a parsed string hold a lone surrogate.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def dumps(value: Any) -> bytes:
    """The RFC 8785 form of ``value`` as UTF-8 bytes, or a named ``JSONRefused``."""
    if _plain(value):
        # No floats, only safe integers, keys in the Basic Multilingual Plane: the C encoder
        # writes exactly RFC 8785 (code point order is UTF-16 order within the BMP, and its
        # string escapes are RFC 8785's). Proven equal to rfc8785.dumps by the tests.
        try:
            return _PLAIN.encode(value).encode("utf-8")
        except UnicodeEncodeError:
            raise LoneSurrogate("a string holds a lone UTF-16 surrogate") from None
        except (RecursionError, ValueError):
            raise NotJSON("the value is nested too deeply to canonicalise") from None
    _refuse_numbers_out_of_range(value)
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError as e:
        raise IntegerOutOfRange(f"{e}; send it as a string") from None
    except rfc8785.FloatDomainError as e:
        raise NonFiniteNumber(str(e)) from None
    except rfc8785.CanonicalizationError as e:
        if isinstance(e.__cause__, UnicodeEncodeError):
            raise LoneSurrogate("a string holds a lone UTF-16 surrogate") from None
        raise NotJSON(str(e)) from None
    except RecursionError:
        raise NotJSON("the value is nested too deeply to canonicalise") from None


_PLAIN = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"), check_circular=True
)
_NON_BMP = re.compile("[\U00010000-\U0010ffff]")


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON the C encoder writes exactly as RFC 8785 does."""
    stack = [value]
    pop, extend = stack.pop, stack.extend  # on every call of the gate: kept lean
    seen: set[int] = set()
    while stack:
        v = pop()
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is int:
            if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                continue
            return False
        if t is not dict and t is not list:
            return False  # floats, tuples, subclasses, anything else: the reference encoder
        if id(v) in seen:
            return False  # shared or circular: the reference encoder decides
        seen.add(id(v))
        if t is dict:
            for k in v:
                if type(k) is not str or (not k.isascii() and _NON_BMP.search(k)):
                    return False
            extend(v.values())
        else:
            extend(v)
    return True


@dataclass(frozen=True)
class Canonical:
    """One exact JSON value and its RFC 8785 text, made together (rule 5)."""

    value: JSONValue
    text: str
    source: str = ""  # the text it was parsed from

    @classmethod
    def parse(cls, data: bytes | str) -> Canonical:
        """``loads`` then ``dumps``, once: the exact value or a named ``JSONRefused``."""
        value = loads(data)
        source = data if isinstance(data, str) else data.decode("utf-8", "surrogatepass")
        return cls(value, dumps_text(value), source)

    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def dumps_text(value: Any) -> str:
    """``dumps`` as a ``str``, for storing in a TEXT column."""
    return dumps(value).decode("utf-8")


def sha256_hex(value: Any) -> str:
    """SHA-256 over the canonical form of ``value``, in lowercase hex."""
    return hashlib.sha256(dumps(value)).hexdigest()


def loads(data: bytes | str) -> JSONValue:
    """Parse JSON that will be hashed: the exact value, or a named ``JSONRefused``."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidUTF8(f"not valid UTF-8 at byte {e.start}") from None
    else:
        text = data
        if _SURROGATE.search(text):
            raise LoneSurrogate("the text holds a lone UTF-16 surrogate")
    try:
        value: JSONValue = json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_int=_exact_int,
            parse_float=_exact_float,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as e:
        raise MalformedJSON(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise NestedTooDeeply("not JSON this runtime can read: nested too deeply") from None
    if _ESCAPED_SURROGATE.search(text):
        _refuse_lone_surrogates(value)
    return value


def _object_without_duplicates(pairs: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def _exact_int(text: str) -> int:
    # JSON writes no leading zeros: past 16 digits an integer is out of range, and past 4300
    # Python refuses to convert it at all (a plain ValueError), so the length decides first.
    if (
        len(text.lstrip("-")) > _SAFE_DIGITS
        or not -MAX_SAFE_INTEGER <= int(text) <= MAX_SAFE_INTEGER
    ):
        raise IntegerOutOfRange(
            f"{_shown(text)} is outside ±(2^53-1) and would change value in other readers;"
            " send it as a string"
        )
    return int(text)


def _exact_float(text: str) -> float:
    f = float(text)
    if not math.isfinite(f):
        raise NonFiniteNumber(f"{_shown(text)} overflows a double")
    # Accepted only if writing it back (shortest round-trip form) names the same number.
    if Decimal(text) != Decimal(repr(f)):
        raise ImpreciseNumber(
            f"{_shown(text)} cannot be held exactly; it would be read as {f!r}; send it as a string"
        )
    if _written_as_big_integer(f):
        raise IntegerOutOfRange(
            f"{_shown(text)} would be written as an integer outside ±(2^53-1); send it as a string"
        )
    return f


_SAFE_DIGITS = len(str(MAX_SAFE_INTEGER))


def _shown(number: str) -> str:
    """A number as a message shows it: whole, or its start and its length."""
    return number if len(number) <= 40 else f"{number[:24]}… ({len(number)} characters)"


# RFC 8785 writes a double in plain digits below 1e21; an integral one past 2^53 then reads
# as an integer beyond the safe range.
_PLAIN_DIGITS_LIMIT = 1e21


def _written_as_big_integer(f: float) -> bool:
    return MAX_SAFE_INTEGER < abs(f) < _PLAIN_DIGITS_LIMIT and f.is_integer()


def _refuse_numbers_out_of_range(value: Any) -> None:
    stack = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple | dict):
            if id(v) in seen:
                continue  # visited (shared, or circular: rfc8785 then refuses it)
            seen.add(id(v))
        if isinstance(v, float):
            if _written_as_big_integer(v):
                raise IntegerOutOfRange(
                    f"{v!r} would be written as an integer outside ±(2^53-1); send it as a string"
                )
        elif isinstance(v, int) and not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            # Refused here, not by rfc8785, whose message converts the integer to text: past
            # 4300 digits that conversion itself fails with a plain ValueError.
            shown = _shown(str(v)) if v.bit_length() <= 14_000 else f"{v.bit_length()} bits"
            raise IntegerOutOfRange(
                f"{shown} is outside ±(2^53-1) and would change value in other readers;"
                " send it as a string"
            )
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())


def _refuse_constant(text: str) -> None:
    raise NonFiniteNumber(f"{text} is not a JSON number")


def _refuse_lone_surrogates(value: JSONValue) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                raise LoneSurrogate("a string holds a lone UTF-16 surrogate escape")
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
