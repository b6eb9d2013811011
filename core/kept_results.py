"""The whole of a large result, kept beside its run while a re-call may still collect it.

Rules (decision 0029):

1. A result too large to be recorded whole (core/proxy/results.py rule 4) is kept here only when
   it was not handed back at once (the host gave up on the call): in the transaction of the
   call's outcome, so that a kept result and its run's record are never one without the other.
2. It is read back only through its record: ``results.from_record`` hands it out only when it
   still hashes to the recorded SHA-256; a copy altered or gone gives the recorded parts.
3. It is deleted in the transaction that hands it back, and the sweeper deletes any kept longer
   than ``KEEP_DAYS`` (a host that never called again), each with an event saying so.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

from core.store import Transaction, format_time

KEEP_DAYS = 7
KEEP = timedelta(days=KEEP_DAYS)


def keep(tx: Transaction, run_id: str, sha256: str, data: bytes, at: str) -> None:
    tx.execute(
        "INSERT OR REPLACE INTO result_blobs (run_id, sha256, data, created_at)"
        " VALUES (?, ?, ?, ?)",
        (run_id, sha256, data, at),
    )


def read(conn: sqlite3.Connection, run_id: str) -> bytes | None:
    row = conn.execute("SELECT data FROM result_blobs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else bytes(row[0])


def forget(tx: Transaction, run_id: str) -> None:
    tx.execute("DELETE FROM result_blobs WHERE run_id = ?", (run_id,))


def prune(tx: Transaction, now: datetime) -> int:
    """Delete what was kept longer than ``KEEP_DAYS``; one event names the runs (rule 3)."""
    before = format_time(now - KEEP)
    runs = [
        r
        for (r,) in tx.execute(
            "SELECT run_id FROM result_blobs WHERE created_at < ? ORDER BY run_id", (before,)
        )
    ]
    if runs:
        tx.execute("DELETE FROM result_blobs WHERE created_at < ?", (before,))
        tx.append_event(
            kind="results.pruned",
            payload={"runs": runs, "kept_days": KEEP_DAYS},
            at=format_time(now),
        )
    return len(runs)
