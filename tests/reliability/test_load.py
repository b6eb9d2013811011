"""Load: four `signoff proxy` processes, started as four MCP hosts would start them, share one
database while each host makes 250 calls and an operator decides the approvals concurrently.

Each host (the mcp SDK's client, four calls in flight) makes reads (some identical across
hosts), writes the operator approves or rejects, identical writes within the duplicate window
(approved or rejected; one made twice more after its duplicate was rejected), re-calling every
pending answer until it has its outcome; then every host makes the same 15 writes at about the
same time. Afterwards: every call has exactly one run (a host making a shared write makes
its own call, which waits as a duplicate of the first host's: decision 0027), ended as the
host was told; every approval executed at most once (the notes file holds each approved write
once per approved run, no rejected write, each shared write once); each run's events are the ones
core/transitions.py names for its outcome; the tables say what the events say; the chain
verifies; and no host read a "database is locked", a StoreBusy or any other internal error.

The same calls through one proxy are the baseline: the figures printed are calls per second
both ways and their ratio (no timed assertion: machines are noisy).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskStatus

from tests.reliability.loadkit import (
    Call,
    Host,
    Operator,
    Tally,
    calls_of,
    check_record,
    drive,
    elapsed_since,
    host,
    log_errors,
    plan_host,
    setup_home,
)

pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]  # its rates are the machine's

HOSTS = 4
WORKERS = 4  # calls in flight per host
HOLD = 0.05  # seconds a call needing approval is held before answering "pending"
# Per host, 250 calls: the mix (110 + 25 + 35 + 2 * 25 + 3 * 5 = 235), then 15 shared writes.
MIX = {"reads": 110, "rejected": 25, "approved": 35, "duplicated": 25, "redone": 5}
SHARED = 15

Phases = list[tuple[str, list[list[list[Call]]]]]  # (name, a plan per host)


def _phases() -> Phases:
    """The mix, timed for the figures; then the writes every host makes at the same time,
    which queue behind each other by design (timed apart, so as not to blur the figures)."""
    mix = [plan_host(f"h{n}", **MIX, shared=0) for n in range(HOSTS)]
    shared = [plan_host(f"h{n}", **dict.fromkeys(MIX, 0), shared=SHARED) for n in range(HOSTS)]
    assert all(len(calls_of(a)) + len(calls_of(b)) == 250 for a, b in zip(mix, shared, strict=True))
    return [("mix", mix), ("shared writes", shared)]


def _run(home: Path, phases: Phases, proxies: int) -> tuple[list[float], Tally]:
    """Each phase's calls through ``proxies`` proxies (the hosts' plans dealt round-robin),
    the operator deciding meanwhile; per phase, the seconds from its first call to its last
    outcome."""
    tally = Tally()
    operator = Operator(home / "signoff.db")

    async def scenario() -> list[float]:
        times = []
        async with anyio.create_task_group() as tg:
            hosts: dict[int, Host] = {}

            async def start(n: int) -> None:
                hosts[n] = await tg.start(_serve, home, f"p{n}")

            # All at once, as hosts starting together do: the first call of Signoff on this
            # machine, so the proxies also race to create and migrate the database.
            async with anyio.create_task_group() as starting:
                for n in range(proxies):
                    starting.start_soon(start, n)
            operator.start()
            for _, plans in phases:
                start = time.perf_counter()
                async with anyio.create_task_group() as calls:
                    for n, plan in enumerate(plans):
                        calls.start_soon(drive, hosts[n % proxies], plan, tally, WORKERS)
                times.append(elapsed_since(start))
            tg.cancel_scope.cancel()
        return times

    try:
        times = anyio.run(scenario)
    finally:
        operator.stop.set()
        operator.join(30)
    assert not operator.errors, operator.errors
    return times, tally


async def _serve(home: Path, name: str, *, task_status: TaskStatus[Host]) -> None:
    async with host(home, name, hold=HOLD) as h:
        task_status.started(h)
        await anyio.sleep_forever()


def test_four_proxies_sharing_one_database_run_each_call_once_and_keep_the_record(
    tmp_path: Path,
) -> None:
    phases = _phases()
    calls = [c for _, plans in phases for plan in plans for c in calls_of(plan)]
    figures = {}
    for label, proxies in (("1 proxy", 1), (f"{HOSTS} proxies", HOSTS)):
        home = tmp_path / label.replace(" ", "-")
        home.mkdir(mode=0o700)
        notes = setup_home(home)
        times, tally = _run(home, phases, proxies)
        assert not tally.bad, "\n".join(tally.bad[:20])
        assert sum(tally.outcomes.values()) == len(calls)
        assert not log_errors(home), log_errors(home)[:20]
        record = check_record(home, calls, notes, tally, hosts_apart=proxies == HOSTS)
        figures[label] = (times, tally, record)

    print()
    for label, (times, tally, record) in figures.items():
        rates = ", ".join(
            f"{name} {sum(len(calls_of(p)) for p in plans)} calls in {t:.2f} s"
            f" = {sum(len(calls_of(p)) for p in plans) / t:.0f} calls/s"
            for (name, plans), t in zip(phases, times, strict=True)
        )
        print(
            f"load, {label:>9}: {rates}; answers {dict(tally.outcomes)}; {tally.requests}"
            f" requests ({tally.pendings} said call again); {record.runs} runs,"
            f" {record.events} run events, chain of {record.chain_head}, verified"
        )
    one, four = figures["1 proxy"][0][0], figures[f"{HOSTS} proxies"][0][0]
    print(f"load: the mix, {HOSTS} proxies / 1 proxy, calls per second: {one / four:.2f}x")
