"""A held call is woken by the decision, not found by a poll (core/proxy/wakeups.py): each test
sets the proxy's backstop poll far beyond the test's own deadline, so a held call that returns
within it can only have been woken."""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from core import private_files, wake
from core.proxy import cancel
from core.proxy.recall import Recall
from core.proxy.wakeups import BACKSTOP_VARIABLE
from core.store import Store
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import until, wait_for

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")

BACKSTOP = "600"  # seconds: the proxy's store poll, far beyond every deadline below
DEADLINE = 60.0  # seconds a woken call may take to return, however slow the machine
HOLD = 300  # seconds: the call is held far longer than the deadline too


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private SIGNOFF_HOME under a short folder: a proxy's socket path in it
    (``run/proxies/PID-ID.sock``) must fit in a socket address's 107 bytes, which a test's own
    folder under a test worker's or a mutation run's does not."""
    with tempfile.TemporaryDirectory(prefix="so-", dir="/tmp") as short:
        path = Path(short) / "home"
        path.mkdir(mode=0o700)
        monkeypatch.setenv("SIGNOFF_HOME", str(path))
        yield path


def dead_socket(path: Path) -> None:
    """A socket file nobody is bound to, as a proxy killed while holding a call leaves."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_held_call_returns_once_another_process_decides_it_and_a_dead_proxy_changes_nothing(
    home: Path, tmp_path: Path, decision: str
) -> None:
    _held_call_decided_by_another_process(home, tmp_path, decision)


@pytest.mark.guarantee("G-FILES-3")
def test_a_held_call_on_a_home_too_deep_for_a_socket_is_woken_by_the_decision(
    deep_home: Path, tmp_path: Path
) -> None:
    _held_call_decided_by_another_process(deep_home, tmp_path, "approve")


def _held_call_decided_by_another_process(home: Path, tmp_path: Path, decision: str) -> None:
    """A call held by a proxy (its store poll far off), decided with ``signoff DECISION`` by
    another process, returns within the deadline; a dead proxy's socket is removed."""
    rig = Rig(home)
    rig.env[BACKSTOP_VARIABLE] = BACKSTOP
    notes = tmp_path / "notes.txt"
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    proxies = wake.proxies_dir()
    stale = proxies / "1-deadbeef.sock"
    decided: list[str] = []

    def operator() -> None:
        [waiting] = wait_for(rig.pending, "the call to wait for approval")
        # The proxy listens once it holds the call; a proxy that died holding one left this.
        wait_for(lambda: list(proxies.glob("*.sock")), "the holding proxy's socket")
        dead_socket(stale)
        rig.signoff(decision, waiting["id"])
        decided.append(waiting["id"])

    async def scenario() -> Any:
        async with rig.client("notes", hold=HOLD) as host:
            thread = threading.Thread(target=operator)
            thread.start()
            try:
                with anyio.fail_after(DEADLINE):
                    return await host.call_tool("write_note", {"text": "held"})
            finally:
                thread.join()

    result = anyio.run(scenario)
    assert decided
    if decision == "approve":
        assert not result.is_error and "wrote 'held'" in text(result)
        assert notes.read_text() == "held\n"
    else:
        assert result.is_error and "The operator rejected this call" in text(result)
        assert not notes.exists()
    # The dead proxy's socket was removed by the decision's wake; the proxy's own, at its end.
    assert list(proxies.iterdir()) == []


class CountingRecall(Recall):
    """A recall whose store always says the approval is pending, counting its reads."""

    reads = 0

    def waiting_approval(self, run_id: str) -> tuple[str, str, str, str] | None:
        self.reads += 1
        return ("approval-1", "pending", "ab" * 32, "approval")


def holding(store: Store) -> tuple[CountingRecall, Any]:
    """A recall that only holds (no gate, an approval that never goes on), and its tool."""

    async def refuse(*_: Any) -> Any:
        raise AssertionError("a pending approval never goes on")

    def no_gate() -> Any:
        raise AssertionError("no gate is needed to hold a call")

    recall = CountingRecall(store, gate=no_gate, hold=lambda: HOLD, wall=lambda: 0.0,
                            after_verdict=refuse)  # fmt: skip
    return recall, SimpleNamespace(name="write_note", declares_output_schema=False)


def test_a_datagram_from_anyone_only_makes_the_held_call_read_the_store_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKSTOP_VARIABLE, BACKSTOP)

    recall, exposed = holding(store)
    proxies = wake.proxies_dir()

    async def scenario() -> None:
        cancelled = asyncio.Event()
        cancel.HOST_CALL.set(cancel.HostCall(cancelled=cancelled))
        held = asyncio.ensure_future(recall.hold(exposed, "run-1"))
        [listening] = await until(lambda: list(proxies.glob("*.sock")), "the proxy's socket")
        assert recall.reads == 1
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as forger:
            for word in (b"approved", b"\x00\xff" * 32, b""):
                before = recall.reads
                forger.sendto(word, str(listening))
                await until(lambda b=before: recall.reads > b, f"a read after {word!r}")
                assert not held.done()  # the store still says pending: still held
        cancelled.set()  # the host gives up: the hold ends at once, whatever the backstop
        with anyio.fail_after(DEADLINE):
            answer = await held
        assert "pending as approval approval-1" in answer["content"][0]["text"]

    asyncio.run(scenario())
    assert not list(proxies.glob("*.sock"))  # removed when the hold ended


def test_a_proxy_that_cannot_listen_holds_by_polling(
    store: Store, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime folder that is not private is refused: no socket, and the hold polls."""
    monkeypatch.setenv(BACKSTOP_VARIABLE, BACKSTOP)
    proxies = wake.proxies_dir()
    private_files.make_dir(proxies.parent)
    proxies.mkdir(mode=0o777)
    proxies.chmod(0o777)

    recall, exposed = holding(store)

    async def scenario() -> None:
        cancelled = asyncio.Event()
        cancel.HOST_CALL.set(cancel.HostCall(cancelled=cancelled))
        held = asyncio.ensure_future(recall.hold(exposed, "run-1"))
        await until(lambda: recall.reads >= 3, "the hold to poll the store")
        assert not recall.wakeups.listening and not list(proxies.iterdir())
        cancelled.set()
        with anyio.fail_after(DEADLINE):
            await held

    asyncio.run(scenario())


def test_a_proxy_driven_by_one_event_loop_then_another_holds_in_each(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKSTOP_VARIABLE, BACKSTOP)

    recall, exposed = holding(store)

    async def hold_until_woken_then_cancelled() -> None:
        cancelled = asyncio.Event()
        cancel.HOST_CALL.set(cancel.HostCall(cancelled=cancelled))
        reads = recall.reads
        held = asyncio.ensure_future(recall.hold(exposed, "run-1"))
        await until(lambda: recall.reads > reads, "the hold's first read")
        wake.wake("approved")
        await until(lambda: recall.reads > reads + 1, "a read on the wake")
        cancelled.set()
        with anyio.fail_after(DEADLINE):
            await held

    asyncio.run(hold_until_woken_then_cancelled())
    asyncio.run(hold_until_woken_then_cancelled())  # its wake-up is of this loop, not the last
