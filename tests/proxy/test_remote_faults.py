"""A remote server that answers over HTTP with bytes the test chose (tests/proxy/
http_fake_server.py, a real subprocess) through a real `signoff proxy`, the mcp SDK's client as
the host: pins over a listing spread over several SSE data lines, and answers that are not MCP
named, a mutation whose answer never came waiting for the operator rather than run again."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from core.proxy.pins import read_listing
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import until, wait_for

SERVER = Path(__file__).with_name("http_fake_server.py")
# Pretty-printed: the SSE event carries it as several data lines, rejoined with newlines.
LISTING = json.dumps({"jsonrpc": "2.0", "id": 0, "result": {"tools": NOTES_TOOLS}}, indent=2)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("first\n")
    return path


@pytest.fixture
def served(tmp_path: Path, notes: Path) -> Iterator[tuple[Path, str]]:
    """The script (to change between calls) and the server's URL."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"listing": LISTING, "notes": str(notes)}))
    port = tmp_path / "port"
    process = subprocess.Popen([sys.executable, str(SERVER), str(port), str(script)])
    try:
        wait_for(port.exists, "the fake remote server listening")
        yield script, f"http://127.0.0.1:{port.read_text()}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def on_call(script: Path, **behaviour: str) -> None:
    """How the server answers each tool from now on."""
    given = json.loads(script.read_text())
    script.write_text(json.dumps({**given, "on_call": behaviour}))


@pytest.fixture
def rig(home: Path, served: tuple[Path, str]) -> Rig:
    rig = Rig(home)
    rig.signoff("servers", "add", "notes", "--url", served[1])
    return rig


def test_pins_are_taken_over_a_listing_spread_over_several_event_lines(rig: Rig) -> None:
    rig.pin("notes")
    config = tomllib.loads((rig.home / "config.toml").read_text())
    pins = {name: tool["pin"] for name, tool in config["servers"]["notes"]["tools"].items()}
    assert pins == {t.name: t.pin for t in read_listing([LISTING.encode()]).tools}


def test_a_mutation_whose_answer_never_came_waits_for_the_operator_and_is_not_run_again(
    rig: Rig, served: tuple[Path, str], notes: Path
) -> None:
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", "allow")
    on_call(served[0], write_note="cut")

    async def scenario() -> None:
        async with rig.client("notes", hold=0.2) as host:
            told = text(await host.call_tool("write_note", {"text": "once"}))
            assert "may or may not have taken effect" in told, told
            again = text(await host.call_tool("write_note", {"text": "once"}))
            assert "pending" in again or "waits" in again, again

    anyio.run(scenario)
    assert notes.read_text() == "first\nonce\n"  # reached the server once, never re-sent
    kinds = {row["kind"] for row in rig.pending()}
    assert "interrupted_side_effect" in kinds


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [("html", "not JSON or an event stream"), ("accepted", "202 Accepted: no answer will come")],
)
def test_an_answer_that_is_not_mcp_is_named_to_the_host(
    rig: Rig, served: tuple[Path, str], behaviour: str, said: str
) -> None:
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    on_call(served[0], read_note=behaviour)

    async def scenario() -> None:
        async with rig.client("notes") as host:
            answer = await host.call_tool("read_note", {})
            assert answer.is_error and said in text(answer), text(answer)

    anyio.run(scenario)


def test_a_message_on_the_servers_own_stream_reaches_the_proxy(
    rig: Rig, served: tuple[Path, str]
) -> None:
    """The GET stream opened after the handshake: a log message the server sends outside any
    request is read (the proxy writes it to the server's log and passes it on)."""
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    given = json.loads(served[0].read_text())
    words = "said on the server's own stream"
    message = {"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": "info", "data": words}}  # fmt: skip
    served[0].write_text(json.dumps({**given, "own_stream": message}))
    log = rig.home / "logs" / "notes.log"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await host.list_tools()
            await until(lambda: log.exists() and words in log.read_text(), "the message logged")

    anyio.run(scenario)


@pytest.mark.parametrize("behaviour", ["oversize", "oversize_events"])
def test_an_answer_too_large_to_read_is_a_call_that_ran(
    rig: Rig, served: tuple[Path, str], notes: Path, behaviour: str
) -> None:
    """Over 16 MiB, as a JSON body or as one event: the server answered, so the write ran; the
    host is told why its answer is not whole, and it is not sent again."""
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", "allow")
    on_call(served[0], write_note=behaviour)

    async def scenario() -> None:
        async with rig.client("notes") as host:
            told = text(await host.call_tool("write_note", {"text": "big"}))
            assert "UpstreamAnswerTooLarge" in told, told[:500]

    anyio.run(scenario)
    assert notes.read_text() == "first\nbig\n"
    with rig.store() as store:
        [(status,)] = store._conn.execute("SELECT status FROM runs").fetchall()
    assert status == "COMPLETED"
