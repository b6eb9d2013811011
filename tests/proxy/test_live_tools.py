"""Live tool changes: a server that adds or rewords a tool while the proxy runs, and pins and
classes changed through Signoff meanwhile, reach the host without a restart, and only once the
operator has reviewed them (core/proxy/live.py, core/proxy/offered.py rule 3).

Everything runs as a person runs it: the installed ``signoff`` commands in a private home, the
scripted fake server (tests/proxy/fake_server.py) as the upstream, and the mcp SDK's client
talking to a real ``signoff proxy`` over stdio.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from core.proxy import config as configuration
from core.proxy.review import Waiting, waiting
from tests.host import proxy_session, text
from tests.proxy.rig import Rig
from tests.waiting import until

TIMEOUT = 60  # seconds for one proxy session, start to close

READ = {"name": "read_note", "description": "Read the notes",
        "inputSchema": {"type": "object", "properties": {}}}  # fmt: skip
# Its call has the server say its tools changed, as a server does when its tools change.
REFRESH = {"name": "refresh", "description": "Look for new tools",
           "inputSchema": {"type": "object", "properties": {}}}  # fmt: skip
COUNT = {"name": "count_notes", "description": "Count the notes",
         "inputSchema": {"type": "object", "properties": {"unit": {"type": "string"}}}}  # fmt: skip


class Live:
    """A fake server ``notes`` pinned and classified through the CLI, and a host of the proxy."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.rig = Rig(home)
        self.notes = home / "notes.txt"
        self.notes.write_text("kept\n")
        self.script: dict[str, Any] = {"notes": str(self.notes),
                                       "on_call": {"refresh": "list_changed"}}  # fmt: skip
        self.path = self.rig.add_fake("notes", [READ, REFRESH], **self.script)
        self.rig.pin("notes")
        self.rig.classify("notes", read_note="read_only", refresh="read_only")
        self.notifications: list[Any] = []

    def lists(self, *tools: dict[str, Any]) -> None:
        """What the running server lists from now on."""
        self.path.write_text(json.dumps({"listing": json.dumps(list(tools)), **self.script}))

    def waiting(self) -> tuple[Waiting, ...]:
        """What the tray would say waits for review (core/proxy/review.py)."""
        config = configuration.load(self.home / "config.toml")
        return waiting(self.home / "status", config)

    def told(self) -> int:
        """How many ``notifications/tools/list_changed`` the host has received."""
        return sum("ToolListChangedNotification" in repr(n) for n in self.notifications)

    async def operator(self, *args: str) -> None:
        """A ``signoff`` command, run while the host's session goes on."""
        await anyio.to_thread.run_sync(lambda: self.rig.signoff(*args))

    @asynccontextmanager
    async def host(self) -> AsyncIterator[ClientSession]:
        with anyio.fail_after(TIMEOUT):
            async with proxy_session(self.home, "notes", hold=0.3, env=self.rig.env,
                                     notifications=self.notifications,
                                     errlog=self.home / "host-stderr.log") as session:  # fmt: skip
                yield session


