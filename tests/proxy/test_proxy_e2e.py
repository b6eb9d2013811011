"""End to end: `signoff proxy` between the mcp SDK's client and real third-party servers.

Guarantee G-PROXY-1: through the proxy a read-only call flows; a write waits for approval,
and the re-call after `signoff approve` performs it exactly once; a rejected call never runs;
an identical write within the window waits as a duplicate; the chain verifies afterwards.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest

from core.verify import verify
from tests.conftest import SIGNOFF
from tests.host import KEYRING_VARIABLES, text
from tests.mcp_servers import (
    everything_server,
    filesystem_server,
    git_server,
    inspector_cli,
    memory_server,
    time_server,
)
from tests.proxy.rig import NOTES_TOOLS, Rig


@pytest.fixture
def rig(home: Path) -> Rig:
    return Rig(home)


@pytest.mark.guarantee("G-PROXY-1")
def test_through_the_proxy_a_write_runs_once_after_approval_and_its_repeat_waits_as_a_duplicate(
    rig: Rig, tmp_path: Path
) -> None:
    """The path of the real-server test below, before the scriptable fake server: it needs no
    third-party install, so it runs wherever the tests do, and first (a mutation's copy of the
    tree, tests/test_mutations.py, has no .cache, where the real servers are installed)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("first\n")
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    once = {"text": "once"}

    async def scenario() -> None:
        async with rig.client("notes") as host:
            read = await host.call_tool("read_note", {})
            assert not read.is_error and text(read) == "first\n"  # a read flows, unasked

            first = await host.call_tool("write_note", once)
            assert not first.is_error and "needs the operator's approval" in text(first)
            [waiting] = rig.pending()
            assert (waiting["tool"], waiting["kind"], waiting["arguments"]) == (
                "write_note", "local_mutation", once,
            )  # fmt: skip
            assert notes.read_text() == "first\n"
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            done = await host.call_tool("write_note", once)
            assert not done.is_error and text(done) == "wrote 'once'"
            assert notes.read_text() == "first\nonce\n"

            # The same write again, within the window: it waits as a duplicate, even though
            # the last one was approved; rejected, it runs nothing.
            again = await host.call_tool("write_note", once)
            assert "pending" in text(again)
            [duplicate] = rig.pending()
            assert (duplicate["kind"], duplicate["arguments"]) == ("duplicate", once)
            rig.signoff("reject", duplicate["id"], "--reason", "already written")
            refused = await host.call_tool("write_note", once)
            assert refused.is_error and "already written" in text(refused)
            assert notes.read_text() == "first\nonce\n"

    anyio.run(scenario)
    assert notes.read_text() == "first\nonce\n"  # written exactly once
    with rig.store() as store:
        assert verify(store).head.seq > 0
        statuses = store._conn.execute(
            "SELECT tool, status, end_reason FROM runs ORDER BY created_at"
        ).fetchall()
    assert statuses == [
        ("read_note", "COMPLETED", "completed"),
        ("write_note", "COMPLETED", "completed"),
        ("write_note", "CANCELLED", "rejected"),
    ]


def _filesystem(rig: Rig, tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "hello.txt").write_text("hello\n")
    command = filesystem_server(shared)
    rig.add("fs", command.command, command.args, command.env_extra)
    rig.pin("fs")
    rig.classify("fs", list_directory="read_only", read_text_file="read_only",
                 write_file="destructive")  # fmt: skip
    return shared


