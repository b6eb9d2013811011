"""Benchmark: verifying the audit chain, against the physical floor in the same run.

Builds a database of N events (default 1,000,000), times ``core.verify.verify`` over it, and
compares with two baselines measured in the same process on the same data:

- floor: a plain SHA-256 loop over the very bytes each event is hashed over (already in memory);
- read: fetching the same rows from SQLite with nothing else done to them.

Prints events per second and the ratios. Goal (issue 2): >= 300,000 events/s, within 3x floor.

    python bench/verify.py [--events N]
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

from core import chain
from core.store import Store, utc_now
from core.verify import PAGE, verify


def build(path: Path, events: int) -> Store:
    store = Store.open(path)
    at = utc_now()
    batch = 50_000
    runs = max(1, events // 10)
    with store.transaction() as tx:
        tx.conn.executemany(
            "INSERT INTO runs (id, goal, status, limits, created_at, updated_at)"
            " VALUES (?, 'bench', 'COMPLETED', '{}', ?, ?)",
            [(f"run-{r}", at, at) for r in range(runs)],
        )
    for start in range(0, events, batch):
        with store.transaction() as tx:
            tx.append_events(
                [
                    (
                        f"run-{(i // 10) % runs}",
                        i % 10,
                        "step.observed",
                        {"tool": "write_file", "args": {"path": f"/tmp/f{i}", "n": i}, "ok": True},
                        at,
                    )
                    for i in range(start, min(events, start + batch))
                ]
            )
    return store


def floor_and_read(store: Store, events: int) -> tuple[float, float]:
    """Seconds to SHA-256 the same hash inputs, and seconds to read the same rows."""
    hashing = reading = 0.0
    prev, after = chain.genesis(store.database_id), 0
    sha256 = hashlib.sha256
    while after < events:
        t = time.perf_counter()
        rows = store.event_rows(after, events, PAGE)
        reading += time.perf_counter() - t
        inputs = []
        for seq, run_id, step, kind, payload, at, stored in rows:
            inputs.append(
                chain.hash_input(
                    prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload, at=at
                )
            )
            prev = stored
        t = time.perf_counter()
        for data in inputs:
            sha256(data).hexdigest()
        hashing += time.perf_counter() - t
        after = rows[-1][0]
    return hashing, reading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        store = build(Path(tmp) / "signoff.db", args.events)
        built = time.perf_counter() - t
        best_verify = best_floor = best_read = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            report = verify(store)
            best_verify = min(best_verify, time.perf_counter() - t)
            assert report.head.seq == args.events
            hashing, reading = floor_and_read(store, args.events)
            best_floor, best_read = min(best_floor, hashing), min(best_read, reading)
        store.close()

    n = args.events
    print(f"events:            {n:,} (built in {built:.1f} s)")
    print(f"verify:            {n / best_verify:,.0f} events/s")
    print(f"floor (sha256):    {n / best_floor:,.0f} events/s")
    print(f"read rows only:    {n / best_read:,.0f} events/s")
    print(f"ratio verify/floor: {best_verify / best_floor:.2f}x")
    print(f"ratio read/floor:   {best_read / best_floor:.2f}x")


if __name__ == "__main__":
    main()
