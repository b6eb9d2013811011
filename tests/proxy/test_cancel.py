"""A call the host cancels, or one past its timeout, is cancelled at the server, and its outcome is
still recorded: a late answer is the call's result, collected by the re-call; no answer is an
unknown outcome that waits for the operator; a server that still answers is kept running.

Real subprocesses: ``signoff proxy`` in front of tests/proxy/fake_server.py (its notes file is
its own log of every ``write_note`` it performed, its cancels file every cancellation it was
told of, its starts file every start), called by the mcp SDK's client, which sends
``notifications/cancelled`` when its caller gives up on a request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.store import Store
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.guarantee("G-CRASH-1")]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def runs(home: Path) -> list[tuple[str, str | None, bool]]:
    """Every run of the call: (status, end reason, handed back to the host)."""
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        rows = conn.execute(
            "SELECT status, end_reason, collected_at IS NOT NULL FROM runs ORDER BY rowid"
        ).fetchall()
    return [(r[0], r[1], bool(r[2])) for r in rows]


def notes_rig(home: Path, tmp_path: Path, behaviour: str, delay: float) -> Rig:
    rig = Rig(home)
    rig.add_fake(
        "notes", NOTES_TOOLS, notes=str(tmp_path / "notes.txt"), delay=delay,
        cancels=str(tmp_path / "cancels"), starts=str(tmp_path / "starts"),
        on_call={"write_note": behaviour},
    )  # fmt: skip
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", "allow")
    return rig


async def cancel_after_it_reached_the_server(host: Any, tmp_path: Path, marker: str) -> None:
    """The host gives up on a call once the server acted on it (the SDK then sends the cancel)."""
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await host.call_tool("write_note", {"text": marker})
            raise AssertionError("the call was answered before the host cancelled it")

        tg.start_soon(call)
        await until(lambda: marker in lines(tmp_path / "notes.txt"), "the server acting")
        tg.cancel_scope.cancel()


def test_a_cancelled_call_is_cancelled_at_the_server_and_its_late_answer_collected(
    home: Path, tmp_path: Path
) -> None:
    rig = notes_rig(home, tmp_path, "late", delay=1.5)  # answers even when told it is cancelled

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await cancel_after_it_reached_the_server(host, tmp_path, "m1")
            [cancel] = await until(lambda: lines(tmp_path / "cancels"), "the cancel forwarded")
            assert "requestId" in json.loads(cancel)
            # The answer that came after the cancel is recorded, and not marked handed back.
            await until(lambda: runs(home) == [("COMPLETED", "completed", False)], "the answer")
            again = text(await host.call_tool("write_note", {"text": "m1"}))
            assert again == "wrote 'm1'", again  # the real result, not a question
            assert lines(tmp_path / "notes.txt") == ["m1"]
            assert runs(home) == [("COMPLETED", "completed", True)]

    anyio.run(scenario)


def test_a_cancelled_call_with_no_answer_has_an_unknown_outcome(home: Path, tmp_path: Path) -> None:
    rig = notes_rig(home, tmp_path, "cancellable", delay=30)  # honours the cancel: no answer
    rig.signoff("settings", "cancel_grace_seconds", "1")

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await cancel_after_it_reached_the_server(host, tmp_path, "m2")
            await until(lambda: lines(tmp_path / "cancels"), "the cancel forwarded")
            await until(lambda: runs(home)[0][0] == "WAITING_FOR_APPROVAL", "the outcome")
            again = text(await host.call_tool("write_note", {"text": "m2"}))
            assert "may or may not have taken effect" in again, again
            assert lines(tmp_path / "notes.txt") == ["m2"]

    anyio.run(scenario)
    [request] = rig.pending()
    assert request["kind"] == "interrupted_side_effect"


def test_a_call_past_its_tools_timeout_is_cancelled_and_a_server_that_answers_is_kept(
    home: Path, tmp_path: Path
) -> None:
    """The tool's own timeout (1 s) comes before the top-level one (60 s); the server is told
    the call is cancelled, still answers a ping, and so keeps running: the next call goes to
    the same process."""
    rig = notes_rig(home, tmp_path, "cancellable", delay=30)
    rig.signoff("settings", "cancel_grace_seconds", "1")
    rig.signoff("settings", "call_timeout_seconds", "1", "--server", "notes", "--tool",
                "write_note")  # fmt: skip

    starts = tmp_path / "starts"
    pinned = len(lines(starts))  # `signoff pin` started it too

    async def scenario() -> None:
        async with rig.client("notes") as host:
            answer = text(await host.call_tool("write_note", {"text": "m3"}))
            assert "may or may not have taken effect" in answer, answer
            [cancel] = lines(tmp_path / "cancels")
            assert "no answer within 1 s" in json.loads(cancel)["reason"]
            assert text(await host.call_tool("read_note", {})) == "m3\n"
            assert len(lines(starts)) == pinned + 1  # never stopped, never started again

    anyio.run(scenario)


def test_a_server_that_stops_answering_is_stopped_at_the_timeout_and_started_again(
    home: Path, tmp_path: Path
) -> None:
    """The other side of the rule: a server whose every thread hangs answers no ping either."""
    rig = notes_rig(home, tmp_path, "write_then_hang", delay=0)
    rig.signoff("settings", "cancel_grace_seconds", "1")
    rig.signoff("settings", "call_timeout_seconds", "1", "--server", "notes")

    starts = tmp_path / "starts"
    pinned = len(lines(starts))

    async def scenario() -> None:
        async with rig.client("notes") as host:
            answer = text(await host.call_tool("write_note", {"text": "m4"}))
            assert "may or may not have taken effect" in answer, answer
            assert text(await host.call_tool("read_note", {})) == "m4\n"
            assert len(lines(starts)) == pinned + 2  # stopped, and started again

    anyio.run(scenario)
