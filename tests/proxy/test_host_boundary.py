"""The host boundary parses losslessly (G-JSON-1): what a host writes on ``signoff proxy``'s stdin
is read by Signoff's own parser before anything else decodes it. A line it refuses is answered
by name with a JSON-RPC error and nothing runs; a line it accepts reaches the gate and the server
exactly as written.

Every line is written as raw bytes (tests/host.py ``RawHost``) to one real ``signoff proxy``
process; the upstream is tests/proxy/fake_server.py, which appends each ``tools/call`` line it
receives to a file, so the tests see exactly what reached it, and the record is read from the
database itself.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from core import canonical
from core.errors import JSONRefused, NestedTooDeeply
from core.proxy import rawjson
from core.proxy.hostline import MAX_DEPTH, MAX_LINE
from tests.conftest import run_signoff
from tests.host import RawHost
from tests.proxy.rig import FAKE_SERVER
from tests.reliability.strategies import TRICKS, Raw, examples, json_values

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
TOOLS = [
    {"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}},
    {"name": "write_note", "description": "Append a line to the notes",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]  # fmt: skip


@dataclass
class Boundary:
    """The proxy, its host, and what can be seen of what ran."""

    home: Path
    host: RawHost

    def calls(self) -> list[bytes]:
        """Each ``tools/call`` line the server received, as received."""
        path = self.home / "calls.jsonl"
        return path.read_bytes().splitlines() if path.exists() else []

    def log(self) -> str:
        return (self.home / "logs" / "proxy.log").read_text()

    def runs(self) -> int:
        with closing(self._db()) as db:
            return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def last_echo_step(self) -> tuple[str, str]:
        """The last echo call's decision as recorded (verbatim) and its canonical arguments."""
        with closing(self._db()) as db:
            decision, arguments = db.execute(
                "SELECT decision, arguments FROM steps WHERE tool_name LIKE '%echo'"
                " ORDER BY rowid DESC LIMIT 1"
            ).fetchone()
        return decision, arguments

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.home / 'signoff.db'}?mode=ro", uri=True)


# Its module fixture is set up once: the file's tests run on one worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("test_host_boundary")


@pytest.fixture(scope="module")
def boundary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Boundary]:
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o700)
    script = home / "fake-script.json"
    script.write_text(json.dumps({"listing": json.dumps(TOOLS), "calls": str(home / "calls.jsonl"),
                                  "notes": str(home / "notes.txt")}))  # fmt: skip
    signoff(home, "servers", "add", "fake", "--", sys.executable, str(FAKE_SERVER), str(script))
    signoff(home, "pin", "fake", "--accept")
    signoff(home, "classify", "fake", "echo", "read_only")  # allowed: it reaches the server
    signoff(home, "classify", "fake", "write_note", "local_mutation")  # waits for the operator
    host = RawHost(home, "fake", "--hold", "0.2")
    host.initialize()
    yield Boundary(home, host)
    host.close()
    assert host.process.returncode == 0
    assert b"Traceback" not in (home / "proxy-stderr.txt").read_bytes()


def signoff(home: Path, *args: str) -> None:
    run_signoff(*args, home=home, ok=True)


def good_call_works(host: RawHost) -> None:
    message = host.call("echo", b'{"ok":1}')
    assert not message["result"]["isError"], message
    assert json.loads(message["result"]["content"][0]["text"]) == {"ok": 1}


def refusal(message: dict[str, Any]) -> tuple[int, str]:
    """The code of a JSON-RPC error and the name of the refusal its message ends with."""
    assert "error" in message, f"not refused: {message}"
    text = message["error"]["message"]
    assert text.startswith("Signoff's proxy cannot read this request, so nothing was run: ")
    name = text.rsplit("[", 1)[1].rstrip("]") if text.endswith("]") else ""
    return message["error"]["code"], name


def same(a: Any, b: Any) -> bool:
    """The same JSON value: the same canonical text (RFC 8785), which is what the server is sent
    (keys sorted, each number in its shortest form: ``1E+2`` is sent as ``100``)."""
    return canonical.dumps(a) == canonical.dumps(b)


def tools_call(request_id: str, params: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":%s}' % (
        request_id.encode(),
        params,
    )


def write(arguments: bytes) -> bytes:
    return b'{"name":"write_note","arguments":%s}' % arguments


# --- every attack: refused by name, nothing runs ----------------------------------------------