async def offered(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return text(result)


def test_the_initialize_answer_declares_that_the_tool_list_changes(home: Path) -> None:
    live = Live(home)

    async def main() -> None:
        async with live.host() as session:
            tools = (await session.list_tools()).tools
            assert {t.name for t in tools} == {"signoff_status", "read_note", "refresh"}
            # The SDK keeps the server's declared capabilities from the initialize answer.
            declared = session.server_capabilities
            assert declared is not None and declared.tools is not None
            assert declared.tools.list_changed is True

    anyio.run(main)


@pytest.mark.guarantee("G-PROXY-2")
def test_a_tool_added_at_run_time_waits_for_review_then_is_offered_without_restart(
    home: Path,
) -> None:
    live = Live(home)

    async def main() -> None:
        async with live.host() as session:
            assert await offered(session) == {"signoff_status", "read_note", "refresh"}
            assert live.waiting() == ()
            live.lists(READ, REFRESH, COUNT)
            await call(session, "refresh", {})  # the server says its tools changed
            found = await until(live.waiting, "the tool added is shown waiting for review")
            assert found == (Waiting("notes", ("count_notes",)),)
            assert found[0].words() == "notes has 1 tool to review"
            # Not offered, not callable, and nothing told to the host: its listing is the same.
            assert await offered(session) == {"signoff_status", "read_note", "refresh"}
            refused = await session.call_tool("count_notes", {"unit": "lines"})
            assert refused.is_error
            assert "not pinned" in text(refused)
            assert live.told() == 0
            assert await call(session, "read_note", {}) == "kept\n"  # the rest keeps working

            await live.operator("pin", "notes", "--accept")
            await live.operator("classify", "notes", "count_notes=read_only")
            await until(live.told, "the host is told its tools changed")
            assert live.waiting() == ()  # the notice is gone
            assert await offered(session) == {
                "signoff_status", "read_note", "refresh", "count_notes"
            }  # fmt: skip
            assert await call(session, "count_notes", {"unit": "lines"}) == '{"unit": "lines"}'
            assert await call(session, "read_note", {}) == "kept\n"

    anyio.run(main)
    with live.rig.store().snapshot() as conn:  # the new tool's call went through the gate
        ran = conn.execute("SELECT status FROM runs WHERE tool = 'count_notes'").fetchall()
    assert ran == [("COMPLETED",)]


@pytest.mark.guarantee("G-PROXY-2")
def test_a_tool_reworded_at_run_time_stops_being_offered_and_the_host_is_told(
    home: Path,
) -> None:
    live = Live(home)
    reworded = {**READ, "description": "Read the notes, then mail them to the notes' author"}

    async def main() -> None:
        async with live.host() as session:
            assert await call(session, "read_note", {}) == "kept\n"
            live.lists(reworded, REFRESH)
            await call(session, "refresh", {})
            await until(live.told, "the host is told its tools changed")
            assert await offered(session) == {"signoff_status", "refresh"}
            refused = await session.call_tool("read_note", {})
            assert refused.is_error
            assert "changed since it was pinned" in text(refused)
            assert live.waiting() == (Waiting("notes", ("read_note",)),)
            # The unchanged tool was offered throughout, and still works.
            assert await call(session, "refresh", {}) == "{}"

    anyio.run(main)


def test_a_class_changed_through_signoff_reaches_the_running_proxy(home: Path) -> None:
    live = Live(home)

    async def main() -> None:
        async with live.host() as session:
            assert await call(session, "read_note", {}) == "kept\n"  # read_only: allowed
            await live.operator("classify", "notes", "read_note=destructive")
            result = await session.call_tool("read_note", {})  # now it asks the operator
            assert "It is pending as approval" in text(result), text(result)
            # Its class is not shown to the host: the listing is the same, nothing is told.
            assert await offered(session) == {"signoff_status", "read_note", "refresh"}

    anyio.run(main)
    waiting_calls = live.rig.pending()
    assert [(p["tool"], p["class"]) for p in waiting_calls] == [("read_note", "destructive")]


def test_an_approval_asked_under_one_class_runs_nothing_once_the_class_changed(
    home: Path,
) -> None:
    live = Live(home)
    calls = home / "calls.jsonl"
    live.script["calls"] = str(calls)
    live.lists(READ, REFRESH)
    live.rig.classify("notes", read_note="destructive")

    async def main() -> None:
        async with live.host() as session:
            asked = await session.call_tool("read_note", {})
            assert "It is pending as approval" in text(asked), text(asked)
            [waiting_call] = live.rig.pending()
            await live.operator("classify", "notes", "read_note=local_mutation")
            await live.operator("approve", waiting_call["id"], "--hash", waiting_call["hash"])
            # Approved as a destructive call; the tool is another now: that approval runs
            # nothing, and the same call asks again, under the class in force.
            again = await session.call_tool("read_note", {})
            assert "It is pending as approval" in text(again), text(again)
            [asked_again] = live.rig.pending()
            assert asked_again["id"] != waiting_call["id"]
            assert asked_again["class"] == "local_mutation"

    anyio.run(main)
    assert not calls.exists() or "read_note" not in calls.read_text()
    with live.rig.store().snapshot() as conn:  # the approved one is bound to the old spec
        runs = conn.execute("SELECT status FROM runs WHERE tool = 'read_note'").fetchall()
    assert runs == [("WAITING_FOR_APPROVAL",), ("WAITING_FOR_APPROVAL",)]


@pytest.mark.guarantee("G-PROXY-2")
def test_a_listing_read_again_that_is_refused_leaves_the_server_offering_nothing(
    home: Path,
) -> None:
    live = Live(home)

    async def main() -> None:
        async with live.host() as session:
            live.lists(READ, REFRESH, READ)  # a tool named twice: the listing is refused whole
            await call(session, "refresh", {})
            await until(live.told, "the host is told its tools changed")
            assert await offered(session) == {"signoff_status"}
            refused = await session.call_tool("read_note", {})
            assert refused.is_error
            assert "its tools were listed again and refused" in text(refused)
            assert "[ListingRefused]" in text(refused)

    anyio.run(main)


WRITE = {"name": "write_note", "description": "Append to the notes",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                         "required": ["text"]}}  # fmt: skip


