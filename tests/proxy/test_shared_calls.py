"""The same call through two proxies sharing one database, and a call made again and again.

Two in-process proxies, each with its own store connection and gate (as two `signoff proxy`
processes have), over one database and one fake upstream, with the interleavings the load
suite (tests/reliability/test_load.py) met under contention set up step by step. Both serve
the same host (the same launching process, no other clientInfo): a host's second proxy, or its
proxy restarted, shares that host's calls. Two hosts' calls are tests/proxy/test_host_isolation.py.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from core.approvals import approve, reject
from core.proxy.config import Config
from core.proxy.config import load as load_config
from core.proxy.server import Proxy
from core.records import pending_requests
from core.store import Store
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import WAIT, until

PENDING = "This call needs the operator's approval and has not run."
DUPLICATE = "An identical call may already have taken effect; this one waits for the operator"


# Its module fixture is set up once: the file's tests run on one worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("test_shared_calls")


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, Path]:
    """The fake notes server, pinned and classified once for the module's tests."""
    home = tmp_path_factory.mktemp("shared-calls")
    os.chmod(home, 0o700)
    notes = home / "notes.txt"
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    return load_config(home / "config.toml"), notes


@asynccontextmanager
async def proxies(config: Config, database: Path, count: int) -> AsyncIterator[list[Proxy]]:
    async with AsyncExitStack() as stack:
        started = []
        for n in range(count):
            store = stack.enter_context(Store.open(database))
            proxy = Proxy(config, ["notes"], store, log_dir=database.parent / f"logs-{n}",
                          hold_seconds=0.05)  # fmt: skip
            await proxy.start()
            stack.push_async_callback(proxy.close)
            started.append(proxy)
        yield started


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


def decide(database: Path, verdict: str) -> str:
    """The operator decides the one pending approval, as `signoff approve/reject --hash`."""
    with Store.open(database) as store:
        with store.snapshot() as conn:
            [waiting] = pending_requests(conn)
        act = approve if verdict == "approve" else reject
        act(store, waiting.run_id, waiting.id, "operator", expected_hash=waiting.request_hash)
    return waiting.kind


def kinds(database: Path, run_id: str | None = None) -> list[str]:
    with Store.open(database) as store:
        rows = store._conn.execute(
            "SELECT kind FROM events WHERE ? IS NULL OR run_id = ? ORDER BY seq", (run_id, run_id)
        ).fetchall()
    return [kind for (kind,) in rows]


def written(notes: Path, line: str) -> int:
    return notes.read_text().splitlines().count(line) if notes.exists() else 0


def test_a_call_made_again_after_its_duplicate_was_rejected_still_waits_as_a_duplicate(
    configured: tuple[Config, Path], home: Path
) -> None:
    config, notes = configured
    database = home / "signoff.db"
    args = {"text": "again and again"}

    async def scenario() -> None:
        async with proxies(config, database, 1) as (proxy,):
            assert text(await proxy.call("write_note", args)).startswith(PENDING)
            assert decide(database, "approve") == "local_mutation"
            assert text(await proxy.call("write_note", args)) == "wrote 'again and again'"
            assert text(await proxy.call("write_note", args)).startswith(DUPLICATE)
            assert decide(database, "reject") == "duplicate"
            assert (await proxy.call("write_note", args))["isError"]  # the rejection, collected
            # The last run of this call is the rejected duplicate; the one that completed is
            # still within the window, so the next identical call waits as a duplicate again.
            assert text(await proxy.call("write_note", args)).startswith(DUPLICATE)
            assert decide(database, "reject") == "duplicate"

    run(scenario)
    assert written(notes, "again and again") == 1


