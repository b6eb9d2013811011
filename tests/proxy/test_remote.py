"""Remote servers over Streamable HTTP through `signoff proxy`: the mcp SDK's own HTTP server
(tests/proxy/remote_server.py, a real subprocess on 127.0.0.1, wanting a bearer token) and the
mcp SDK's client as the host. Pins over the bytes the server sent, the gate, approval, the
record; a bad or missing token named; the token written nowhere."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from core.errors import ConfigError, RemoteConfigRefused
from core.proxy import remote as remote_config
from core.proxy.config import load
from core.proxy.http_upstream import EventReader
from core.proxy.manage import edit_server
from core.proxy.pins import read_listing
from core.proxy.remote_commands import add_remote
from core.proxy.upstream import LongLine
from core.verify import verify
from tests.conftest import SIGNOFF, _secret_service_problem, need
from tests.host import text
from tests.proxy.rig import Rig
from tests.waiting import wait_for

SERVER = Path(__file__).with_name("remote_server.py")
TOKEN = "tok-" + "7f3a9c1e5b" * 3  # what no file of Signoff's may hold
AUTHORIZATION = "Authorization: Bearer ${NOTES_TOKEN}"


class Remote:
    """The server's process; ``start`` again (a reworded tool, a fresh session) as needed."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.notes = tmp_path / "notes.txt"
        self.notes.write_text("first\n")
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, port: int = 0, **env: str) -> str:
        self.stop()
        port_file = self.dir / "port"
        port_file.unlink(missing_ok=True)
        with (self.dir / "server-stderr.txt").open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), str(port_file), str(self.notes), str(port)],
                env={**os.environ, "REMOTE_TOKEN": TOKEN, **env},
                stderr=log,
            )
        wait_for(port_file.exists, "the remote server listening")
        self.url = f"http://127.0.0.1:{port_file.read_text()}/mcp"
        return self.url

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    server = Remote(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def rig(home: Path) -> Rig:
    return Rig(home)


def add(rig: Rig, url: str, *more: str) -> None:
    rig.signoff("servers", "add", "notes", "--url", url, "--header", AUTHORIZATION, *more)


def sent_listing(url: str) -> bytes:
    """The tools/list answer exactly as the server sends it, read without Signoff."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    with httpx2.Client(headers=headers) as client:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "t", "version": "1"}}  # fmt: skip
        first = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                       "params": hello})  # fmt: skip
        headers = {"Mcp-Session-Id": first.headers["mcp-session-id"],
                   "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers=headers)  # fmt: skip
        answer = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                             headers=headers)  # fmt: skip
    if answer.headers["content-type"].startswith("application/json"):
        return answer.content.strip()
    [data] = EventReader(1 << 20).feed(answer.content + b"\n\n")
    assert isinstance(data, bytes)
    return data


@pytest.mark.guarantee("G-REMOTE-1")
@pytest.mark.parametrize("bodies", ["events", "json"])
def test_a_remote_server_is_pinned_over_its_bytes_gated_approved_and_recorded(
    rig: Rig, remote: Remote, bodies: str
) -> None:
    url = remote.start(REMOTE_JSON="1" if bodies == "json" else "0")
    rig.env["NOTES_TOKEN"] = TOKEN
    add(rig, url)
    pinned = rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    config = tomllib.loads((rig.home / "config.toml").read_text())
    pins = {name: tool["pin"] for name, tool in config["servers"]["notes"]["tools"].items()}
    # The pins are over the bytes the server sent, read here without Signoff's transport.
    assert pins == {t.name: t.pin for t in read_listing([sent_listing(url)]).tools}
    assert pinned and set(pins) == {"read_note", "write_note"}
    once = {"text": "once"}

    async def scenario() -> None:
        async with rig.client("notes") as host:
            names = {t.name for t in (await host.list_tools()).tools}
            assert names == {"signoff_status", "read_note", "write_note"}
            read = await host.call_tool("read_note", {})
            assert not read.is_error and text(read) == "first\n"  # a read flows, unasked
            first = await host.call_tool("write_note", once)
            assert "pending" in text(first) and remote.notes.read_text() == "first\n"
            [waiting] = rig.pending()
            assert (waiting["server"], waiting["tool"], waiting["arguments"]) == (
                "notes", "write_note", once,
            )  # fmt: skip
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            done = await host.call_tool("write_note", once)
            assert not done.is_error and text(done) == "wrote 'once'"

    anyio.run(scenario)
    assert remote.notes.read_text() == "first\nonce\n"  # run exactly once
    rig.signoff("verify")
    with rig.store() as store:
        assert verify(store).head.seq > 0
        statuses = store._conn.execute("SELECT tool, status FROM runs ORDER BY created_at")
        assert statuses.fetchall() == [("read_note", "COMPLETED"), ("write_note", "COMPLETED")]
    # The token is nowhere in Signoff's files: the configuration, the logs, the store.
    for path in rig.home.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_a_tool_reworded_after_pinning_is_not_offered(rig: Rig, remote: Remote) -> None:
    rig.env["NOTES_TOKEN"] = TOKEN
    add(rig, remote.start())
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    reworded = remote.start(NOTES_DESCRIPTION="Read the notes, then send them to the model")
    add(rig, reworded, "--replace")  # its tools' pins and classes kept

    async def scenario() -> None:
        async with rig.client("notes") as host:
            names = {t.name for t in (await host.list_tools()).tools}
            assert names == {"signoff_status", "write_note"}

    anyio.run(scenario)


def test_a_session_the_server_forgot_is_opened_again_and_the_call_made_once(
    rig: Rig, remote: Remote
) -> None:
    rig.env["NOTES_TOKEN"] = TOKEN
    url = remote.start()
    add(rig, url)
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", "allow")

    async def scenario() -> None:
        async with rig.client("notes") as host:
            assert not (await host.call_tool("write_note", {"text": "a"})).is_error
            remote.start(port=int(url.split(":")[2].split("/")[0]))  # same address, no sessions
            again = await host.call_tool("write_note", {"text": "b"})
            assert not again.is_error and text(again) == "wrote 'b'"

    anyio.run(scenario)
    assert remote.notes.read_text() == "first\na\nb\n"


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_token_refused_during_a_session_is_named_to_the_host_and_nothing_runs(
    rig: Rig, remote: Remote
) -> None:
    rig.env["NOTES_TOKEN"] = TOKEN
    url = remote.start()
    add(rig, url)
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", "allow")

    async def scenario() -> None:
        async with rig.client("notes") as host:
            assert not (await host.call_tool("write_note", {"text": "a"})).is_error
            port = int(url.split(":")[2].split("/")[0])
            remote.start(port=port, REMOTE_TOKEN="rotated-" + TOKEN)  # the old token revoked
            refused = await host.call_tool("write_note", {"text": "b"})
            assert refused.is_error and "refused the credentials" in text(refused)
            assert TOKEN not in text(refused)

    anyio.run(scenario)
    assert remote.notes.read_text() == "first\na\n"


def _refused(rig: Rig, name: str) -> str:
    done = rig.signoff("pin", "notes", check=False)
    assert done.returncode != 0 and f"[{name}]" in done.stderr, done.stderr
    return done.stderr


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_bad_token_is_named_and_never_shown(rig: Rig, remote: Remote) -> None:
    add(rig, remote.start())
    rig.env["NOTES_TOKEN"] = "not-the-" + TOKEN
    said = _refused(rig, "UpstreamTokenRefused")
    assert "not-the-" not in said and TOKEN not in said

    async def scenario() -> None:  # through the proxy: it offers nothing, and says why
        async with rig.client("notes") as host:
            assert {t.name for t in (await host.list_tools()).tools} == {"signoff_status"}

    anyio.run(scenario)
    [row] = json.loads(rig.signoff("servers", "list", "--json").stdout)
    assert "[UpstreamTokenRefused]" in row["last_connection"]["error"]


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_missing_variable_is_named_and_the_server_not_contacted(rig: Rig, remote: Remote) -> None:
    add(rig, remote.start())
    rig.env.pop("NOTES_TOKEN", None)
    assert "NOTES_TOKEN" in _refused(rig, "RemoteSecretMissing")


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_secret_kept_in_the_keyring_is_read_at_start_and_written_nowhere(
    rig: Rig, remote: Remote
) -> None:
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    kept = subprocess.run(
        [str(SIGNOFF), "secret", "set", "notes-token"],  # the secret on stdin, as a pipe gives it
        input=TOKEN + "\n", env=rig.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert kept.returncode == 0 and TOKEN not in kept.stdout + kept.stderr, kept.stderr
    url = remote.start()
    header = "Authorization: Bearer ${keyring:notes-token}"
    rig.signoff("servers", "add", "notes", "--url", url, "--header", header)
    rig.pin("notes")  # the server took the keyring's token
    tools = tomllib.loads((rig.home / "config.toml").read_text())["servers"]["notes"]["tools"]
    assert all("pin" in tools[name] for name in ("read_note", "write_note"))
    header = "Authorization: Bearer ${keyring:never-kept}"
    rig.signoff("servers", "add", "notes", "--replace", "--url", url, "--header", header)
    assert "never-kept" in _refused(rig, "RemoteSecretMissing")
    for path in rig.home.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_a_server_not_listening_and_an_address_that_is_no_mcp_server_are_named(
    rig: Rig, remote: Remote
) -> None:
    rig.env["NOTES_TOKEN"] = TOKEN
    url = remote.start()
    add(rig, url.removesuffix("/mcp") + "/elsewhere")  # the web server answers 404, not MCP
    _refused(rig, "UpstreamNotMCP")
    remote.stop()
    add(rig, url, "--replace")
    _refused(rig, "UpstreamUnreachable")


@pytest.mark.guarantee("G-REMOTE-1")
@pytest.mark.parametrize(
    ("url", "header"),
    [
        ("http://example.com/mcp", AUTHORIZATION),  # clear text beyond this computer
        ("https://me:pw@example.com/mcp", AUTHORIZATION),  # a password in the URL
        ("ftp://example.com/mcp", AUTHORIZATION),
        ("https://example.com/mcp", "Authorization: Bearer abc123"),  # the secret itself
        ("https://example.com/mcp", "X-Api-Key: abc123"),
        ("https://example.com/mcp", "Mcp-Session-Id: ${S}"),  # Signoff's own header
        ("https://example.com/mcp", "Bad Name: ${S}"),
        ("https://example.com/mcp", "Authorization: Bearer ${1BAD}"),
        ("https://example.com/mcp", "Authorization: Bearer ${keyring:no/slash}"),
        ("https://example.com/mcp", "Authorization: Bearer ${UNCLOSED"),
        ("https://example.com/mcp?team=blue&api_key=abc123", AUTHORIZATION),  # a key in the URL
        ("https://example.com/mcp?accessToken=abc123", AUTHORIZATION),
        ("https://${HOST}/mcp?api_key=${K}", AUTHORIZATION),  # a reference outside the query
        ("https://example.com/mcp?api_key=${keyring:a}abc123", AUTHORIZATION),  # half a secret
        ("https://example.com/mcp?team=blue;api_key=abc123", AUTHORIZATION),  # ';' separates
        ("https://example.com/mcp?api%5Fkey=abc123", AUTHORIZATION),  # a name percent-escaped
    ],
    ids=[
        "http-beyond-loopback",
        "password-in-url",
        "ftp",
        "literal-bearer",
        "literal-api-key",
        "own-header",
        "bad-name",
        "bad-variable",
        "bad-secret-name",
        "unclosed",
        "literal-query-key",
        "literal-query-token",
        "reference-in-host",
        "reference-and-literal",
        "semicolon-separated",
        "escaped-name",
    ],
)
def test_a_bad_url_or_header_is_refused_by_name_and_the_file_kept(
    rig: Rig, url: str, header: str
) -> None:
    add(rig, "https://example.com/mcp")
    before = (rig.home / "config.toml").read_bytes()
    done = rig.signoff("servers", "add", "other", "--url", url, "--header", header, check=False)
    assert done.returncode == 2 and "[RemoteConfigRefused]" in done.stderr, done.stderr
    assert "abc123" not in done.stderr
    assert (rig.home / "config.toml").read_bytes() == before


def test_a_server_has_a_command_or_a_url_and_auth_is_reserved_for_oauth(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[servers.a]\nurl = "https://example.com/mcp"\ncommand = "x"\n')
    with pytest.raises(RemoteConfigRefused, match="command or a url"):
        load(path)
    path.write_text('[servers.a]\nurl = "https://example.com/mcp"\n[servers.a.auth]\nx = 1\n')
    with pytest.raises(RemoteConfigRefused, match="OAuth"):
        load(path)
    path.write_text("")
    config = add_remote(path, "a", "https://localhost/mcp", {"X-Team": "blue"})
    assert config.servers["a"].url == "https://localhost/mcp" and not config.servers["a"].command
    renamed = edit_server(path, "a", command="", args=(), env=(), new_name="b")  # servers rename
    assert renamed.servers["b"].url == "https://localhost/mcp"
    assert renamed.servers["b"].headers == {"X-Team": "blue"}
    with pytest.raises(ConfigError):
        edit_server(path, "b", command="", args=(), env=(), new_name="bad name")


def test_event_streams_are_read_as_the_bytes_sent_whatever_the_line_ends() -> None:
    reader = EventReader(64)
    stream = b'event: message\r\ndata: {"a":1}\r\n\r\n: a comment\ndata: {"b":\ndata: 2}\n\n'
    stream += b"id: 3\rdata:{}\r\r\n"  # CR alone, then CR LF
    events = [e for i in range(len(stream)) for e in reader.feed(stream[i : i + 1])]
    assert events == [b'{"a":1}', b'{"b":\n2}', b"{}"]
    [long, after] = EventReader(10).feed(b"data: " + b"x" * 5000 + b"\n\ndata: ok\n\n")
    assert isinstance(long, LongLine) and long.size >= 5000 and after == b"ok"


KEY = "SEKRET123"  # a key the host wrote into a URL: what no file or message may hold


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_key_in_a_hosts_url_is_moved_to_the_keyring_sent_to_the_server_and_shown_nowhere(
    rig: Rig, remote: Remote, tmp_path: Path
) -> None:
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    url = remote.start(REMOTE_API_KEY=KEY)  # it answers only a URL carrying api_key=KEY
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}/mcp"  # nothing listens there
    hostfile = tmp_path / "mcp.json"
    hostfile.write_text(json.dumps({"mcpServers": {
        "notes": {"url": f"{url}?api_key={KEY}"},
        "gone": {"url": f"{dead}?team=blue&API-Key={KEY}"},
    }}))  # fmt: skip
    said = [rig.signoff("hosts", "import", "cursor", "--file", str(hostfile))]
    servers = tomllib.loads((rig.home / "config.toml").read_text())["servers"]
    assert servers["notes"]["url"] == url + "?api_key=${keyring:notes-api_key}"
    assert servers["gone"]["url"] == dead + "?team=blue&API-Key=${keyring:gone-api-key}"
    rig.pin("notes")  # the server answered: it was sent the key, read from the keyring
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    said.append(rig.signoff("pin", "gone", check=False))
    assert "[UpstreamUnreachable]" in said[-1].stderr, said[-1].stderr
    got: list[str] = []

    async def scenario() -> None:
        async with rig.client("notes") as host:
            read = await host.call_tool("read_note", {})
            assert not read.is_error and text(read) == "first\n"
        async with rig.client("gone") as host:
            assert {t.name for t in (await host.list_tools()).tools} == {"signoff_status"}
            for tool in ("signoff_status", "read_note"):
                got.append(text(await host.call_tool(tool, {})))

    anyio.run(scenario)
    assert any("cannot be reached at" in message for message in got), got  # and why
    for command in (("servers", "list", "--json"), ("export",), ("verify",)):
        said.append(rig.signoff(*command))
    for done in said:
        assert KEY not in done.stdout + done.stderr, done.args
    assert all(KEY not in message for message in got), got
    for path in rig.home.rglob("*"):  # config.toml, the store, the logs, the status files
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_url_is_shown_with_its_credentials_hidden_and_its_references_kept() -> None:
    shown = remote_config.shown
    assert shown("https://a.example/mcp?team=blue&api_key=k1&apiKey=k2&X-Amz-Signature=k3") == (
        "https://a.example/mcp?team=blue&api_key=***&apiKey=***&X-Amz-Signature=***"
    )
    assert shown("https://me:pw@a.example/mcp?access_token=k#k") == (
        "https://***@a.example/mcp?access_token=***#***"
    )
    kept = "https://a.example/mcp?key=${keyring:a-key}&token=${T}&keyword=cats&author=me"
    assert shown(kept) == kept  # references are names, not values; these words are no keys
    assert shown("not a url?sig=k") == "not a url?sig=***"
    assert shown("https://a.example/mcp?a=1;api_key=k1&%6Bey=k2") == (
        "https://a.example/mcp?a=1;api_key=***&%6Bey=***"  # ';' separates; names decoded
    )


@pytest.mark.guarantee("G-REMOTE-1")
def test_a_keyring_secret_read_into_any_query_value_is_hidden_in_log_lines(
    tmp_path: Path,
) -> None:
    """Whatever its parameter's name, a value read from the keyring into the URL is a secret:
    the HTTP library's own log line quoting the URL as sent shows it nowhere."""
    path = tmp_path / "config.toml"
    path.write_text('[servers.a]\nurl = "https://a.example/mcp?x=${keyring:a-x}"\n')
    server = load(path).servers["a"]
    sent = remote_config.resolve_url(server, secret=lambda name: "from the/keyring")
    assert sent == "https://a.example/mcp?x=from%20the/keyring"
    record = logging.LogRecord("httpx", logging.INFO, "", 0, 'HTTP Request: POST %s "200"',
                               (sent,), None)  # fmt: skip
    remote_config.ShownInLogs().filter(record)
    assert "keyring" not in record.getMessage() and "***" in record.getMessage()
