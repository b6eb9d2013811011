"""What `signoff proxy` offers the host (core/proxy/offered.py, core/proxy/pins.py rule 4): the
tools as the host is shown them, in-process, then end to end: the installed command between the
mcp SDK's client and the scriptable fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.proxy.config import ServerConfig, ToolConfig
from core.proxy.offered import Offered
from core.proxy.pins import ListedTool, Listing, read_listing
from core.tools import SideEffect
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

TIMEOUT = 30  # seconds for the proxy session, start to close

STATUS = {
    "name": "signoff_status",
    "description": "Lists the requests this host made that wait for the operator's decision,"
    " with their approval ids. Read-only.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "mode": {}, "force": {}},
          "required": ["path", "mode"]}  # fmt: skip
OUTPUT = {"type": "object", "properties": {"size": {"type": "integer"}}}
# Every member a tool may have, in an order of the server's own choosing.
FULL = {
    "_meta": {"ui": {"resourceUri": "ui://write"}},
    "icons": [{"src": "https://example.com/write.png"}],
    "execution": {"taskSupport": "optional"},
    "annotations": {"destructiveHint": False, "title": "Write"},
    "outputSchema": OUTPUT,
    "inputSchema": SCHEMA,
    "description": "Writes a file.",
    "title": "Write a file",
    "name": "write",
}


def listed(*tools: dict[str, Any]) -> dict[str, ListedTool]:
    line = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": list(tools)}})
    return {t.name: t for t in read_listing([line.encode()]).tools}


def offered(tools: dict[str, ListedTool], **configured: ToolConfig) -> Offered:
    server = ServerConfig("files", "true", tools=configured)
    offer = Offered(["files"], {"files": server})
    offer.expose({"files": Listing(tuple(tools.values()), (), "")})
    return offer


def pinned(tool: ListedTool, **settings: Any) -> ToolConfig:
    return ToolConfig(SideEffect.LOCAL_MUTATION, pin=tool.pin, **settings)


@pytest.mark.guarantee("G-PROXY-2")
def test_each_member_is_shown_as_sent_in_order_and_icons_never() -> None:
    tools = listed(FULL)
    offer = offered(tools, write=pinned(tools["write"]))
    status, write = offer.listing()
    assert status == STATUS
    assert list(write) == ["name", "title", "description", "inputSchema", "outputSchema",
                           "annotations", "execution", "_meta"]  # fmt: skip
    assert write == {key: FULL[key] for key in write}
    assert offer.exposed["write"].declares_output_schema


def test_a_member_not_sent_is_not_shown() -> None:
    bare = {"name": "write", "inputSchema": SCHEMA}
    tools = listed(bare)
    assert offered(tools, write=pinned(tools["write"])).listing()[1] == bare
    nulls = {**bare, "title": None, "description": None, "outputSchema": None, "_meta": None}
    tools = listed(nulls)
    offer = offered(tools, write=pinned(tools["write"]))
    assert offer.listing()[1] == bare
    assert not offer.exposed["write"].declares_output_schema
    empty = {**bare, "description": "", "annotations": {}}  # sent, though empty: shown
    tools = listed(empty)
    assert offered(tools, write=pinned(tools["write"])).listing()[1] == empty


def test_fixed_and_denied_parameters_are_removed_from_the_schema_shown() -> None:
    tools = listed(FULL)
    offer = offered(tools, write=pinned(tools["write"], fixed={"mode": "0644"}, deny=("force",)))
    shown = offer.listing()[1]
    assert shown["inputSchema"] == {"type": "object", "properties": {"path": {"type": "string"}},
                                    "required": ["path"]}  # fmt: skip
    assert shown["outputSchema"] == OUTPUT


@pytest.mark.guarantee("G-PROXY-2")
def test_a_tool_pinned_over_its_short_text_is_shown_without_title_or_output_schema() -> None:
    short = listed({key: FULL[key] for key in ("name", "description", "inputSchema")})["write"]
    tools = listed(FULL)
    offer = offered(tools, write=pinned(short))
    shown = offer.listing()[1]
    assert "title" not in shown and "outputSchema" not in shown
    assert list(shown) == ["name", "description", "inputSchema", "annotations", "execution",
                           "_meta"]  # fmt: skip
    assert not offer.exposed["write"].declares_output_schema


def test_a_restart_withdraws_a_changed_output_schema_and_keeps_a_short_pinned_tool() -> None:
    short = listed({key: FULL[key] for key in ("name", "description", "inputSchema")})["write"]
    other = {**FULL, "name": "other"}
    start = listed(FULL, other)
    offer = offered(start, write=pinned(short), other=pinned(start["other"]))
    retitled = {**FULL, "title": "Write anything"}  # not shown: its pin does not cover it
    wider = {**other, "outputSchema": {"type": "object"}}
    line = {"jsonrpc": "2.0", "id": 3, "result": {"tools": [retitled, wider]}}
    listing = read_listing([json.dumps(line).encode()])
    assert offer.withdraw("files", listing, "write") == ""
    assert set(offer.exposed) == {"write"}
    assert "other changed since it was pinned" in offer.refused["other"]


def test_the_set_taken_again_says_whether_the_host_s_listing_changed() -> None:
    tools = listed(FULL, {**FULL, "name": "other"})
    offer = offered(tools, write=pinned(tools["write"]))
    listings = {"files": Listing(tuple(tools.values()), (), "")}
    server = offer.configured["files"]
    assert set(offer.exposed) == {"write"}
    assert not offer.retake({"files": server}, listings)  # the same: nothing to tell
    # Only the class changed: the gate must take it up, the host is shown the same.
    reclassed = {"write": ToolConfig(SideEffect.DESTRUCTIVE, pin=tools["write"].pin)}
    assert not offer.retake({"files": ServerConfig("files", "true", tools=reclassed)}, listings)
    assert offer.exposed["write"].state.side_effect is SideEffect.DESTRUCTIVE
    both = {**reclassed, "other": pinned(tools["other"])}
    assert offer.retake({"files": ServerConfig("files", "true", tools=both)}, listings)
    assert set(offer.exposed) == {"write", "other"}
    assert offer.retake({}, listings)  # a server no longer configured offers nothing
    assert offer.exposed == {}


@pytest.mark.guarantee("G-PROXY-2")
def test_a_pinned_tool_nobody_classified_is_not_offered_and_a_call_of_it_is_refused(
    home: Path,
) -> None:
    notes = home / "notes.txt"
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes))
    pinned = {row["tool"]: row for row in rig.pin("notes")["tools"]}
    assert {tool: row["status"] for tool, row in pinned.items()} == {
        "read_note": "pinned",
        "write_note": "pinned",
    }
    rig.classify("notes", read_note="read_only")  # write_note: pinned, never classified
    notes.write_text("kept\n")

    async def scenario() -> None:
        with anyio.fail_after(TIMEOUT):
            async with rig.client("notes") as host:
                offered = [tool.name for tool in (await host.list_tools()).tools]
                assert offered == ["signoff_status", "read_note"]
                refused = await host.call_tool("write_note", {"text": "unclassified"})
                assert refused.is_error
                assert text(refused) == (
                    "Signoff: write_note is not available: not classified: run `signoff classify`"
                )
                read = await host.call_tool("read_note", {})
                assert not read.is_error and text(read) == "kept\n"  # the other tool works

    anyio.run(scenario)
    assert notes.read_text() == "kept\n"  # the refused call never reached the server
    with rig.store() as store, store.snapshot() as conn:
        tools = [row[0] for row in conn.execute("SELECT tool FROM runs ORDER BY created_at")]
    assert tools == ["read_note"]  # no run was even begun for it
