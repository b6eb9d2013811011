"""Bad tool arguments from the host, through a real ``signoff proxy`` process: every call gets a
JSON-RPC answer (a result, with a named refusal or a schema failure in its text and isError
set, or a JSON-RPC error) and the proxy keeps serving: a good call after each bad one works.

The requests are written as raw lines on the proxy's stdin (tests/host.py ``RawHost``), as a
host would write them after initialize, so that no client library's own validation filters
them first. One proxy process
serves every example; the upstream is tests/proxy/fake_server.py, whose tools echo the arguments
they receive.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from core import canonical
from core.errors import JSONRefused
from tests.conftest import run_signoff
from tests.host import RawHost
from tests.reliability.strategies import (
    EDGE_NUMBERS,
    TRICKY_ESCAPES,
    Raw,
    examples,
    json_values,
    raw_json,
)

FAKE = Path(__file__).resolve().parent.parent / "proxy" / "fake_server.py"
TOOLS = [
    {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}},
    {"name": "typed", "description": "Typed", "inputSchema": {
        "type": "object", "required": ["n"], "additionalProperties": False,
        "properties": {"n": {"type": "integer"}, "s": {"type": "string", "maxLength": 8},
                       "l": {"type": "array", "items": {"type": "number"}}}}},
]  # fmt: skip


def signoff(home: Path, *args: str) -> None:
    run_signoff(*args, home=home, ok=True)


# Its module fixture is set up once: the file's tests run on one worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("test_bad_input_arguments")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawHost]:
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o700)
    script = home / "fake-script.json"
    script.write_text(json.dumps({"listing": json.dumps(TOOLS)}))
    signoff(home, "servers", "add", "fake", "--", sys.executable, str(FAKE), str(script))
    signoff(home, "pin", "fake", "--accept")
    for tool in ("echo", "typed"):
        signoff(home, "classify", "fake", tool, "read_only")  # read_only: allowed, no approval
    host = RawHost(home, "fake", "--hold", "0.2")
    host.initialize()
    yield host
    host.close()
    assert host.process.returncode == 0
    assert b"Traceback" not in (home / "proxy-stderr.txt").read_bytes()


def answered(message: dict[str, Any]) -> dict[str, Any] | None:
    """The call's result, or None for a JSON-RPC error; anything else fails the test."""
    if "error" in message:
        assert isinstance(message["error"]["code"], int)
        assert isinstance(message["error"]["message"], str)
        return None
    result = message["result"]
    assert isinstance(result["isError"], bool)
    assert [c["type"] for c in result["content"]] in (["text"], ["text", "text"])  # cut: marked
    return result


def kind_of(message: dict[str, Any]) -> str:
    """What kind of answer a call got, for the statistics."""
    if "error" in message:
        return f"JSON-RPC error {message['error']['code']}"
    text = message["result"]["content"][0]["text"]
    named = re.search(r"\[(\w+)\]", text)
    if not message["result"]["isError"]:
        return "ran"
    if "do not match the schema" in text:
        return "schema failure"
    return f"refused: {named.group(1) if named else text[:40]}"


def good_call_works(host: RawHost) -> None:
    result = answered(host.call("echo", b'{"ok":1}'))
    assert result is not None and not result["isError"], result
    assert json.loads(result["content"][0]["text"]) == {"ok": 1}


# --- the arguments ----------------------------------------------------------------------------

CUT = "[Signoff: this result was "  # core/proxy/results.py's marker of a cut result
EVERY_TYPE = [b"null", b"true", b"false", b"0", b"-1.5", b'"text"', b"[]", b"[1,2]", b"{}"]
values = st.dictionaries(st.sampled_from(["n", "s", "l", "x"]), json_values, max_size=4)