DEEP = b'{"text":"x","l":' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}"
ATTACKS = {
    # The issue's: the last "path" won, and the approval showed only it.
    "a key twice in the arguments": (write(b'{"text":"safe.txt","text":"evil.txt"}'),
                                      "DuplicateKey"),
    "a key twice deep in the arguments": (write(b'{"text":"x","a":[{"b":{"c":1,"c":2}}]}'),
                                          "DuplicateKey"),
    "a key twice in params": (b'{"name":"echo","name":"write_note","arguments":{"text":"x"}}',
                              "DuplicateKey"),
    "a key twice at the top level": (write(b'{"text":"x"}') + b',"method":"tools/list"',
                                     "DuplicateKey"),
    # The issue's: read as 0.1.
    "a number a double cannot hold": (write(b'{"text":"x","n":0.10000000000000001}'),
                                      "ImpreciseNumber"),
    "2^53 + 1": (write(b'{"text":"x","n":9007199254740993}'), "IntegerOutOfRange"),
    "-(2^53)": (write(b'{"text":"x","n":-9007199254740992}'), "IntegerOutOfRange"),
    "a 5000-digit integer": (write(b'{"text":"x","n":' + b"9" * 5000 + b"}"), "IntegerOutOfRange"),
    "1e400": (write(b'{"text":"x","n":1e400}'), "NonFiniteNumber"),
    "NaN": (write(b'{"text":"x","n":NaN}'), "NonFiniteNumber"),
    "Infinity": (write(b'{"text":"x","n":Infinity}'), "NonFiniteNumber"),
    "-Infinity": (write(b'{"text":"x","n":-Infinity}'), "NonFiniteNumber"),
    "a lone high surrogate": (write(b'{"text":"safe\\ud800"}'), "LoneSurrogate"),
    "a lone low surrogate in a key": (write(b'{"text":"x","\\udc00":1}'), "LoneSurrogate"),
    # The issue's: replaced by U+FFFD, and executed.
    "invalid UTF-8": (write(b'{"text":"caf\xe9"}'), "InvalidUTF8"),
    "a surrogate encoded in UTF-8": (write(b'{"text":"\xed\xa0\x80"}'), "InvalidUTF8"),
    "an overlong encoding": (write(b'{"text":"\xc0\xaf"}'), "InvalidUTF8"),
    "nesting past the limit": (write(DEEP), "NestedTooDeeply"),
    "nesting past the runtime": (write(b'{"l":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
                                 "NestedTooDeeply"),
    "cut off": (write(b'{"text":"x"'), "MalformedJSON"),
}  # fmt: skip


@pytest.mark.guarantee("G-JSON-1")
@pytest.mark.parametrize(("params", "name"), ATTACKS.values(), ids=ATTACKS.keys())
def test_a_host_line_signoff_cannot_read_exactly_is_refused_by_name_and_nothing_runs(
    boundary: Boundary, params: bytes, name: str
) -> None:
    host = boundary.host
    calls, runs = boundary.calls(), boundary.runs()
    request_id = f"attack-{name}-{len(params)}"
    host.send(tools_call(request_id, params))
    assert refusal(host.answer(request_id)) == (PARSE_ERROR, name)
    good_call_works(host)
    assert boundary.calls()[: len(calls)] == calls
    assert len(boundary.calls()) == len(calls) + 1  # the good call only
    assert boundary.runs() == runs + 1  # the good call only: nothing recorded, nothing pending
    assert not (boundary.home / "notes.txt").exists()


@pytest.mark.guarantee("G-JSON-1")
def test_a_line_longer_than_the_limit_is_refused_by_name_and_the_proxy_reads_on(
    boundary: Boundary,
) -> None:
    host = boundary.host
    calls = boundary.calls()
    host.send(tools_call("too-long", write(b'{"text":"' + b"x" * MAX_LINE + b'"}')))
    assert refusal(host.answer("too-long")) == (PARSE_ERROR, "HostLineTooLong")
    # The TypeScript SDK writes the id last: it is read from the line's end.
    huge = b'{"method":"tools/call","params":%s,"jsonrpc":"2.0","id":"id-last"}'
    host.send(huge % write(b'{"text":"' + b"x" * (2 * MAX_LINE) + b'"}'))
    assert refusal(host.answer("id-last")) == (PARSE_ERROR, "HostLineTooLong")
    # Exactly MAX_LINE bytes is within it.
    line = tools_call("at-the-limit", b'{"name":"echo","arguments":{"s":"x"}}')
    line = line[:-3] + b" " * (MAX_LINE - len(line)) + line[-3:]
    host.send(line)
    assert len(line) == MAX_LINE
    assert not host.answer("at-the-limit")["result"]["isError"]
    good_call_works(host)
    assert len(boundary.calls()) == len(calls) + 2  # the line at the limit and the good call


@pytest.mark.parametrize(
    ("tail", "members"),
    [
        (b'x"},"jsonrpc":"2.0","id":5}', {"id": b"5", "jsonrpc": b'"2.0"'}),
        (b'x"}, "id" : "a\\"}" }\n', {"id": b'"a\\"}"'}),
        (b'{"id":-1.5e3}', {"id": b"-1.5e3"}),
        (b'{"params":{"id":7}}', {}),  # a nested id is not the request's
        (b'"id":7', {}),  # no closing brace
        (b'"id":"cut}', {}),  # a string whose start was cut off
        (b"", {}),
    ],
)
def test_the_members_ending_a_line_are_read_backward(
    tail: bytes, members: dict[str, bytes]
) -> None:
    assert rawjson.top_level_tail(tail) == members


@pytest.mark.guarantee("G-JSON-1")
def test_json_that_is_not_a_json_rpc_request_is_answered_invalid_request(
    boundary: Boundary,
) -> None:
    host = boundary.host
    host.send(b'{"jsonrpc":"2.0","id":"shape","method":"tools/call","params":5}')
    code, _ = refusal(host.answer("shape"))
    assert code == INVALID_REQUEST
    good_call_works(host)


@pytest.mark.guarantee("G-JSON-1")
@pytest.mark.parametrize("written", [b"1.0", b"true", b"9007199254740993", b"[1]"])
def test_a_request_whose_id_cannot_be_read_exactly_is_answered_to_a_null_id(
    boundary: Boundary, written: bytes
) -> None:
    """Not taken for a notification (the SDK's reading), which no one answers: the host would
    wait for ever. JSON-RPC answers an id it cannot tell with null."""
    host, runs = boundary.host, boundary.runs()
    host.send(b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}'
              % (written, write(b'{"text":"odd id"}')))  # fmt: skip
    code, _ = refusal(host.answer(None))  # type: ignore[arg-type]
    assert code in (INVALID_REQUEST, PARSE_ERROR)
    assert boundary.runs() == runs
    good_call_works(host)


