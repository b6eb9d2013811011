"""What `signoff proxy` offers the host (core/proxy/offered.py, core/proxy/pins.py rule 3), end to
end: the installed command between the mcp SDK's client and the scriptable fake server."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

TIMEOUT = 30  # seconds for the proxy session, start to close


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
