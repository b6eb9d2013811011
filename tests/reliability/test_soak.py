"""Soak: 10,000 allowed calls through one `signoff proxy`, as a host keeps one open for days.

Every call is a new request (its own arguments, so its own call key and run), the mcp SDK's
client keeping a few in flight. The proxy's resident memory (VmRSS) after the first 1,000
calls and after all 10,000 must differ by less than 20%, and its open file descriptors must be
the same at both points. Each point is taken once the proxy is idle and its lease keeper has
closed its own SQLite connection (core/lease.py: opened at its first renewal, closed at the
first beat that finds no lease to renew, so within TTL/3 = 10 s of the last call); waiting for
that is part of what is checked. One difference is allowed, and only after the keeper's first
connection: one more descriptor of the database file. SQLite keeps the descriptor of a closed
connection open while another connection of the process holds a lock on the file (closing it
would drop that connection's POSIX locks) and reuses it for the next connection it opens there:
one at most, however many times the keeper comes and goes.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import anyio
import pytest

from tests.reliability.loadkit import (
    Call,
    Tally,
    drive,
    host,
    log_errors,
    open_fds,
    rss_kib,
    setup_home,
)

pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]  # its rates are the machine's

CALLS = 10_000
FIRST = 1_000
WORKERS = 8  # calls in flight
SETTLE = 20.0  # seconds: two lease keeper beats (TTL/3 each) and some slack


def _calls(start: int, stop: int) -> list[list[Call]]:
    return [[Call("lookup", {"q": f"soak-{n}"}, "read")] for n in range(start, stop)]


async def settled(pid: int, database: Path) -> tuple[int, Counter[str]]:
    """The proxy's VmRSS and descriptors once only its store's own connection has the
    database open (one descriptor of its WAL), or at the deadline."""
    deadline = time.monotonic() + SETTLE
    while True:
        fds = open_fds(pid)
        if fds[f"{database}-wal"] == 1 or time.monotonic() > deadline:
            return rss_kib(pid), fds
        await anyio.sleep(0.1)


def test_ten_thousand_calls_through_one_proxy_keep_its_memory_and_descriptors_flat(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    setup_home(home)
    tally = Tally()
    samples: list[tuple[int, Counter[str]]] = []
    times: list[float] = []
    settling: list[float] = []

    async def scenario() -> None:
        async with host(home, "soak", hold=0.05) as proxy:
            for start, stop in ((0, FIRST), (FIRST, CALLS)):
                began = time.perf_counter()
                await drive(proxy, _calls(start, stop), tally, WORKERS)
                times.append(time.perf_counter() - began)
                samples.append(await settled(proxy.pid, home / "signoff.db"))
                settling.append(time.perf_counter() - began - times[-1])

    anyio.run(scenario)
    assert not tally.bad, "\n".join(tally.bad[:20])
    assert tally.outcomes == Counter({"read": CALLS})
    assert not log_errors(home), log_errors(home)[:20]
    (rss_first, first), (rss_last, last) = samples
    growth = (rss_last - rss_first) / rss_first
    print(
        f"\nsoak: {CALLS} calls in {sum(times):.1f} s ({CALLS / sum(times):.0f} calls/s);"
        f" proxy VmRSS {rss_first} KiB after {FIRST}, {rss_last} KiB after {CALLS}"
        f" ({growth:+.1%}); open descriptors {first.total()} then {last.total()} (the lease"
        f" keeper's connection closed {settling[0]:.1f} s and {settling[1]:.1f} s after)"
    )
    assert abs(growth) < 0.20, f"memory grew {growth:+.1%}"
    database = str(home / "signoff.db")
    kept = last.pop(database) - first.pop(database)  # the keeper's, kept by SQLite
    assert kept in (0, 1), f"{kept} more descriptors of the database"
    assert first == last, f"descriptors changed: {dict(first)} -> {dict(last)}"