@pytest.mark.guarantee("G-JSON-1")
def test_a_refused_notification_is_logged_and_dropped(boundary: Boundary) -> None:
    host = boundary.host
    others = len(host.others)
    host.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
              b'"params":{"requestId":1,"requestId":2}}')  # fmt: skip
    host.send(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"t":"\xff"}}')
    host.send(b"")  # a blank line is nothing at all
    good_call_works(host)
    assert host.others[others:] == []  # neither was answered
    logged = boundary.log().count("refused a line from the host with no id to answer")
    assert logged >= 2


@examples(300)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.booleans())
def test_what_is_read_backward_is_what_the_object_says(value: dict[str, Any], ascii: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii).encode()
    found = rawjson.top_level_tail(text)
    for key, raw in found.items():
        assert json.loads(raw) == value[key]
    scalars = list(value)[::-1]
    plain = [k for i, k in enumerate(scalars) if not any(
        isinstance(value[j], dict | list) for j in scalars[: i + 1])]  # fmt: skip
    assert set(found) == set(plain)


# --- what passes, passes exactly ----------------------------------------------------------------

EXACT = (
    b'{"z":1,"big":9007199254740991,"neg":-9007199254740991,"f":0.30000000000000004,'
    b'"tiny":5e-324,"e":1E+2,"zero":-0.0,"s":"tab\\t \\"q\\" \\\\ \\/ \\u00e9 \\ud83d\\ude00 '
    b'\\u2028 \xf0\x9f\x98\x80","a":[1.5,{"b":null,"a":true}],"":{}}'
)


@pytest.mark.guarantee("G-JSON-1")
def test_an_accepted_call_reaches_the_record_and_the_server_exactly_as_written(
    boundary: Boundary,
) -> None:
    """The SDK's model is built from the value Signoff's parser read: big-but-safe integers,
    shortest-form floats and escapes arrive as the host wrote them; the decision is recorded in
    the host's key order, the request it became and the server's arguments in canonical order."""
    expected = canonical.loads(EXACT)
    assert isinstance(expected, dict)
    exact_text = json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
    host = boundary.host
    answer = host.call("echo", EXACT)
    assert not answer["result"]["isError"], answer
    received = canonical.loads(boundary.calls()[-1])
    assert isinstance(received, dict)
    assert same(received["params"]["arguments"], expected)  # the canonical request, sent
    decision, arguments = boundary.last_echo_step()
    assert json.loads(decision)["arguments"] == exact_text  # recorded verbatim, in its order
    assert arguments == canonical.dumps_text(expected)  # and as the canonical request
    assert json.loads(answer["result"]["content"][0]["text"]) == expected


# --- Hypothesis over the host's raw bytes -----------------------------------------------------