@pytest.mark.guarantee("G-PROXY-1")
def test_a_real_filesystem_server_through_the_proxy(rig: Rig, tmp_path: Path) -> None:
    shared = _filesystem(rig, tmp_path)
    target = str(shared / "out.txt")

    async def scenario() -> None:
        async with rig.client("fs") as host:
            tools = {t.name: t for t in (await host.list_tools()).tools}
            assert set(tools) == {"signoff_status", "list_directory", "read_text_file",
                                  "write_file"}  # fmt: skip
            # A tool with an output schema is told "pending" as an error: a host checks a
            # result's structuredContent against the schema unless it is one.
            pending_is_error = tools["write_file"].output_schema is not None
            listing = await host.call_tool("list_directory", {"path": str(shared)})
            assert not listing.is_error and "hello.txt" in text(listing)

            args = {"path": target, "content": "written once\n"}
            first = await host.call_tool("write_file", args)
            assert first.is_error is pending_is_error and "pending" in text(first)
            assert not Path(target).exists()
            again = await host.call_tool("write_file", args)
            assert "pending" in text(again) and not Path(target).exists()

            [waiting] = rig.pending()
            assert (waiting["server"], waiting["tool"], waiting["class"]) == (
                "fs", "write_file", "destructive",
            )  # fmt: skip
            assert waiting["arguments"] == args and len(waiting["hash"]) == 64
            rig.signoff("approve", waiting["id"], "--reason", "expected", "--hash",
                        waiting["hash"])  # fmt: skip
            done = await host.call_tool("write_file", args)
            assert not done.is_error, text(done)
            assert Path(target).read_text() == "written once\n"

            # The same write again: it waits as a duplicate, and its rejection runs nothing.
            Path(target).write_text("changed by someone\n")
            duplicate = await host.call_tool("write_file", args)
            assert "pending" in text(duplicate)
            [dup] = rig.pending()
            assert dup["kind"] == "duplicate"
            rig.signoff("reject", dup["id"], "--reason", "already written")
            rejected = await host.call_tool("write_file", args)
            assert rejected.is_error and "already written" in text(rejected)
            assert Path(target).read_text() == "changed by someone\n"

            other = {"path": str(shared / "never.txt"), "content": "no"}
            assert "pending" in text(await host.call_tool("write_file", other))
            [never] = rig.pending()
            rig.signoff("reject", never["id"])
            refused = await host.call_tool("write_file", other)
            assert refused.is_error and "rejected" in text(refused)
            assert not (shared / "never.txt").exists()

    anyio.run(scenario)
    with rig.store() as store:
        assert verify(store).head.seq > 0
        statuses = store._conn.execute(
            "SELECT status, end_reason FROM runs ORDER BY created_at"
        ).fetchall()
    assert ("COMPLETED", "completed") in statuses
    assert statuses.count(("CANCELLED", "rejected")) == 2


def test_an_approval_given_within_the_hold_returns_the_result_in_the_same_call(
    rig: Rig, tmp_path: Path
) -> None:
    rig.add_fake("notes", NOTES_TOOLS, notes=str(tmp_path / "notes.txt"))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    approved: list[str] = []

    def operator() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            waiting = rig.pending()
            if waiting:
                rig.signoff("approve", waiting[0]["id"])
                approved.append(waiting[0]["id"])
                return
            time.sleep(0.05)

    async def scenario() -> None:
        async with rig.client("notes", hold=30) as host:
            thread = threading.Thread(target=operator)
            thread.start()
            result = await host.call_tool("write_note", {"text": "held"})
            thread.join()
            assert not result.is_error and "wrote 'held'" in text(result)

    anyio.run(scenario)
    assert approved
    assert (tmp_path / "notes.txt").read_text() == "held\n"


@pytest.mark.guarantee("G-PROXY-2")
def test_fixed_and_denied_parameters(rig: Rig, tmp_path: Path) -> None:
    tools = [{"name": "echo", "description": "Echo the arguments", "inputSchema": {
        "type": "object", "required": ["text", "mode"],
        "properties": {"text": {"type": "string"}, "mode": {"type": "string"},
                       "force": {"type": "boolean"}}}}]  # fmt: skip
    rig.add_fake("echo", tools)
    rig.pin("echo")
    rig.classify("echo", echo="read_only")
    rig.signoff("tool", "echo", "echo", "--fix", 'mode="safe"', "--deny", "force")

    async def scenario() -> None:
        async with rig.client("echo") as host:
            [tool] = [t for t in (await host.list_tools()).tools if t.name == "echo"]
            assert set(tool.input_schema["properties"]) == {"text"}
            assert tool.input_schema["required"] == ["text"]
            ok = await host.call_tool("echo", {"text": "hi"})
            assert json.loads(text(ok)) == {"text": "hi", "mode": "safe"}
            for bad in ({"text": "hi", "mode": "unsafe"}, {"text": "hi", "force": True}):
                refused = await host.call_tool("echo", bad)
                assert refused.is_error and "invalid_decision" not in text(refused)
                assert "schema" in text(refused)
            # Another spelling of a fixed or denied name reaches nothing either: a server that
            # reads its parameters loosely would take "Mode" over the operator's "mode".
            wide = "\uff2d\uff4f\uff44\uff45"  # "Mode" in fullwidth letters
            for variant, name in (("Mode", "mode"), ("MODE", "mode"), ("FORCE", "force"),
                                  ("for_ce", "force"), (wide, "mode"),
                                  ("fo\u200brce", "force"), ("Mo de", "mode")):  # fmt: skip
                refused = await host.call_tool("echo", {"text": "hi", variant: "x"})
                assert refused.is_error, variant
                assert f"the parameter {name!r} is set or denied" in text(refused), variant
                assert variant in text(refused)

    anyio.run(scenario)
    with rig.store() as store:
        started = store._conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()
    assert started == (1,)  # only the allowed call reached the server


