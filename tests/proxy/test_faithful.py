"""What the host and the server say to each other passes through ``signoff proxy`` as they said it
(core/proxy/hostsession.py, core/proxy/results.py; decisions 0029, 0030): results whole and in
order, a server's JSON-RPC error unchanged, the host's protocol version and roots, progress under
the host's own token, logging, and the era a client in auto mode settles on.

A raw host (tests/host.py) writes and reads the proxy's lines, so that no client library's models
stand between what the proxy wrote and what the test reads; the server is
tests/proxy/fake_server.py, scripted per test, which keeps what it received.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import canonical
from core.proxy.hostsession import HANDSHAKE_VERSIONS
from core.records import pending_requests
from core.store import Store
from tests.conftest import run_signoff
from tests.host import RawHost
from tests.proxy.rig import FAKE_SERVER, NOTES_TOOLS
from tests.waiting import wait_for

TOOLS = [
    *NOTES_TOOLS,
    {"name": "media", "description": "Every kind of content",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "slow", "description": "Reports progress", "inputSchema": {"type": "object"}},
    {"name": "where", "description": "Asks the client for its roots",
     "inputSchema": {"type": "object"}},
    {"name": "chatty", "description": "Logs a line", "inputSchema": {"type": "object"}},
    {"name": "refuse", "description": "A JSON-RPC error", "inputSchema": {"type": "object"}},
]  # fmt: skip
IMAGE = base64.b64encode(bytes(range(256)) * 300).decode()  # 76.8 KB: kept apart when needed
# Written as a server might: key order of its own, members no specification names.
MEDIA = (
    '{"content":[{"type":"text","text":"first","annotations":{"priority":0.5,"audience":["user"]}},'
    f'{{"type":"image","mimeType":"image/png","data":"{IMAGE}","_meta":{{"z":1,"a":2}}}},'
    f'{{"type":"audio","data":"{IMAGE[:400]}","mimeType":"audio/wav"}},'
    '{"type":"resource","resource":{"uri":"file:///t","mimeType":"text/plain","text":"inside"}},'
    f'{{"type":"resource","resource":{{"uri":"file:///b","blob":"{IMAGE[:800]}"}}}},'
    '{"type":"resource_link","uri":"file:///l","name":"l","size":3,"title":"L"},'
    '{"type":"text","text":"last \\u00e9\\ud83d\\ude00"}],'
    '"structuredContent":{"b":[1,2.5,null,true],"a":{"nested":"x"}},'
    '"isError":false,"_meta":{"io.example/trace":"t-1"},"futureMember":{"kept":true}}'
)


def config(home: Path, **script: Any) -> Path:
    """A home serving the fake server (all its tools read-only, so each call runs), whose
    ``script`` is what the test asks of it; the path of the script."""
    home.mkdir(mode=0o700, exist_ok=True)
    path = home / "fake-script.json"
    on_call = {"media": "raw", "slow": "progress", "where": "roots", "chatty": "log",
               "refuse": "error"}  # fmt: skip
    path.write_text(json.dumps({"listing": json.dumps(TOOLS), "on_call": on_call,
                                "results": {"media": MEDIA}, **script}))  # fmt: skip

    def signoff(*args: str) -> None:
        run_signoff(*args, home=home, ok=True)

    signoff("servers", "add", "fake", "--", sys_executable(), str(FAKE_SERVER), str(path))
    signoff("pin", "fake", "--accept")
    for tool in TOOLS:
        signoff("classify", "fake", tool["name"], "read_only")
    return path


def sys_executable() -> str:
    import sys

    return sys.executable


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    return config(
        tmp_path / "home",
        greetings=str(tmp_path / "greetings.jsonl"),
        levels=str(tmp_path / "levels.jsonl"),
        roots_changed=str(tmp_path / "roots-changed.txt"),
        capabilities={"tools": {}, "logging": {}},
        instructions="ignored until issue 19's pins of instructions",
    )


@pytest.fixture
def host(fake: Path) -> Iterator[RawHost]:
    proxy = RawHost(fake.parent, "fake", "--hold", "0.2")
    yield proxy
    proxy.close()


def lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def recorded_result(home: Path) -> dict[str, Any]:
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        (observation,) = conn.execute(
            "SELECT observation FROM steps WHERE tool_name IS NOT NULL ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
    value = canonical.loads(observation)
    assert isinstance(value, dict) and isinstance(value["result"], dict)
    return value["result"]


@pytest.mark.guarantee("G-PROXY-1")
def test_a_result_reaches_the_host_as_the_server_sent_it(host: RawHost, fake: Path) -> None:
    host.initialize()
    answer = host.call("media", b"{}")
    sent = json.loads(MEDIA)
    assert answer["result"] == sent
    # Every object's members in the server's order, at every depth: the same text once both
    # are written the same way.
    assert json.dumps(answer["result"]) == json.dumps(sent)
    record = recorded_result(fake.parent)
    assert record["sha256"] == hashlib.sha256(canonical.dumps(sent)).hexdigest()
    assert record["cut"] is None and "whole" not in record  # over 64 KiB: recorded by parts
    kinds = [part["type"] for part in record["parts"]]
    assert kinds == ["text", "image", "audio", "resource/text", "resource/blob",
                     "resource_link", "text", "structuredContent"]  # fmt: skip
    # The history shows what the host received: its hash, and each block in order.
    from app.history_model import read_detail

    with Store.open(fake.parent / "signoff.db") as store, store.snapshot() as conn:
        (run_id,) = conn.execute("SELECT id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()
    with Store.open(fake.parent / "signoff.db") as store:
        detail = read_detail(store, run_id)
    assert detail is not None
    shown = detail.text
    assert f"what the host received: {record['bytes']} bytes, sha256 {record['sha256']}" in shown
    assert shown.index('text, 81 bytes: "first"') < shown.index("image image/png")
    assert "resource/text text/plain file:///t" in shown and '"last é😀"' in shown


def test_a_servers_json_rpc_error_reaches_the_host_unchanged(host: RawHost) -> None:
    host.initialize()
    answer = host.call("refuse", b"{}")
    assert answer["error"] == {"code": -32000, "message": "the fake server refuses",
                               "data": {"why": "scripted", "n": 1.5}}  # fmt: skip


def test_the_host_s_version_and_roots_reach_the_server_and_its_roots_list_the_host(
    host: RawHost, fake: Path
) -> None:
    answer = host.initialize("2025-03-26", {"roots": {"listChanged": True}})
    assert answer["result"]["protocolVersion"] == "2025-03-26"
    greeting = lines(fake.parent.parent / "greetings.jsonl")[-1]  # the proxy's, after pin's
    assert greeting["protocolVersion"] == "2025-03-26"
    assert greeting["capabilities"] == {"roots": {"listChanged": True}}

    roots = [{"uri": "file:///work/project", "name": "project"}]
    host.send(b'{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"where",'
              b'"arguments":{}}}')  # fmt: skip
    asked = host.next(lambda m: m.get("method") == "roots/list", "the server's roots/list")
    host.respond(asked["id"], {"result": {"roots": roots, "_meta": {"k": "v"}}})
    told = json.loads(host.answer("c1")["result"]["content"][0]["text"])
    assert told == {"id": "roots-1", "result": {"roots": roots, "_meta": {"k": "v"}}}

    host.send(b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}')
    host.call("read_note", b"{}")  # after the notification, in order
    assert (fake.parent.parent / "roots-changed.txt").read_text() == "changed\n"
    with Store.open(fake.parent / "signoff.db") as store, store.snapshot() as conn:
        (payload,) = conn.execute(
            "SELECT payload FROM events WHERE kind = 'run.started' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    assert json.loads(payload)["call"]["roots"] == roots  # the roots in force, recorded


def test_a_host_without_roots_is_answered_for_as_a_client_without_roots(
    host: RawHost, fake: Path
) -> None:
    host.initialize()
    greeting = lines(fake.parent.parent / "greetings.jsonl")[-1]  # the proxy's, after pin's
    assert greeting["capabilities"] == {}
    told = json.loads(host.call("where", b"{}")["result"]["content"][0]["text"])
    assert told["error"]["code"] == -32601


def test_progress_reaches_the_host_under_its_own_token_and_nothing_else(host: RawHost) -> None:
    host.initialize()
    answer = host.request(
        "tools/call", b'{"name":"slow","arguments":{},"_meta":{"progressToken":"tok-7"}}'
    )
    assert not answer["result"]["isError"]
    progress = [m["params"] for m in host.others if m.get("method") == "notifications/progress"]
    assert progress == [
        {"progressToken": "tok-7", "progress": n, "total": 3, "message": f"step {n}"}
        for n in (1, 2, 3)
    ]  # the server's "not-a-call" token is not passed on


def test_progress_reaches_the_host_only_while_its_call_is_at_the_server(tmp_path: Path) -> None:
    """A call held for the operator has no progress to report: a server that sends progress
    under its token (guessed, or a host's token used twice) is not passed on."""
    home = tmp_path / "home"
    config(home, foreign_tokens=["held"])
    run_signoff("classify", "fake", "write_note", "local_mutation", home=home, ok=True)
    run_signoff("policy", "local_mutation", "approve", home=home, ok=True)
    host = RawHost(home, "fake", "--hold", "60")
    try:
        host.initialize()
        host.send(b'{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"write_note",'
                  b'"arguments":{"text":"x"},"_meta":{"progressToken":"held"}}}')  # fmt: skip

        def held() -> bool:
            with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
                return bool(pending_requests(conn))

        wait_for(held, "the write held for the operator")
        answer = host.request(
            "tools/call", b'{"name":"slow","arguments":{},"_meta":{"progressToken":"mine"}}'
        )
        assert not answer["result"]["isError"]
        tokens = [
            m["params"]["progressToken"]
            for m in host.others
            if m.get("method") == "notifications/progress"
        ]
        assert tokens == ["mine"] * 3
    finally:
        host.close()


def test_a_request_id_in_use_is_refused_and_the_first_request_is_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config(home, step_seconds=0.3)
    host = RawHost(home, "fake")
    try:
        host.initialize()
        call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}'
        host.send(call)
        host.send(call)
        first, second = host.answer(7), host.answer(7)
        assert second == {"jsonrpc": "2.0", "id": 7, "error": {
            "code": -32600, "message": "request id 7 is already in use by a request in flight"
        }} or first["error"]["code"] == -32600, (first, second)  # fmt: skip
        answered = second if "error" in first else first
        assert answered["result"]["isError"] is False
        host.send(b'{"jsonrpc":"2.0","id":8,"method":"ping"}')
        assert host.answer(8)["result"] == {}
        assert not [m for m in host.others if m.get("id") == 7]  # no third answer
    finally:
        host.close()