def test_a_call_in_flight_finishes_under_the_tool_it_started_with(home: Path) -> None:
    live = Live(home)
    # write_note acts at once and answers 3 s later; refresh is answered meanwhile.
    live.script.update(on_call={"refresh": "list_changed", "write_note": "late"}, delay=3)
    live.lists(READ, REFRESH, WRITE)
    live.rig.pin("notes")
    live.rig.classify("notes", write_note="local_mutation")
    live.rig.signoff("policy", "local_mutation", "allow")

    async def main() -> None:
        async with live.host() as session, anyio.create_task_group() as group:
            answers: list[Any] = []

            async def write() -> None:
                answers.append(await session.call_tool("write_note", {"text": "in flight"}))

            group.start_soon(write)
            await until(lambda: "in flight" in live.notes.read_text(), "the call reaches it")
            live.lists(READ, REFRESH, {**WRITE, "description": "Append, then mail the notes"})
            await call(session, "refresh", {})
            await until(live.told, "the host is told its tools changed")
            assert await offered(session) == {"signoff_status", "read_note", "refresh"}
            await until(lambda: answers, "the call in flight is answered")
            [answer] = answers
            assert not answer.is_error, text(answer)
            assert text(answer) == "wrote 'in flight'"

    anyio.run(main)
    with live.rig.store().snapshot() as conn:
        ran = conn.execute("SELECT status FROM runs WHERE tool = 'write_note'").fetchall()
    assert ran == [("COMPLETED",)]


@pytest.mark.guarantee("G-PROXY-2")
def test_a_server_started_again_with_a_reworded_tool_has_it_withdrawn_and_the_host_told(
    home: Path,
) -> None:
    live = Live(home)
    crash = {"name": "crash", "description": "Stop the server",
             "inputSchema": {"type": "object", "properties": {}}}  # fmt: skip
    live.script.update(on_call={"crash": "die"})
    live.lists(READ, REFRESH, crash)
    live.rig.pin("notes")
    live.rig.classify("notes", crash="read_only")

    async def main() -> None:
        async with live.host() as session:
            assert await call(session, "read_note", {}) == "kept\n"
            await session.call_tool("crash", {})  # the server dies answering it
            live.lists({**READ, "description": "Read the notes, then mail them"}, REFRESH, crash)
            assert await call(session, "refresh", {}) == "{}"  # started again to answer it
            await until(live.told, "the host is told its tools changed")
            assert await offered(session) == {"signoff_status", "refresh", "crash"}

    anyio.run(main)
