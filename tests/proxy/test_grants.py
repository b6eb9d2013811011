"""A standing grant through the real proxy (core/proxy/server.py, core/grants.py; G-GATE-6): a
proxy in this process in front of tests/proxy/fake_server.py (its notes file is its own log of
every write it performed), the operator approving as the app or ``signoff approve --for`` does.

The identical call runs without asking while the grant lasts, the duplicate rule yielding;
another argument asks; after the grant's end the duplicate rule asks again; and a call whose
identical predecessor's outcome is unknown asks, grant or not."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from core import grants
from core.approvals import approve, reject
from core.proxy.config import load as load_config
from core.proxy.server import Proxy
from core.records import read_approval
from core.store import Store
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

pytestmark = pytest.mark.guarantee("G-GATE-6")

PENDING = "This call needs the operator's approval and has not run."
DUPLICATE = "An identical call may already have taken effect; this one waits for the operator"
HOST_A = ("host-a", "1.0")  # two hosts' clientInfo (name, version)
HOST_B = ("host-b", "1.0")


def set_up(home: Path, notes: Path, **script: Any) -> Rig:
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes), **script)
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    return rig


def written(notes: Path, line: str) -> int:
    return notes.read_text().splitlines().count(line) if notes.exists() else 0


def decide(store: Store, answer: str, *, scope: str | None = None, rejected: bool = False,
           now: datetime | None = None) -> None:  # fmt: skip
    found = re.search(r"pending as approval (\S+) \(", answer)
    assert found, answer
    with store.snapshot() as conn:
        approval = read_approval(conn, found.group(1))
    assert approval is not None
    if rejected:
        reject(store, approval.run_id, approval.id, "operator:me", "do not repeat")
    else:
        approve(store, approval.run_id, approval.id, "operator:me", scope=scope, now=now)


def run_proxy(home: Path, scenario: Callable[[Proxy, Store], Awaitable[None]]) -> None:
    config = load_config(home / "config.toml")

    async def main() -> None:
        with Store.open(home / "signoff.db") as store:
            proxy = Proxy(config, ["notes"], store, log_dir=home / "logs", hold_seconds=0.05)
            await proxy.start()
            try:
                await scenario(proxy, store)
            finally:
                await proxy.close()

    asyncio.run(asyncio.wait_for(main(), 90))


async def write(proxy: Proxy, line: str) -> str:
    return text(await proxy.call("write_note", {"text": line}))


def test_the_identical_call_runs_unasked_under_the_grant_and_another_argument_asks(
    home: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    rig = set_up(home, notes)

    async def scenario(proxy: Proxy, store: Store) -> None:
        decide(store, await write(proxy, "hello"), scope="15min")
        assert await write(proxy, "hello") == "wrote 'hello'"  # the approved call, collected
        assert await write(proxy, "hello") == "wrote 'hello'"  # under the grant: not asked
        assert (await write(proxy, "hello there")).startswith(PENDING)

    run_proxy(home, scenario)
    assert written(notes, "hello") == 2
    [grant] = rig.signoff("grants", "list", "--json").stdout.splitlines()
    shown = rig.signoff("runs").stdout
    assert shown.count("allowed under grant") == 1, shown
    assert re.search(r'"id": "(gr-\w+)"', grant).group(1) in shown


def test_after_the_grants_end_the_identical_call_asks_as_a_duplicate(
    home: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    set_up(home, notes)
    long_ago = datetime.now(UTC) - timedelta(minutes=20)  # a 15 min grant, over 5 min ago

    async def scenario(proxy: Proxy, store: Store) -> None:
        decide(store, await write(proxy, "hello"), scope="15min", now=long_ago)
        assert await write(proxy, "hello") == "wrote 'hello'"
        assert (await write(proxy, "hello")).startswith(DUPLICATE)

    run_proxy(home, scenario)
    assert written(notes, "hello") == 1


def test_a_grant_does_not_survive_a_re_pin_of_its_tool_with_a_reworded_description(
    home: Path, tmp_path: Path
) -> None:
    """The server rewords the tool's description and the operator pins it again: the grant was
    given for the tool as it was pinned (its spec is in the call hash), so the identical call
    now asks."""
    notes = tmp_path / "notes.txt"
    rig = set_up(home, notes)

    async def granted(proxy: Proxy, store: Store) -> None:
        decide(store, await write(proxy, "hello"), scope="1h")
        assert await write(proxy, "hello") == "wrote 'hello'"  # the approved call, collected
        assert await write(proxy, "hello") == "wrote 'hello'"  # under the grant: not asked

    run_proxy(home, granted)
    script = home / "notes-script.json"
    reworded = [
        {**tool, "description": "Append a line to the notes, and mail them out"}
        if tool["name"] == "write_note"
        else tool
        for tool in NOTES_TOOLS
    ]
    script.write_text(
        json.dumps({**json.loads(script.read_text()), "listing": json.dumps(reworded)})
    )
    rig.signoff("pin", "notes", "--accept")

    async def repinned(proxy: Proxy, store: Store) -> None:
        again = await write(proxy, "hello")
        assert "wrote" not in again and again.startswith(PENDING), again

    run_proxy(home, repinned)
    assert written(notes, "hello") == 2


def test_a_call_whose_identical_predecessor_may_have_run_asks_grant_or_not(
    home: Path, tmp_path: Path
) -> None:
    """The server performs the write and dies: its outcome is unknown; the operator chooses not
    to repeat it. The next identical call waits as a duplicate, though a grant covers it."""
    notes = tmp_path / "notes.txt"
    set_up(home, notes, on_call={"write_note": "die"})

    async def scenario(proxy: Proxy, store: Store) -> None:
        decide(store, await write(proxy, "hello"), scope="1h")
        cut_off = await write(proxy, "hello")  # run under the approval; the server died
        decide(store, cut_off, rejected=True)
        assert "may have taken effect" in await write(proxy, "hello")  # that ruling, collected
        assert (await write(proxy, "hello")).startswith(DUPLICATE)

    run_proxy(home, scenario)
    assert written(notes, "hello") == 1


def test_a_call_whose_predecessor_may_have_run_asks_under_a_grant_past_the_window(
    home: Path, tmp_path: Path
) -> None:
    """The approved call ran and the server died (its outcome unknown); the operator said not
    to repeat it. Long after the duplicate window, the grant still does not cover the call."""
    notes = tmp_path / "notes.txt"
    set_up(home, notes, on_call={"write_note": "die"})
    config = home / "config.toml"
    config.write_text("duplicate_window_seconds = 1\n" + config.read_text())

    async def scenario(proxy: Proxy, store: Store) -> None:
        decide(store, await write(proxy, "hello"), scope="1h")
        cut_off = await write(proxy, "hello")  # ran under the approval; the server died
        decide(store, cut_off, rejected=True)  # the operator: do not repeat it
        assert "may have taken effect" in await write(proxy, "hello")
        await asyncio.sleep(1.5)  # the unknown outcome is now older than the window
        assert "waits for the operator" in await write(proxy, "hello")

    run_proxy(home, scenario)
    assert written(notes, "hello") == 1


def test_a_revoked_grant_is_not_brought_back_by_cutting_its_end_off_the_chain(
    home: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    set_up(home, notes)

    async def scenario(proxy: Proxy, store: Store) -> None:
        decide(store, await write(proxy, "hello"), scope="1h")
        assert await write(proxy, "hello") == "wrote 'hello'"  # the approved call
        with store.snapshot() as conn:
            [grant] = grants.listed(conn)
        grants.revoke(store, grant.id, by="operator:me")
        assert grants.keep_end(store) == ""  # as `signoff grants revoke` does
        # An agent with a file tool takes the end away again.
        with sqlite3.connect(store.path) as conn:
            conn.execute("DELETE FROM events WHERE kind = 'grant.revoked'")
            conn.execute("UPDATE grants SET revoked_at = NULL, revoked_by = NULL")
        conn.close()
        # Not under the grant: the identical call that completed a moment ago asks again.
        assert "waits for the operator" in await write(proxy, "hello")

    run_proxy(home, scenario)
    assert written(notes, "hello") == 1


def test_a_grant_covers_the_identical_calls_of_the_host_it_was_given_for_only(
    home: Path, tmp_path: Path
) -> None:
    """Two hosts, each with its own ``signoff proxy`` process on one database, told apart as
    core/proxy/host_identity.py tells them (here by their clientInfo: this process launches
    both). The grant given to host A's request runs A's identical call unasked, after A
    restarts its proxy too; B's identical call asks as if there were no grant (core/grants.py
    rule 8, decision 0070)."""
    notes = tmp_path / "notes.txt"
    rig = set_up(home, notes)
    line, wrote = "pay 10", "wrote 'pay 10'"

    async def scenario() -> None:
        async with rig.client("notes", client=HOST_A) as a:
            found = re.search(r"pending as approval (\S+) \(", await write_to(a, line))
            assert found, "A's call did not ask"
            [waiting] = [p for p in rig.pending() if p["id"] == found.group(1)]
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"], "--for", "15min")
            assert await write_to(a, line) == wrote  # the approved call, collected
        # A restarts its proxy: the same host, whose grant still covers it.
        async with rig.client("notes", client=HOST_A) as a, rig.client("notes", client=HOST_B) as b:
            assert await write_to(a, line) == wrote  # under the grant: not asked
            theirs = await write_to(b, line)
            assert theirs.startswith(DUPLICATE) and "wrote" not in theirs, theirs

    anyio.run(scenario)
    assert written(notes, line) == 2
    listed = rig.signoff("grants", "list").stdout
    assert "from host-a 1.0 (process" in listed, listed


async def write_to(host: Any, line: str) -> str:
    return text(await host.call_tool("write_note", {"text": line}))