def test_a_host_that_stops_reading_ends_the_proxy_cleanly(tmp_path: Path) -> None:
    """Its end of the proxy's output closed while its input stays open: the first write fails,
    and the proxy ends as when the host closes its input, its servers stopped."""
    home = tmp_path / "home"
    config(home)
    host = RawHost(home, "fake")
    host.initialize()
    assert host.process.stdout is not None and host.process.stdin is not None
    host.process.stdout.close()
    host.send(b'{"jsonrpc":"2.0","id":5,"method":"ping"}')
    try:
        code = host.process.wait(timeout=60)
    finally:
        host.process.stdin.close()
        host._stderr.close()
    assert code == 0, host.stderr()
    log = (home / "logs" / "proxy.log").read_text()
    assert "the host's end of the wire is closed" in log, log[-3000:]
    assert "Traceback" not in host.stderr()


def test_the_handshake_versions_are_the_sdk_s() -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def test_logging_is_declared_set_and_passed_on(host: RawHost, fake: Path) -> None:
    answer = host.initialize()
    assert answer["result"]["capabilities"]["logging"] == {}
    assert host.request("logging/setLevel", b'{"level":"debug"}') == {
        "jsonrpc": "2.0", "id": host.next_id, "result": {},
    }  # fmt: skip
    assert lines(fake.parent.parent / "levels.jsonl") == [{"level": "debug"}]
    host.call("chatty", b"{}")
    logged = [m["params"] for m in host.others if m.get("method") == "notifications/message"]
    assert logged == [{"level": "info", "logger": "fake", "data": "a log line"}]
    assert "a log line" in (fake.parent / "logs" / "fake.log").read_text()


