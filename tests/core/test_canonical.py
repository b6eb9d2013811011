"""Canonical JSON: RFC 8785 output, and a parser that returns the exact value or refuses."""

from __future__ import annotations

import json
import math

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from core import canonical
from core.errors import (
    DuplicateKey,
    ImpreciseNumber,
    IntegerOutOfRange,
    InvalidUTF8,
    JSONRefused,
    LoneSurrogate,
    MalformedJSON,
    NonFiniteNumber,
    NotJSON,
)

SAFE = canonical.MAX_SAFE_INTEGER
text = st.text(st.characters(exclude_categories=["Cs"]))  # no surrogates: they have no UTF-8
# Doubles RFC 8785 would write as integers beyond the safe range are refused (tested below).
doubles = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (SAFE < abs(f) < 1e21 and f.is_integer())
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | doubles | text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)


def test_output_is_rfc8785_sorted_compact_utf8() -> None:
    value = {"b": [1, 2.5, "é\n"], "a": None, "\u20ac": True, "\U0001f600": 1e21}
    assert canonical.dumps(value) == (
        '{"a":null,"b":[1,2.5,"é\\n"],"\u20ac":true,"\U0001f600":1e+21}'.encode()
    )


@given(json_values)
def test_loads_of_dumps_is_the_same_value(value: object) -> None:
    again = canonical.loads(canonical.dumps(value))
    assert again == value
    assert canonical.dumps(again) == canonical.dumps(value)


@given(st.dictionaries(text, json_values, max_size=8), st.randoms())
def test_key_order_does_not_change_the_canonical_form(obj: dict[str, object], rnd) -> None:
    items = list(obj.items())
    rnd.shuffle(items)
    shuffled_text = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in items) + "}"
    assert canonical.dumps(canonical.loads(shuffled_text)) == canonical.dumps(obj)


@given(json_values)
def test_any_spacing_and_escaping_of_the_same_value_canonicalises_alike(value: object) -> None:
    loose = json.dumps(value, indent=2, ensure_ascii=True)
    assert canonical.dumps(canonical.loads(loose)) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "doc",
    ['{"a":1,"a":2}', '{"x":{"k":1,"k":1}}', '[{"a":1},{"b":2,"b":3}]', '{"é":1,"\\u00e9":2}'],
)
@pytest.mark.guarantee("G-JSON-1")
def test_duplicate_keys_are_refused(doc: str) -> None:
    with pytest.raises(DuplicateKey):
        canonical.loads(doc)


@pytest.mark.parametrize(
    "doc",
    [
        "9007199254740992",
        "-9007199254740992",
        '{"n":9007199254740993}',
        "[1e0, 123456789012345678]",
    ],
)
@pytest.mark.guarantee("G-JSON-1")
def test_integers_outside_the_safe_range_are_refused(doc: str) -> None:
    with pytest.raises(IntegerOutOfRange):
        canonical.loads(doc)


def test_the_largest_safe_integers_are_kept_exactly() -> None:
    assert canonical.loads(f"[{SAFE},{-SAFE}]") == [SAFE, -SAFE]


@pytest.mark.parametrize("doc", ["NaN", "[Infinity]", '{"x":-Infinity}', "1e400", "-1e999"])
@pytest.mark.guarantee("G-JSON-1")
def test_non_finite_numbers_are_refused(doc: str) -> None:
    with pytest.raises(NonFiniteNumber):
        canonical.loads(doc)


@pytest.mark.parametrize(
    "doc", ["0.10000000000000001", "1.00000000000000000001", "9007199254740993.0"]
)
@pytest.mark.guarantee("G-JSON-1")
def test_numbers_a_double_cannot_hold_as_written_are_refused(doc: str) -> None:
    with pytest.raises(ImpreciseNumber):
        canonical.loads(doc)


@pytest.mark.parametrize(
    ("doc", "value"),
    [("0.1", 0.1), ("1.0", 1.0), ("1.5e3", 1500.0), ("-0.0", -0.0), ("1E-7", 1e-7)],
)
def test_numbers_a_double_holds_exactly_are_kept(doc: str, value: float) -> None:
    assert canonical.loads(doc) == value


@pytest.mark.parametrize(
    "doc", ['"\\ud800"', '["ok","\\udc00x"]', '{"\\ud83d":1}', '{"k":["\\uDFFF"]}']
)
@pytest.mark.guarantee("G-JSON-1")
def test_escaped_lone_surrogates_are_refused(doc: str) -> None:
    with pytest.raises(LoneSurrogate):
        canonical.loads(doc)
    with pytest.raises(LoneSurrogate):
        canonical.loads(doc.encode())