@st.composite
def arguments(draw: st.DrawFn) -> Raw:
    """The text of a call's arguments, on one line as hosts write it."""
    kind = draw(st.sampled_from(["type", "number", "escape", "nested", "huge", "values", "raw"]))
    if kind == "type":  # every JSON type, objects or not
        raw = draw(st.sampled_from(EVERY_TYPE))
    elif kind == "number":  # beyond 2^53, overflowing a double, more digits than it holds
        raw = b'{"n":' + draw(st.sampled_from(EDGE_NUMBERS)).encode() + b"}"
    elif kind == "escape":  # lone surrogates, escapes that are not JSON
        raw = b'{"s":"' + draw(st.sampled_from(TRICKY_ESCAPES)).encode() + b'"}'
    elif kind == "nested":  # around the SDK's parser's limit of 200 levels, and far past it
        depth = draw(st.sampled_from([50, 198, 199, 200, 201, 1000, 100_000]))
        raw = b'{"l":' + b"[" * depth + b"]" * depth + b"}"
    elif kind == "huge":
        raw = b'{"s":"' + b"x" * draw(st.sampled_from([65_536, 1_000_000, 3_000_000])) + b'"}'
    elif kind == "values":
        raw = json.dumps(draw(values)).encode()
    else:
        raw = draw(raw_json())
    return Raw(raw.replace(b"\n", b" ").replace(b"\r", b" "))


@pytest.mark.slow
@examples(200)
@given(st.sampled_from(["echo", "typed"]), arguments())
def test_every_call_is_answered_and_the_proxy_keeps_serving(
    host: RawHost, tool: str, raw: bytes
) -> None:
    message = host.call(tool, raw)
    result = answered(message)
    event(kind_of(message))
    cut = result is not None and result["content"][-1]["text"].startswith(CUT)
    if result is not None and (not result["isError"] or cut):
        # It ran: the upstream received the arguments exactly as the host's JSON names them
        # (the proxy refuses what Signoff's reader refuses; null is no arguments).
        sent = canonical.loads(raw)
        echoed = json.dumps({} if sent is None else sent)  # as the fake server echoes them
        if cut:  # over the result limit (1 MiB): its start, in order, then the marker
            assert result["isError"] and echoed.startswith(result["content"][0]["text"])
        else:
            assert json.loads(result["content"][0]["text"]) == json.loads(echoed)
    good_call_works(host)


@pytest.mark.slow
@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":"x1","method":"tools/call","params":5}',
        b'{"jsonrpc":"2.0","id":"x2","method":7}',
        b'{"jsonrpc":"2.0","id":"x3","method":"tools/call","params":{"arguments":{"a":1}',
        b'{"jsonrpc":"2.0","id":"x4","method":"tools/call","params":{"name":5,"arguments":{}}}',
        b'{"jsonrpc":"2.0","id":"x5","method":"tools/call","params":{"name":"echo\\ud800"}}',
        b'{"jsonrpc":"2.0","id":"x6","method":"tools/call","params":{"name":"nope","arguments":{}}}',
        b'{"jsonrpc":"2.0","id":"x7","method":"no/such/method"}',
    ],
    ids=[
        "params-not-object",
        "method-not-string",
        "cut-off",
        "name-not-string",
        "name-lone-surrogate",
        "unknown-tool",
        "unknown-method",
    ],
)
def test_a_request_the_sdk_cannot_read_is_answered_by_its_id(host: RawHost, line: bytes) -> None:
    host.send(line)
    message = host.answer(json.loads(line[: line.index(b',"method"')] + b"}")["id"])
    if "result" in message:  # read, and refused by the proxy
        assert message["result"]["isError"]
    else:
        assert message["error"]["message"]
    good_call_works(host)


@pytest.mark.slow
def test_lines_with_no_id_to_answer_are_passed_over(host: RawHost) -> None:
    for line in (b"garbage", b"[" * 10_000, b'{"jsonrpc":"2.0","method":"x","params":\xff}', b""):
        host.send(line)
    good_call_works(host)


# --- the reader the proxy hashes arguments with -------------------------------------------------


class Huge(int):
    """An integer of thousands of digits, which prints as its size (Python refuses to print
    it whole)."""

    def __repr__(self) -> str:
        return f"Huge(<{self.bit_length()} bits>)"


python_values = st.recursive(
    json_values
    | st.sampled_from([Huge(10**5000), -(2**64), 2**53, math.nan, math.inf, 2.0**60, -0.0]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


@examples(400)
@given(st.binary(max_size=100) | raw_json())
def test_the_canonical_reader_returns_the_exact_value_or_a_named_refusal(data: bytes) -> None:
    try:
        value = canonical.loads(data)
    except JSONRefused:
        return
    assert canonical.loads(canonical.dumps(value)) == value


@examples(300)
@given(python_values)
def test_the_canonical_writer_writes_the_value_or_refuses_by_name(value: Any) -> None:
    try:
        text = canonical.dumps(value)
    except JSONRefused:
        return
    assert canonical.dumps(canonical.loads(text)) == text
