"""Bad input in a server's tools/list (core/proxy/pins.py read_listing, evaluate,
rewrite_schema; core/tools.py compile_schema): each trick ends in a named refusal of the
listing (ListingRefused), a dropped tool with its reason, or a tool the operator's
configuration leaves unavailable with its reason (SchemaRefused); the good tools of the same
listing stay, pinned over their exact bytes, and every tool that stays can be compiled by the
gate and checked against any arguments without an exception.

Listings are written as raw bytes, so that a key twice, an escape no encoder writes or a number
no double holds reaches the parser as a server would send it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from core.errors import ListingRefused, SchemaRefused
from core.proxy.config import ToolConfig
from core.proxy.pins import (
    MAX_LISTING_BYTES,
    MAX_TOOLS,
    evaluate,
    pinned_text,
    read_listing,
    rewrite_schema,
)
from core.proxy.rawjson import MAX_DEPTH
from core.tools import CompiledTool, SideEffect, Tool, compile_schema
from tests.reliability.strategies import Raw, examples, json_values

# What happens to a tool: "dropped" from the listing, kept but "unavailable" under any
# configuration, "available" once pinned and classified, or "kept" (either of the last two).
DROPPED, UNAVAILABLE, AVAILABLE, KEPT = "dropped", "unavailable", "available", "kept"


@dataclass(frozen=True)
class Entry:
    raw: bytes  # the tool's text in the listing
    fate: str
    name: bytes = b""  # the raw parts the pin is taken over, for good tools
    description: bytes | None = None
    schema: bytes = b""

    def __repr__(self) -> str:
        return f"Entry({self.fate}, {Raw(self.raw)!r})"


def tool(
    name: bytes, schema: bytes, description: bytes | None = b'"d"', extra: bytes = b""
) -> bytes:
    desc = b"" if description is None else b',"description":' + description
    return b'{"name":' + name + desc + b',"inputSchema":' + schema + extra + b"}"


def with_property(schema: bytes) -> bytes:
    return b'{"type":"object","properties":{"a":' + schema + b"}}"


# --- good tools -----------------------------------------------------------------------------

property_schemas = st.sampled_from([
    b'{"type":"string"}', b'{"type":"integer","minimum":0}', b'{"type":"number"}',
    b'{"type":"array","items":{"type":"string"},"maxItems":3}', b'{"type":"boolean"}',
    b'{"enum":["a","b",null]}', b'{"type":"string","pattern":"^[a-z]+$"}',
    b'{"type":["string","null"]}', b'{"type":"object","additionalProperties":false}',
])  # fmt: skip


@st.composite
def good_tool(draw: st.DrawFn, index: int) -> Entry:
    props = draw(st.lists(property_schemas, max_size=3))
    body = b",".join(b'"p%d":%s' % (i, p) for i, p in enumerate(props))
    required = b',"required":["p0"]' if props and draw(st.booleans()) else b""
    defs = draw(st.booleans())
    schema = (
        b'{"type":"object","properties":{' + body + (b',"r":{"$ref":"#/$defs/s"}' if defs and
        props else b"") + b"}" + required + (b',"$defs":{"s":{"type":"string"}}' if defs else b"")
        + b"}"
    )  # fmt: skip
    description = draw(st.sampled_from([b'"Reads a note"', b'"\\u00e9t\\u00e9 \\ud83d\\ude00"',
                                        b'""', None, b'"line\\nbreak"']))  # fmt: skip
    name = b'"good-%d"' % index
    return Entry(tool(name, schema, description), AVAILABLE, name, description, schema)


# --- tricks, one tool each ------------------------------------------------------------------

OUTSIDE_REFS = [
    b'"http://evil.example/s.json"', b'"https://evil.example/s#/a"', b'"file:///etc/passwd"',
    b'"other.json#/a"', b'"//evil.example/x"', b'"urn:uuid:1"', b'"#/$defs/missing"', b'"#nope"',
    b'"#/properties/a/$ref"', b'"#/type"', b"5", b"null", b'"#/%ZZ"',
]  # fmt: skip
HIDDEN = [b"\\u202e", b"\\u200b", b"\\u0000", b"\\u001b", b"\\u2028", b"\\ufeff", b"\\ud800",
          b"\\udc00x", b"\\u00ad"]  # fmt: skip


@st.composite
def trick(draw: st.DrawFn, index: int) -> Entry:
    name = b'"bad-%d"' % index
    kind = draw(st.sampled_from(sorted(TRICKS)))
    event(f"trick: {kind}")
    return TRICKS[kind](draw, name)


def _outside_ref(draw: st.DrawFn, name: bytes) -> Entry:
    ref = draw(st.sampled_from(OUTSIDE_REFS))
    key = draw(st.sampled_from([b"$ref", b"$dynamicRef"]))
    schema = with_property(b'{"' + key + b'":' + ref + b"}")
    if draw(st.booleans()):  # a base elsewhere, so that even "#..." points out
        schema = b'{"$id":"http://evil.example/root.json",' + schema[1:]
    return Entry(tool(name, schema), UNAVAILABLE)


def _ref_loop(draw: st.DrawFn, name: bytes) -> Entry:
    schema = draw(st.sampled_from([
        b'{"$ref":"#"}', b'{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},'
        b'"$ref":"#/$defs/a"}', b'{"type":"object","properties":{"a":{"$ref":"#/properties/a"}}}',
    ]))  # fmt: skip
    return Entry(tool(name, schema), KEPT)  # compiles; its calls fail closed (checked below)


def _huge_enum(draw: st.DrawFn, name: bytes) -> Entry:
    n = draw(st.sampled_from([1000, 50_000]))
    values = b",".join(b'"v%d"' % i for i in range(n))
    return Entry(tool(name, with_property(b'{"enum":[' + values + b"]}")), AVAILABLE)


def _key_twice(draw: st.DrawFn, name: bytes) -> Entry:
    raw = draw(st.sampled_from([
        tool(name, b'{"type":"object","type":"string"}'),
        tool(name, with_property(b'{"type":"string","type":"integer"}')),
        b'{"name":' + name + b',"name":"other","inputSchema":{"type":"object"}}',
        tool(name, b'{"type":"object"}', extra=b',"inputSchema":{"type":"object"}'),
        tool(name, b'{"type":"object","properties":{"\\u0061":{},"a":{}}}'),
    ]))  # fmt: skip
    return Entry(raw, DROPPED)


def _deep(draw: st.DrawFn, name: bytes) -> Entry:
    depth = draw(st.sampled_from([10, 100, MAX_DEPTH - 6]))  # within the page's bound
    nested = b"[" * depth + b"]" * depth
    return Entry(tool(name, b'{"type":"object","default":' + nested + b"}"), KEPT)


def _not_an_object_schema(draw: st.DrawFn, name: bytes) -> Entry:
    schema = draw(st.sampled_from([b"true", b"false", b"[]", b'"object"', b"1", b"null"]))
    return Entry(tool(name, schema), DROPPED)


def _name_not_a_string(draw: st.DrawFn, name: bytes) -> Entry:
    other = draw(st.sampled_from([b"1", b"null", b"[]", b"{}", b"true", b'""']))
    raw = draw(st.sampled_from([tool(other, b'{"type":"object"}'), b'{"inputSchema":{}}', other]))
    return Entry(raw, DROPPED)


def _huge_description(draw: st.DrawFn, name: bytes) -> Entry:
    size = draw(st.sampled_from([10_000, 1_000_000]))
    return Entry(tool(name, b'{"type":"object"}', b'"' + b"x" * size + b'"'), AVAILABLE)


def _hidden_in_name(draw: st.DrawFn, name: bytes) -> Entry:
    hidden = draw(st.sampled_from(HIDDEN))
    return Entry(tool(name[:-1] + hidden + b'"', b'{"type":"object"}'), DROPPED)


def _lookalike_name(draw: st.DrawFn, name: bytes) -> Entry:
    # Visible, distinct names: kept as the names they are (a pin review shows them).
    look = draw(st.sampled_from([b"\\u0430", b"e\\u0301", b"\\u00e9", b"\\ud835\\udc1a"]))
    return Entry(tool(name[:-1] + look + b'"', b'{"type":"object"}'), AVAILABLE)


def _surrogate_kept_text(draw: st.DrawFn, name: bytes) -> Entry:
    raw = draw(st.sampled_from([
        tool(name, b'{"type":"object"}', b'"read \\ud800 notes"'),
        tool(name, b'{"type":"object"}', extra=b',"annotations":{"title":"\\udfff"}'),
    ]))  # fmt: skip
    return Entry(raw, DROPPED)


def _surrogate_in_schema(draw: st.DrawFn, name: bytes) -> Entry:
    return Entry(tool(name, with_property(b'{"const":"\\ud800"}')), UNAVAILABLE)


def _bad_hint(draw: st.DrawFn, name: bytes) -> Entry:
    hint = draw(st.sampled_from([b'"yes"', b"1", b"null", b"[]", b"0"]))
    return Entry(tool(name, b"{}", extra=b',"annotations":{"readOnlyHint":' + hint + b"}"), DROPPED)


def _inexact_number(draw: st.DrawFn, name: bytes) -> Entry:
    # An integer a double cannot hold, or one overflowing it, changes in any IEEE-754 reader:
    # refused. More decimals than a double holds name the double every such reader reads (the
    # pin keeps the digits as sent): kept.
    number, fate = draw(st.sampled_from([(b"9007199254740993", UNAVAILABLE),
                                         (b"1e400", UNAVAILABLE), (b"-1e400", UNAVAILABLE),
                                         (b"0.1000000000000000055511", AVAILABLE)]))  # fmt: skip
    return Entry(tool(name, with_property(b'{"type":"number","maximum":' + number + b"}")), fate)


def _not_a_schema(draw: st.DrawFn, name: bytes) -> Entry:
    schema = draw(st.sampled_from([
        with_property(b'{"type":"string","pattern":"("}'), b'{"type":"objekt"}',
        b'{"required":[5]}', b'{"$schema":5}', b'{"$schema":"http://unknown.example/schema"}',
        with_property(b'{"minimum":"0"}'), b'{"properties":[]}', b'{"$id":5}',
    ]))  # fmt: skip
    return Entry(tool(name, schema), UNAVAILABLE)


def _no_schema(draw: st.DrawFn, name: bytes) -> Entry:
    return Entry(b'{"name":' + name + b',"description":"d"}', DROPPED)


TRICKS = {
    "outside ref": _outside_ref, "ref loop": _ref_loop, "huge enum": _huge_enum,
    "key twice": _key_twice, "deep": _deep, "schema not an object": _not_an_object_schema,
    "name not a string": _name_not_a_string, "huge description": _huge_description,
    "hidden character in name": _hidden_in_name, "lookalike name": _lookalike_name,
    "lone surrogate in description": _surrogate_kept_text,
    "lone surrogate in schema": _surrogate_in_schema, "hint not a boolean": _bad_hint,
    "inexact number": _inexact_number, "not a schema": _not_a_schema, "no schema": _no_schema,
}  # fmt: skip


def page(tools: list[bytes]) -> bytes:
    return b'{"jsonrpc":"2.0","id":2,"result":{"tools":[' + b",".join(tools) + b"]}}"


arguments = st.dictionaries(st.sampled_from(["a", "p0", "p1", "r", "x"]), json_values, max_size=3)


def entry_of(name: str, entries: list[Entry]) -> Entry:
    """The entry a listed tool came from, by the index in its name (``good-3``, ``bad-3…``)."""
    found = re.match(r"(?:good|bad)-(\d+)", name)
    assert found is not None, name
    return entries[int(found.group(1))]


@examples(150)
@given(st.data())
def test_each_trick_is_refused_by_name_and_the_good_tools_stay(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 6), label="tools")
    entries = [
        data.draw(st.one_of(good_tool(i), trick(i)), label=f"tool {i}") for i in range(count)
    ]
    listing = read_listing([page([e.raw for e in entries])])

    by_name = {t.name: t for t in listing.tools}
    for entry in entries:
        if entry.name:  # a good tool: listed, pinned over the bytes it was sent as
            listed = by_name[json.loads(entry.name)]
            text = pinned_text(entry.name, entry.description, entry.schema)
            assert listed.raw == text
            assert listed.pin == hashlib.sha256(text).hexdigest()
    dropped = [e for e in entries if e.fate == DROPPED]
    for _ in dropped:
        event("tool dropped")
    assert len(listing.dropped) == len(dropped), listing.dropped
    assert len(listing.tools) == count - len(dropped)
    assert all(why for _, why in listing.dropped)

    for listed in listing.tools:
        fate = entry_of(listed.name, entries).fate
        assert fate != DROPPED, listed.name
        state = evaluate(listed, ToolConfig(side_effect=SideEffect.READ_ONLY, pin=listed.pin))
        event("tool available" if state.available else "tool unavailable")
        assert state.available == (state.reason == "")
        assert state.available == (fate == AVAILABLE) or fate == KEPT, (listed.name, state.reason)
        if not state.available:
            continue
        # What the proxy does at start with every available tool: the gate compiles it.
        compiled = CompiledTool(Tool(listed.name, listed.description, state.exposed_schema,
                                     SideEffect.READ_ONLY, lambda a: None))  # fmt: skip
        for args in data.draw(st.lists(arguments, max_size=2), label=f"arguments of {listed.name}"):
            assert isinstance(compiled.schema_errors(args), list)


# --- tricks on the whole listing ------------------------------------------------------------

GOOD = tool(b'"good-0"', b'{"type":"object"}')


def _whole(kind: str, goods: list[bytes]) -> bytes:
    if kind == "a name twice":
        return page([*goods, GOOD])
    if kind == "a name twice, once escaped":
        return page([*goods, tool(b'"good\\u002d0"', b"{}")])
    if kind == "too many tools":
        return page(goods + [tool(b'"t%d"' % i, b"{}") for i in range(MAX_TOOLS)])
    if kind == "too many bytes":
        return page([*goods, tool(b'"big"', b"{}", b'"' + b"x" * MAX_LISTING_BYTES + b'"')])
    if kind == "too deep":
        deep = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
        return page([*goods, tool(b'"deep"', b'{"default":' + deep + b"}")])
    if kind == "tools not an array":
        return b'{"jsonrpc":"2.0","id":2,"result":{"tools":{"a":' + GOOD + b"}}}"
    if kind == "no result":
        return b'{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"}}'
    if kind == "result not an object":
        return b'{"jsonrpc":"2.0","id":2,"result":[' + GOOD + b"]}"
    return b"[" + page(goods) + b"]"  # not an object at all


WHOLE = [
    "a name twice", "a name twice, once escaped", "too many tools", "too many bytes", "too deep",
    "tools not an array", "no result", "result not an object", "not an object",
]  # fmt: skip


@examples(30)
@given(st.sampled_from(WHOLE), st.lists(st.integers(0, 9), max_size=3))
def test_a_trick_on_the_whole_listing_refuses_it_by_name(kind: str, others: list[int]) -> None:
    goods = [GOOD, *(tool(b'"other-%d"' % i, b'{"type":"object"}') for i in set(others))]
    with pytest.raises(ListingRefused):
        read_listing([_whole(kind, goods)])


# --- a loop in a schema: the tool compiles, its calls fail closed ---------------------------


def test_arguments_against_a_schema_that_loops_fail_validation_with_the_reason() -> None:
    compiled = CompiledTool(Tool("loop", "", {"$ref": "#"}, SideEffect.READ_ONLY, lambda a: None))
    assert compiled.schema_errors({"a": 1}) == [
        "(schema): the arguments cannot be checked against it: it refers to itself without end"
    ]


def test_a_reference_to_a_place_the_schema_does_not_have_is_refused_at_compile_time() -> None:
    # The last two point at values that are not schemas: the validator failed on them at the
    # first call (AttributeError), found by a longer run of the suite above.
    for ref in ("#/$defs/missing", "#nope", "#/properties/b", "#/required", "#/properties/a/$ref"):
        with pytest.raises(SchemaRefused):
            compile_schema("t", {"properties": {"a": {"$ref": ref}}, "required": ["a"]})
    compile_schema("t", {"properties": {"a": {"$ref": "#/properties/b"}, "b": {}}})


@examples(200)
@given(json_values, st.lists(st.sampled_from(["a", "b", "required", "$ref", "x"]), max_size=3))
def test_rewriting_any_schema_for_fixed_and_denied_names_refuses_by_name(
    schema: Any, names: list[str]
) -> None:
    if not isinstance(schema, dict):
        schema = {"type": "object", "properties": {"a": {}, "b": schema}, "required": ["a"]}
    try:
        exposed = rewrite_schema(schema, names)
    except SchemaRefused:
        return
    for name in names:
        assert name not in exposed.get("properties", {})