def test_a_surrogate_pair_is_one_character_and_kept() -> None:
    assert canonical.loads('"\\ud83d\\ude00"') == "\U0001f600"


def test_a_raw_lone_surrogate_in_text_is_refused() -> None:
    with pytest.raises(LoneSurrogate):
        canonical.loads('"\ud800"')


@pytest.mark.parametrize("data", [b'"\xff"', b'{"a":"\xc3"}', b"\xef\xbb\xbf{}", b'"\xed\xa0\x80"'])
@pytest.mark.guarantee("G-JSON-1")
def test_invalid_utf8_is_refused(data: bytes) -> None:
    with pytest.raises((InvalidUTF8, MalformedJSON)) as info:
        canonical.loads(data)
    if not data.startswith(b"\xef\xbb\xbf"):
        assert info.type is InvalidUTF8


@pytest.mark.parametrize("doc", ["", "{", "[1,]", "{'a':1}", "01", "[1] [2]", "tru"])
def test_malformed_json_is_refused(doc: str) -> None:
    with pytest.raises(MalformedJSON):
        canonical.loads(doc)


def test_absurd_nesting_is_refused_not_crashed() -> None:
    with pytest.raises(MalformedJSON):
        canonical.loads("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2**53, IntegerOutOfRange),
        (math.nan, NonFiniteNumber),
        (math.inf, NonFiniteNumber),
        ("\ud800", LoneSurrogate),
        ({"k": {1, 2}}, NotJSON),
        ({1: "non-string key"}, NotJSON),
        (b"bytes", NotJSON),
    ],
)
@pytest.mark.guarantee("G-JSON-1")
def test_dumps_refuses_what_has_no_exact_canonical_form(value: object, error: type) -> None:
    with pytest.raises(error):
        canonical.dumps(value)


def test_every_refusal_is_a_json_refused_and_a_value_error() -> None:
    for error in (DuplicateKey, IntegerOutOfRange, NonFiniteNumber, LoneSurrogate, InvalidUTF8):
        assert issubclass(error, JSONRefused)
        assert issubclass(error, ValueError)


@given(st.text(st.characters(exclude_categories=["Cs"])))
def test_every_string_round_trips(s: str) -> None:
    assert canonical.loads(canonical.dumps(s)) == s


@pytest.mark.parametrize("doc", ["1e20", "9007199254740992.0", "-1.5e17", "[1e16]"])
def test_integral_numbers_written_back_as_unsafe_integers_are_refused(doc: str) -> None:
    with pytest.raises(IntegerOutOfRange):
        canonical.loads(doc)


@pytest.mark.parametrize("value", [1e20, -9007199254740992.0, [1e16]])
def test_dumps_refuses_floats_it_would_write_as_unsafe_integers(value: object) -> None:
    with pytest.raises(IntegerOutOfRange):
        canonical.dumps(value)


def test_large_numbers_written_with_an_exponent_are_kept() -> None:
    assert canonical.dumps(canonical.loads("1e21")) == b"1e+21"
    assert canonical.loads("1e300") == 1e300


@given(st.floats())
def test_every_double_either_round_trips_or_is_refused(f: float) -> None:
    try:
        encoded = canonical.dumps(f)
    except JSONRefused:
        return
    assert canonical.loads(encoded) == f


non_bmp_text = st.text(st.characters(min_codepoint=0xE000, exclude_categories=["Cs"]), max_size=4)
wide_values = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | doubles | text | non_bmp_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(text | non_bmp_text, children, max_size=4)
    ),
    max_leaves=25,
)


@given(wide_values)
def test_the_fast_path_writes_exactly_what_rfc8785_writes(value: object) -> None:
    assert canonical.dumps(value) == rfc8785.dumps(value)


def test_keys_beyond_the_bmp_sort_by_utf16_as_rfc8785_says() -> None:
    value = {"\U0001f600": 1, "\ufb01": 2}  # code point order and UTF-16 order disagree
    assert canonical.dumps(value) == rfc8785.dumps(value)
    assert canonical.dumps(value).decode().index("\U0001f600") < canonical.dumps(
        value
    ).decode().index("\ufb01")


def test_a_circular_value_is_refused_not_looped_on() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(NotJSON):
        canonical.dumps(loop)
    shared = [1]
    assert canonical.dumps({"a": shared, "b": shared}) == b'{"a":[1],"b":[1]}'