@pytest.mark.guarantee("G-APP-1")
def test_pending_shows_the_fixed_values_apart_and_the_server_receives_exactly_both(
    rig: Rig,
) -> None:
    """``signoff pending`` shows what the server will receive: the model's arguments (the
    request hashed) and, beside them, the values Signoff sets; approved, the server gets
    exactly the two together."""
    tools = [{"name": "post", "description": "Post a message", "inputSchema": {
        "type": "object", "required": ["text"],
        "properties": {"text": {"type": "string"}, "account": {"type": "string"},
                       "dryRun": {"type": "boolean"}}}}]  # fmt: skip
    rig.add_fake("chat", tools)
    rig.pin("chat")
    rig.classify("chat", post="remote_mutation")
    rig.signoff("tool", "chat", "post", "--fix", "account=ops", "--fix", "dryRun=false")

    async def scenario() -> None:
        async with rig.client("chat") as host:
            first = await host.call_tool("post", {"text": "hi"})
            assert "needs the operator's approval" in text(first)
            [waiting] = rig.pending()
            assert waiting["arguments"] == {"text": "hi"}  # the model's, as hashed
            assert waiting["fixed"] == {"account": "ops", "dryRun": False}
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            done = await host.call_tool("post", {"text": "hi"})
            assert not done.is_error
            received = json.loads(text(done))  # the fake server echoes what it received
            assert received == {**waiting["arguments"], **waiting["fixed"]}

    anyio.run(scenario)


def test_several_servers_are_prefixed_and_a_status_tool_lists_what_waits(
    rig: Rig, tmp_path: Path
) -> None:
    command = time_server()
    rig.add("clock", command.command, command.args)
    rig.pin("clock")
    rig.classify("clock", get_current_time="read_only", convert_time="read_only")
    memory = memory_server(tmp_path / "memory.jsonl")
    rig.add("mem", memory.command, memory.args, memory.env_extra)
    rig.pin("mem")
    rig.classify("mem", read_graph="read_only", create_entities="local_mutation")

    async def scenario() -> None:
        async with rig.client("clock", "mem") as host:
            names = {t.name for t in (await host.list_tools()).tools}
            assert {"clock__get_current_time", "mem__read_graph", "mem__create_entities",
                    "signoff_status"} <= names  # fmt: skip
            now = await host.call_tool("clock__get_current_time", {"timezone": "UTC"})
            assert not now.is_error and "UTC" in text(now)
            entity = {"entities": [{"name": "n", "entityType": "t", "observations": ["o"]}]}
            assert "pending" in text(await host.call_tool("mem__create_entities", entity))
            status = text(await host.call_tool("signoff_status", {}))
            assert "mem/create_entities" in status

    anyio.run(scenario)


def test_the_mcp_inspector_cli_lists_and_calls_through_the_proxy(rig: Rig, tmp_path: Path) -> None:
    shared = _filesystem(rig, tmp_path)
    # The Inspector starts the server with an environment of its own: name SIGNOFF_HOME, and
    # this session's keyring (a desktop's is found at the session bus's standard place; the
    # test's private bus is not there).
    keyring = [f for k in KEYRING_VARIABLES if k in rig.env for f in ("-e", f"{k}={rig.env[k]}")]
    base = [*inspector_cli(), "--format", "json", "--quiet", "-e", f"SIGNOFF_HOME={rig.home}",
            *keyring]  # fmt: skip
    proxy = [str(SIGNOFF), "proxy", "fs"]
    env = {**rig.env, "HOME": str(tmp_path)}
    listed = subprocess.run([*base, "--method", "tools/list", *proxy], capture_output=True,
                            text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["result"]["tools"]}
    assert {"list_directory", "write_file", "signoff_status"} <= names
    called = subprocess.run(
        [*base, "--method", "tools/call", *proxy, "--tool-name", "list_directory", "--tool-arg",
         f"path={shared}"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    assert "hello.txt" in called.stdout


def test_everything_and_git_servers_through_the_proxy(rig: Rig, tmp_path: Path) -> None:
    """A tool that declares an outputSchema is shown with it, as the server listed it (decision
    0031), and answered without raising in the host; a git repository is read through the
    proxy."""
    everything = everything_server()
    rig.add("every", everything.command, everything.args, everything.env_extra)
    rig.pin("every")
    rig.classify("every", echo="read_only", **{"get-structured-content": "read_only"})
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    git = git_server(repo)
    rig.add("git", git.command, git.args, git.env_extra)
    rig.pin("git")
    rig.classify("git", git_status="read_only", git_commit="remote_mutation")

    async def scenario() -> None:
        async with rig.client("every", "git") as host:
            tools = {t.name: t for t in (await host.list_tools()).tools}
            assert tools["every__get-structured-content"].output_schema is not None
            echoed = await host.call_tool("every__echo", {"message": "through"})
            assert "through" in text(echoed)
            weather = await host.call_tool("every__get-structured-content",
                                           {"location": "Chicago"})  # fmt: skip
            assert not weather.is_error and "temperature" in text(weather)
            status = await host.call_tool("git__git_status", {"repo_path": str(repo)})
            assert not status.is_error and "branch" in text(status).lower()

    anyio.run(scenario)
