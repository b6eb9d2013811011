"""The run lease: who is executing a running run, and until when. Rules, and the heartbeat.

Rules:

1. A run in RUNNING carries a lease on its own row: an owner (a configured name plus a random
   suffix per gate, so two processes configured alike never share a lease) and an expiry in
   unix seconds by the wall clock. It is taken with the move to RUNNING and released with the
   pause or the end.
2. A lease is live while its expiry is in the future by the reader's wall clock. Lease times
   never come from the injectable clock used for run times.
3. The holder renews it every TTL/3 from a heartbeat thread on its own SQLite connection, for as
   long as the session lives, so a tool call longer than the TTL keeps its lease and a
   consumer reading on the main connection cannot starve the renewal.
4. Every write a session makes requires that it still owns the lease; the writes that start a
   side effect also require that it has not expired, so a stalled loop starts nothing.
5. Attaching to a run leased live by another owner raises ``RunLeased`` and changes nothing; an
   expired lease is taken over, writing ``run.takeover`` (the only event a lease writes).
6. A renewal that finds another owner (or none) marks the lease lost: the session then refuses
   every call with ``LeaseLost``. A tool already running finishes; its outcome is recorded only
   if the session still owns the lease.

Clock skew: a process whose clock runs behind by d sees a lease expire d later, so it never
steals a live one. A process whose clock runs ahead by d sees it expire d earlier; since a live
holder renews every TTL/3, its lease always has at least 2·TTL/3 left, so skew up to 2·TTL/3
(20 s at the default TTL of 30 s) never lets a live lease be stolen.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote


def is_live(owner: str | None, expires: float | None, now: float) -> bool:
    return owner is not None and expires is not None and expires > now


class Heartbeat:
    """Renews one run's lease every ``ttl / 3`` seconds on its own connection."""

    def __init__(
        self,
        path: Path,
        run_id: str,
        owner: str,
        *,
        ttl: float,
        wall_clock: Callable[[], float],
        busy_timeout: float,
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.lost = threading.Event()
        self.renewals = 0
        self._path = path
        self._ttl = ttl
        self._wall_clock = wall_clock
        self._busy_timeout = busy_timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"signoff-lease-{run_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def halt(self) -> None:
        """Stop renewing, without waiting for the thread (safe from a finalizer)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self._busy_timeout + 1)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(
                f"file:{quote(str(self._path))}?mode=rw",
                uri=True,
                timeout=self._busy_timeout,
                isolation_level=None,
            )
        except sqlite3.Error:
            self.lost.set()  # the database is gone: so is any claim to the lease
            return
        try:
            conn.execute("PRAGMA synchronous = FULL")
            while not self._stop.wait(self._ttl / 3):
                if not self._renew(conn):
                    self.lost.set()
                    return
        except sqlite3.Error:
            self.lost.set()
        finally:
            conn.close()

    def _renew(self, conn: sqlite3.Connection) -> bool:
        """True while the lease is ours; a failed attempt is retried at the next beat."""
        try:
            renewed = conn.execute(
                "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?",
                (self._wall_clock() + self._ttl, self.run_id, self.owner),
            ).rowcount
        except sqlite3.OperationalError:
            return True  # busy or full: the lease may still be ours; the next beat tries again
        if renewed:
            self.renewals += 1
        return renewed == 1