def test_set_level_goes_to_the_servers_that_declared_logging_else_each_answers(
    tmp_path: Path,
) -> None:
    """Of two servers, only the one that declared logging is sent the level; with none that
    declared it, each answers for itself, as it would directly."""
    home = tmp_path / "home"
    quiet, loud = tmp_path / "quiet.jsonl", tmp_path / "loud.jsonl"
    config(home, levels=str(quiet))
    script = tmp_path / "loud.json"
    script.write_text(json.dumps({"listing": json.dumps(NOTES_TOOLS), "levels": str(loud),
                                  "capabilities": {"tools": {}, "logging": {}}}))  # fmt: skip
    run_signoff("servers", "add", "loud", "--", sys_executable(), str(FAKE_SERVER), str(script),
                home=home, ok=True)  # fmt: skip
    run_signoff("pin", "loud", "--accept", home=home, ok=True)
    both = RawHost(home, "fake", "loud")
    try:
        assert both.initialize()["result"]["capabilities"]["logging"] == {}
        assert both.request("logging/setLevel", b'{"level":"debug"}')["result"] == {}
        assert lines(loud) == [{"level": "debug"}] and not quiet.exists()
    finally:
        both.close()
    alone = RawHost(home, "fake")
    try:
        assert "logging" not in alone.initialize()["result"]["capabilities"]
        refused = alone.request("logging/setLevel", b'{"level":"debug"}')
        assert refused["error"] == {"code": -32601, "message": "no"}  # the server's own
    finally:
        alone.close()


