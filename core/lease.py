"""The run lease: who is executing a running run, and until when. Rules, and the heartbeat.

Rules:

1. A run in RUNNING carries a lease on its own row: an owner (a configured name plus a random
   suffix per gate, so two processes configured alike never share a lease) and an expiry in
   unix seconds by the wall clock. It is taken with the move to RUNNING and released with the
   pause or the end. A waiting run carries one only while a session that attached its grant
   is about to execute it (a claim, not renewed; the execution's start checks it is still ours).
2. A lease is live while its expiry is in the future by the reader's wall clock. Lease times
   never come from the injectable clock used for run times.
3. The holder renews it every TTL/3 from the gate's lease keeper, one thread with its own SQLite
   connection renewing every lease the gate holds, for as long as each session lives, so a
   tool call longer than the TTL keeps its lease and a consumer reading on the main connection
   cannot starve the renewal.
4. Every write a session makes requires that it still owns the lease; the writes that start a
   side effect also require that it has not expired, so a stalled loop starts nothing.
5. Attaching to a run leased live by another owner raises ``RunLeased`` and changes nothing; an
   expired lease is taken over, writing ``run.takeover`` (the only event a lease writes).
6. A renewal that finds another owner (or none) marks the lease lost: the session then refuses
   every call with ``LeaseLost``. A tool already running finishes; its outcome is recorded only
   if the session still owns the lease.
7. The sessions of one gate share its owner, so the gate tells them apart: a live one holding
   the run refuses another; one dropped unclosed is freed at once (nothing refers back to it),
   stops renewing, and its run is taken over one TTL after its last renewal, as a dead
   process's is; one still reachable whose lease lapsed unrenewed is fenced by the takeover.

Clock skew (docs/decisions/0009-run-lease.md): the holder stamps the expiry by its clock, a
reader judges it by its own. A reader whose clock is behind the holder's, by any amount, never
takes a live lease; one ahead by d sees it expire d earlier, and since a live holder renews
every TTL/3 its lease always has at least 2·TTL/3 left: d < 2·TTL/3 (20 s at the default TTL
of 30 s) never lets a live lease be taken. A renewal landing late by δ takes δ off that.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote


def is_live(owner: str | None, expires: float | None, now: float) -> bool:
    return owner is not None and expires is not None and expires > now


class Holding:
    """One lease a keeper renews: lost is set when a renewal finds it gone."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.lost = threading.Event()
        self.renewals = 0


class LeaseKeeper:
    """Renews every lease one gate holds, every ``ttl / 3`` seconds, from one thread with its
    own SQLite connection. The thread starts with the first lease held and lives as long as the
    gate (a daemon: it never keeps a process alive)."""

    def __init__(
        self,
        path: Path,
        owner: str,
        *,
        ttl: float,
        wall_clock: Callable[[], float],
        busy_timeout: float,
    ) -> None:
        self.owner = owner
        self._path = path
        self._ttl = ttl
        self._wall_clock = wall_clock
        self._busy_timeout = busy_timeout
        self._held: dict[str, Holding] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, run_id: str) -> Holding:
        holding = Holding(run_id)
        with self._lock:
            self._held[run_id] = holding
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"signoff-leases-{self.owner}", daemon=True
                )
                self._thread.start()
        return holding

    def release(self, holding: Holding) -> None:
        with self._lock:
            if self._held.get(holding.run_id) is holding:
                del self._held[holding.run_id]

    def holds(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._held

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        while True:
            time.sleep(self._ttl / 3)
            with self._lock:
                held = list(self._held.values())
                if not held:  # nothing to renew: the next hold starts a new thread
                    self._thread = None
                    if conn is not None:
                        conn.close()
                    return
            try:
                if conn is None:
                    conn = sqlite3.connect(
                        f"file:{quote(str(self._path))}?mode=rw",
                        uri=True,
                        timeout=self._busy_timeout,
                        isolation_level=None,
                    )
                    conn.execute("PRAGMA synchronous = FULL")
                for holding in held:
                    self._renew(conn, holding)
            except sqlite3.Error:
                # Busy, full or gone: the leases may still be ours; the next beat tries again.
                # A lease that meanwhile expired is found lost by the session's next write.
                continue

    def _renew(self, conn: sqlite3.Connection, holding: Holding) -> None:
        renewed = conn.execute(
            "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?",
            (self._wall_clock() + self._ttl, holding.run_id, self.owner),
        ).rowcount
        if renewed == 1:
            holding.renewals += 1
        else:
            holding.lost.set()
            self.release(holding)