def test_two_proxies_making_the_same_call_at_once_begin_one_run(
    configured: tuple[Config, Path], home: Path
) -> None:
    """Each proxy looks the call up before either begins its run: the test holds the database's
    write lock (``BEGIN IMMEDIATE`` on a connection of its own) until each proxy, in a thread
    of its own as in a process of its own, has looked and come to its own ``BEGIN IMMEDIATE``.
    Let go, one begins the run; the other's begin finds it (``Raced``), looks again, and holds
    the same approval."""
    config, _ = configured
    database = home / "signoff.db"
    args = {"text": "at once"}
    Store.open(database).close()  # made before the lock is taken
    ready = [threading.Event(), threading.Event()]
    go = threading.Event()
    at_begin = [threading.Event(), threading.Event()]
    answered: dict[int, str] = {}
    failed: list[BaseException] = []

    def proxy_process(n: int) -> None:
        async def scenario() -> None:
            async with proxies(config, database, 1) as (proxy,):

                def traced(sql: str) -> None:
                    if go.is_set() and sql == "BEGIN IMMEDIATE":  # told before it waits
                        at_begin[n].set()

                proxy.store._conn.set_trace_callback(traced)
                ready[n].set()
                await asyncio.to_thread(go.wait, WAIT)
                answered[n] = text(await proxy.call("write_note", args))

        try:
            run(scenario)
        except BaseException as e:
            failed.append(e)

    threads = [threading.Thread(target=proxy_process, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    try:
        assert all(event.wait(WAIT) for event in ready), failed
        lock = sqlite3.connect(database, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        go.set()
        try:
            assert all(event.wait(WAIT) for event in at_begin), failed
        finally:
            lock.execute("ROLLBACK")
            lock.close()
    finally:
        go.set()
        for thread in threads:
            thread.join(2 * WAIT)
    assert not failed and sorted(answered) == [0, 1], failed
    a, b = answered[0], answered[1]
    assert a.startswith(PENDING) and b.startswith(PENDING)
    assert a.split("approval ")[1][:15] == b.split("approval ")[1][:15]
    assert kinds(database).count("run.started") == 1


def test_a_grant_another_proxy_executes_is_waited_for_run_once_and_collected_once(
    configured: tuple[Config, Path], home: Path
) -> None:
    config, notes = configured
    database = home / "signoff.db"
    args = {"text": "claimed"}

    async def scenario() -> None:
        async with proxies(config, database, 2) as (first, second):
            assert text(await first.call("write_note", args)).startswith(PENDING)
            decide(database, "approve")
            first.hold = 30  # long enough for the other's execution, its anchoring included
            [run_id] = [r for (r,) in first.store._conn.execute("SELECT id FROM runs")]
            # The second proxy, serving the same call, attached the grant first.
            session, verdict = second._require_gate().attach(run_id)
            assert verdict is not None
            awaiting = asyncio.Event()  # the first proxy found the grant claimed, and waits
            await_outcome = first.recall.await_outcome

            async def awaits(*args: Any) -> Any:
                awaiting.set()
                return await await_outcome(*args)

            first.recall.await_outcome = awaits  # type: ignore[method-assign]
            waiting = asyncio.create_task(first.call("write_note", args))
            await asyncio.wait_for(awaiting.wait(), WAIT)  # before the other executes it
            executed: Any = await second._after_verdict(second.exposed["write_note"], session,
                                                        verdict)  # fmt: skip
            assert text(executed) == "wrote 'claimed'"
            assert text(await waiting) == "wrote 'claimed'"

    run(scenario)
    assert written(notes, "claimed") == 1
    events = kinds(database)
    assert events.count("step.tool_started") == events.count("run.collected") == 1
    assert events.count("step.policy") == 2  # the proposal, and the one attach that ran it


def test_the_lock_of_a_call_is_forgotten_once_it_is_answered(
    configured: tuple[Config, Path], home: Path
) -> None:
    config, _ = configured

    async def scenario() -> None:
        async with proxies(config, home / "signoff.db", 1) as (proxy,):
            # The call that takes the lock holds it while it waits for the operator, until its
            # host gives up: held as long as the test needs, not for a hold that could end
            # before the other call comes to the lock.
            proxy.hold = WAIT
            gave_up = asyncio.Event()  # both hosts', set when the test has seen the lock
            first = asyncio.create_task(proxy.call("write_note", {"text": "one"}, gave_up))
            second = asyncio.create_task(proxy.call("write_note", {"text": "one"}, gave_up))
            # The identical calls wait for each other: one lock, held by one, awaited by both.
            await until(lambda: sum(proxy._lock_users.values()) == 2, "both calls at the lock")
            assert len(proxy._locks) == 1
            gave_up.set()
            answered = await asyncio.gather(first, second)
            assert [text(a).startswith(PENDING) for a in answered] == [True, True]
            proxy.hold = 0.05
            for n in range(20):
                await proxy.call("read_note", {} if n % 2 else {"n": n})
            assert proxy._locks == {} and not proxy._lock_users

    run(scenario)
