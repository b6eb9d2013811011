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
from tests.waiting import until

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
    config, _ = configured
    database = home / "signoff.db"
    args = {"text": "at once"}

    async def scenario() -> None:
        async with proxies(config, database, 2) as (first, second):
            # The second proxy looked the call up before the first began its run.
            recall: Any = second.recall
            for name in ("latest_run", "latest_of_any_host"):
                real, stale = getattr(recall, name), [None]
                setattr(recall, name, lambda *k, s=stale, r=real: s.pop() if s else r(*k))
            a = text(await first.call("write_note", args))
            b = text(await second.call("write_note", args))
            assert a.startswith(PENDING) and b.startswith(PENDING)
            assert a.split("approval ")[1][:15] == b.split("approval ")[1][:15]

    run(scenario)
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
            await until(awaiting.is_set, "the first proxy waiting for the other's outcome")
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
            first = asyncio.create_task(proxy.call("write_note", {"text": "one"}))
            second = asyncio.create_task(proxy.call("write_note", {"text": "one"}))
            # The identical calls wait for each other: one lock, held by one, awaited by both.
            await until(lambda: sum(proxy._lock_users.values()) == 2, "both calls at the lock")
            assert len(proxy._locks) == 1
            await asyncio.gather(first, second)
            for n in range(20):
                await proxy.call("read_note", {} if n % 2 else {"n": n})
            assert proxy._locks == {} and not proxy._lock_users

    run(scenario)