NUMBERS = st.from_regex(
    rb"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
) | st.sampled_from([
    b"0.10000000000000001", b"0.30000000000000004", b"5e-324", b"2.4703282292062328e-324",
    b"1.7976931348623157e308", b"1.7976931348623159e308", b"9007199254740991", b"-0.0", b"1E+2",
])  # fmt: skip


@st.composite
def host_lines(draw: st.DrawFn) -> Raw:
    """The params of a ``tools/call`` as bytes: arguments generated, written several ways, then
    perhaps spoiled (a key twice, odd numbers, surrogate escapes, bytes that are not UTF-8, deep
    nesting, a cut) in the arguments or in the params around them."""
    arguments = draw(st.dictionaries(st.sampled_from(["n", "s", "l", "x"]), json_values,
                                     max_size=4))  # fmt: skip
    data = json.dumps(arguments, ensure_ascii=draw(st.booleans())).encode()
    if draw(st.booleans()):  # a number as a host may write it: exact or not, in range or not
        data = b'{"n":' + draw(NUMBERS) + b',"v":' + data + b"}"
    for trick in draw(st.lists(st.sampled_from(TRICKS), max_size=2)):
        data = trick(draw, data)
    params = b'{"name":"echo","arguments":' + data + b"}"
    for trick in draw(st.lists(st.sampled_from(TRICKS), max_size=1)):
        params = trick(draw, params)
    return Raw(params.replace(b"\n", b" ").replace(b"\r", b" "))


def refused_as(line: bytes) -> str | None:
    """The name Signoff's reader refuses ``line`` by, or None when it reads it: nesting first
    (so that the parser never meets more than the runtime's stack reads), then the parser."""
    if nesting(line) > MAX_DEPTH:
        return NestedTooDeeply.__name__
    try:
        canonical.loads(line)
    except JSONRefused as e:
        return type(e).__name__
    return None


def nesting(text: bytes) -> int:
    """How deep ``text`` nests: brackets outside strings, a string running to its closing quote
    or the end of the text."""
    depth = deepest = i = 0
    in_string = False
    while i < len(text):
        c = text[i : i + 1]
        if in_string and c == b"\\":
            i += 1  # the escaped byte is not looked at
        elif c == b'"':
            in_string = not in_string
        elif not in_string and c in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif not in_string and c in (b"]", b"}"):
            depth -= 1
        i += 1
    return deepest


@examples(300)
@given(
    st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"a", b","]), max_size=400).map(
        b"".join
    ),
    st.integers(0, 40),
)
def test_the_reader_measures_nesting_as_the_text_says(text: bytes, levels: int) -> None:
    assert rawjson.deeper_than(text, levels) == (nesting(text) > levels)


@pytest.mark.guarantee("G-JSON-1")
@pytest.mark.slow
@examples(200)
@given(host_lines())
def test_every_host_line_is_decoded_exactly_or_refused_by_name(
    boundary: Boundary, params: bytes
) -> None:
    host = boundary.host
    host.next_id += 1
    request_id = f"h{host.next_id}"
    line = tools_call(request_id, params)
    calls = len(boundary.calls())
    host.send(line)
    message = host.answer(request_id)
    refused_by = refused_as(line)
    received = boundary.calls()[calls:]
    if refused_by is not None:
        event(f"refused: {refused_by}")
        assert refusal(message) == (PARSE_ERROR, refused_by)
        assert received == []
    elif received:
        # It reached the server: exactly the arguments the host wrote, in its order.
        event("ran")
        sent = canonical.loads(line)
        assert isinstance(sent, dict)
        forwarded = canonical.loads(received[0])
        assert isinstance(forwarded, dict)
        assert same(forwarded["params"]["arguments"], sent["params"].get("arguments") or {})
    else:  # read exactly, then refused by the SDK's models or the gate (not an object, schema)
        event("error" if "error" in message else "refused by the gate")
        assert "error" in message or message["result"]["isError"], message
    good_call_works(host)


def test_every_message_to_the_host_is_written_as_a_line_it_can_read() -> None:
    """A string UTF-8 cannot carry (a lone surrogate, read by a lenient parser) is written as its
    escape; an answer that is not JSON at all becomes an error answering its request, so the
    host is never left waiting and the writer never stops."""
    from core.proxy.hoststdio import _line

    odd = {"jsonrpc": "2.0", "id": 1, "result": {"text": "a\ud800b é"}}
    assert json.loads(_line(odd)) == odd
    assert _line({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).endswith(b"[]}}\n")
    broken = json.loads(_line({"jsonrpc": "2.0", "id": 2, "result": {"x": object()}}))
    assert broken["id"] == 2 and broken["error"]["code"] == -32603
    assert _line({"jsonrpc": "2.0", "method": "m", "params": {"x": object()}}) == b""