def test_a_client_opening_the_2026_era_is_told_to_use_the_handshake(host: RawHost) -> None:
    discover = host.request("server/discover", b"{}")
    assert discover["error"]["code"] == -32601
    early = host.request("tools/list", b"{}")
    assert early["error"]["code"] == -32600  # initialize first
    assert host.initialize("1999-01-01")["result"]["protocolVersion"] == "2025-11-25"
    assert host.request("ping", b"{}")["result"] == {}


@pytest.mark.guarantee("G-CRASH-1")
def test_a_large_result_the_host_gave_up_on_is_kept_whole_for_its_re_call(tmp_path: Path) -> None:
    home = tmp_path / "home"
    notes = tmp_path / "notes.txt"
    config(home, on_call={"write_note": "late"}, delay=1, late_bytes=300_000, notes=str(notes))
    run_signoff("classify", "fake", "write_note", "local_mutation", home=home, ok=True)
    run_signoff("policy", "local_mutation", "allow", home=home, ok=True)
    host = RawHost(home, "fake", "--hold", "0.2")
    try:
        host.initialize()
        host.send(b'{"jsonrpc":"2.0","id":"gone","method":"tools/call","params":{"name":'
                  b'"write_note","arguments":{"text":"big"}}}')  # fmt: skip
        host.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":'
                  b'{"requestId":"gone","reason":"the user moved on"}}')  # fmt: skip

        def kept() -> int:
            with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
                return int(conn.execute("SELECT count(*) FROM result_blobs").fetchone()[0])

        wait_for(lambda: kept() == 1, "the large result kept for the re-call")
        again = host.call("write_note", b'{"text":"big"}')
        text = again["result"]["content"][0]["text"]
        assert len(text) == 300_000 and text.startswith("0000000 0000001 ")
        assert notes.read_text() == "big\n"  # collected, not run again
        assert kept() == 0  # handed back: no longer kept
        assert not [m for m in host.others if m.get("id") == "gone"]  # cancelled: no answer
    finally:
        host.close()
