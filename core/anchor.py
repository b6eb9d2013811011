"""Anchoring the chain's head outside the database before an approved side effect starts.

Rules:

1. The kept head (core/heads.py) only moves forward: every writer (each proxy's gate, the tray's
   witness) takes the lock beside the database, reads the kept head, and writes its own only
   when it is further along the same database's chain. Two writers never move it backwards.
2. Before the kept head is moved, and before a grant is executed, the database must still hold
   the kept head: the same database, the event at the head's sequence with the head's hash.
   One that does not (a copy restored from before it, a rewritten log, another database) raises
   ``DatabaseRestored``, naming what differs; nothing runs.
3. An approved side effect starts only once the head that includes its ``step.tool_started``
   is kept: a database restored from before that point then executes nothing (rule 2).
4. A keyring that fails or does not answer in time raises ``NotAnchored``: nothing runs.
5. One keyring read and one write per approved side effect at most: the check before the start
   uses the head this process last read or wrote (it is at or before the kept one), and reads
   the keyring only when it knows none; the compare-and-write reads and writes it. The threads
   of one process move one database's head one at a time, and a thread whose head another
   thread kept while it waited is done without a keyring call (after checking, rule 2, that
   the database holds what was kept). A gate keeps the database's last event, not only its own:
   the calls of one busy proxy that started meanwhile then share its keyring write instead of
   queueing on the lock beside the database one by one.

The compare-before-write runs whole on the keyring's call thread (core/keyring_calls.py), under
the lock, so a caller that gave up waiting never leaves half of one behind.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from core import chain, keyring_calls
from core.chain import Head
from core.errors import DatabaseRestored, HeadUnavailable, LockTimeout, NotAnchored
from core.filelock import locked
from core.heads import HeadStore
from core.store import Store

LOCK_SECONDS = 10.0


class Anchor:
    """Keeps ``store``'s head in ``heads`` before approved side effects (rules 1-4)."""

    def __init__(self, heads: HeadStore, timeout: float = keyring_calls.TIMEOUT) -> None:
        self.heads = heads
        self.timeout = timeout
        self._known: dict[Path, Head] = {}  # the kept head this process last read or wrote
        self._moving: dict[Path, threading.Lock] = {}  # held while a thread moves one (rule 5)
        self._guard = threading.Lock()

    def kept(self, database: Path) -> Head | None:
        """The head kept for the database at ``database`` (check it with ``holds``): the one
        this process last read or wrote there, else read from the keyring. The kept head only
        moves forward, so one known here is at or before the kept one: a database that does
        not hold it does not hold the kept one either, and the compare-and-write of
        ``advance`` checks the kept one itself."""
        known = self._known.get(database)
        if known is not None:
            return known
        try:
            kept = self.heads.load(database)
        except HeadUnavailable as e:
            raise NotAnchored(f"the chain's head cannot be read from the keyring: {e}") from None
        if kept is not None:
            self._known[database] = kept
        return kept

    def check(self, store: Store) -> Head | None:
        """The kept head, after checking that the database still holds it (rule 2)."""
        kept = self.kept(store.path)
        if kept is not None:
            holds(store, kept)
        return kept

    def advance(self, store: Store, head: Head, *, latest: bool = False) -> Head:
        """Keep ``head`` (or leave a further one kept), rule 1; the head kept afterwards. With
        ``latest``, the database's last event when it is further than ``head`` (a gate's, whose
        head needs no verifying; never the witness's, which keeps only what it verified)."""

        def compare_and_write() -> Head:
            with locked(lock_path(store), LOCK_SECONDS):
                kept = self.heads.load(path)
                if kept is not None:
                    _holds_read_apart(path, database_id, kept)
                    if kept.database_id == head.database_id and kept.seq >= head.seq:
                        return kept
                keeping = _last_read_apart(path, database_id) if latest else head
                if keeping.seq < head.seq:
                    keeping = head
                self.heads.save(path, keeping)
                return keeping

        path, database_id = store.path, store.database_id
        deadline = self.timeout + LOCK_SECONDS
        with self._guard:
            moving = self._moving.setdefault(path, threading.Lock())
        if not moving.acquire(timeout=deadline):
            raise NotAnchored(
                f"the chain's head cannot be kept in the keyring: this process's earlier keyring"
                f" call for {path} has not ended within {deadline:g} s"
            )
        try:
            known = self._known.get(path)
            if known is not None and known.database_id == database_id and known.seq >= head.seq:
                try:  # kept by another thread meanwhile: the database must still hold it
                    _holds_read_apart(path, database_id, known)
                except DatabaseRestored:
                    self._known.pop(path, None)
                    raise
                except sqlite3.Error as e:
                    raise NotAnchored(f"the chain's head cannot be checked: {e}") from None
                return known
            try:
                kept = keyring_calls.call(compare_and_write, deadline)
            except DatabaseRestored:
                self._known.pop(path, None)
                raise
            except (
                HeadUnavailable, LockTimeout, keyring_calls.KeyringTimeout, OSError, sqlite3.Error,
            ) as e:  # fmt: skip
                raise NotAnchored(f"the chain's head cannot be kept in the keyring: {e}") from None
            self._known[path] = kept
            return kept
        finally:
            moving.release()


def holds(store: Store, kept: Head) -> None:
    """Raise ``DatabaseRestored`` unless the database holds ``kept`` (rule 2)."""
    _holds(store.path, store.database_id, kept, store.event_rows)


def _holds(path: Path, database_id: str, kept: Head, event_rows: Callable[..., list[Any]]) -> None:
    if kept.database_id != database_id:
        raise DatabaseRestored(
            f"the database at {path} is {database_id}, but the head kept for this place is of"
            f" database {kept.database_id}: it was replaced. Nothing runs."
        )
    if kept.seq == 0:
        return
    rows = event_rows(kept.seq - 1, kept.seq, 1)
    if not rows:
        raise DatabaseRestored(
            f"the database ends before event {kept.seq}, which was anchored before an approved"
            " side effect: an older copy was put back, or events were deleted. Nothing runs."
        )
    if rows[0][6] != kept.hash:
        raise DatabaseRestored(
            f"event {kept.seq} is not the event anchored there before an approved side effect:"
            " the database was restored from an older copy and written since, or rewritten."
            " Nothing runs."
        )


def _holds_read_apart(path: Path, database_id: str, kept: Head) -> None:
    """``holds`` through a connection of its own: the store's belongs to its caller's thread."""
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=LOCK_SECONDS)
    try:

        def event_rows(after: int, up_to: int, limit: int) -> list[Any]:
            return conn.execute(
                "SELECT seq, run_id, step_idx, kind, payload, at, hash FROM events"
                " WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                (after, up_to, limit),
            ).fetchall()

        _holds(path, database_id, kept, event_rows)
    finally:
        conn.close()


def _last_read_apart(path: Path, database_id: str) -> Head:
    """The database's last committed event, read through a connection of its own."""
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=LOCK_SECONDS)
    try:
        row = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    if row is None:
        return Head(database_id, 0, chain.genesis(database_id))
    return Head(database_id, int(row[0]), str(row[1]))


def lock_path(store: Store) -> Path:
    return store.path.with_name(store.path.name + ".lock")
