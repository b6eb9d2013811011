"""Anchoring the chain's head outside the database before an approved side effect starts.

Rules:

1. The kept head (core/heads.py) only moves forward: every writer (each proxy's gate, the tray's
   witness) takes the lock beside the database, reads the kept head, and writes its own only
   when it is further along the same database's chain. Two writers never move it backwards.
2. Before the kept head is moved, and before a grant is executed, the database must still hold
   the kept head: the same database, the event at the head's sequence with the head's hash.
   One that does not (a copy restored from before it, a rewritten log) raises
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
   queueing on the lock beside the database one by one. (The first in a process also reads
   the places of rule 6, and records a place that holds no record yet, once.)
6. The head is kept, and looked up, by the database's id (core/heads.py), wherever the file
   lies and however it is reached: a copy of a database put back behind a symbolic link, in
   another folder, or under another name meets its kept head and must hold it (rule 2). Another
   database lying where one was anchored (one the keyring never saw, or one anchored
   elsewhere) raises ``DatabaseUnconfirmed``: nothing approved runs until the operator confirms
   it (``signoff anchor accept``, or the tray's alarm menu; ``core.heads.confirm``).
7. Before a grant is executed, the events from the decision (or the standing grant) it rests
   on up to the kept head are recomputed and must chain to the kept hash (``holds_since``):
   rule 2 alone reads the hash stored at the head's sequence, which an older copy padded with
   rows carrying the stored hashes of the live database would pass, without the event that
   says the grant already ran.

The compare-before-write runs whole on the keyring's call thread (core/keyring_calls.py), under
the lock, so a caller that gave up waiting never leaves half of one behind.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any
from urllib.parse import quote

from core import chain, keyring_calls
from core.chain import Head
from core.errors import ChainBroken, DatabaseRestored, HeadUnavailable, LockTimeout, NotAnchored
from core.filelock import locked
from core.heads import HeadStore, kept_head, places
from core.store import Store

LOCK_SECONDS = 10.0
CHECK_PAGE = 5_000  # events read at a time by ``holds_since``


class Anchor:
    """Keeps ``store``'s head in ``heads`` before approved side effects (rules 1-6)."""

    def __init__(self, heads: HeadStore, timeout: float = keyring_calls.TIMEOUT) -> None:
        self.heads = heads
        self.timeout = timeout
        self._known: dict[str, Head] = {}  # per database id: the kept head last read or written
        self._placed: set[tuple[str, str]] = set()  # (place, database id) checked (rule 6)
        self._moving: dict[str, threading.Lock] = {}  # held while a thread moves one (rule 5)
        self._guard = threading.Lock()

    def kept(self, store: Store) -> Head | None:
        """The head kept for ``store``'s database (check it with ``holds``): the one this
        process last read or wrote for it, else read from the keyring, by the database's id
        (rule 6). The kept head only moves forward, so one known here is at or before the kept
        one: a database that does not hold it does not hold the kept one either, and the
        compare-and-write of ``advance`` checks the kept one itself."""
        known = self._known.get(store.database_id)
        if known is not None and self._is_placed(store.path, store.database_id):
            return known
        try:
            kept, unrecorded = kept_head(self.heads, store.path, store.database_id)
        except HeadUnavailable as e:
            raise NotAnchored(f"the chain's head cannot be read from the keyring: {e}") from None
        self._mark_placed(store.path, store.database_id, unrecorded)
        if kept is not None:
            known = self._known.get(store.database_id)
            if known is None or known.seq < kept.seq:
                self._known[store.database_id] = kept
        return self._known.get(store.database_id)

    def check(self, store: Store) -> Head | None:
        """The kept head, after checking that the database still holds it (rule 2)."""
        kept = self.kept(store)
        if kept is not None:
            holds(store, kept)
        return kept

    def advance(self, store: Store, head: Head, *, latest: bool = False) -> Head:
        """Keep ``head`` (or leave a further one kept), rule 1; the head kept afterwards. With
        ``latest``, the database's last event when it is further than ``head`` (a gate's, whose
        head needs no verifying; never the witness's, which keeps only what it verified)."""

        def compare_and_write() -> Head:
            with locked(lock_path(store), LOCK_SECONDS):
                unrecorded: list[str] = []
                if placed:  # this process has read this database's places already (rule 6)
                    kept = self.heads.load(database_id)
                else:
                    kept, unrecorded = kept_head(self.heads, path, database_id)
                if kept is not None:
                    _holds_read_apart(path, database_id, kept)
                    if kept.seq >= head.seq:
                        return kept
                keeping = _last_read_apart(path, database_id) if latest else head
                if keeping.seq < head.seq:
                    keeping = head
                self.heads.save(keeping)
                for place in unrecorded:  # once per place and database (core/heads.py rule 2)
                    self.heads.place(place, keeping)
                return keeping

        path, database_id = store.path, store.database_id
        if head.database_id != database_id:
            raise DatabaseRestored(
                f"the head to keep is of database {head.database_id}, not of the database at"
                f" {path} ({database_id}). Nothing runs."
            )
        deadline = self.timeout + LOCK_SECONDS
        with self._guard:
            moving = self._moving.setdefault(database_id, threading.Lock())
        if not moving.acquire(timeout=deadline):
            raise NotAnchored(
                f"the chain's head cannot be kept in the keyring: this process's earlier keyring"
                f" call for {path} has not ended within {deadline:g} s"
            )
        try:
            placed = self._is_placed(path, database_id)
            known = self._known.get(database_id)
            if placed and known is not None and known.seq >= head.seq:
                try:  # kept by another thread meanwhile: the database must still hold it
                    _holds_read_apart(path, database_id, known)
                except DatabaseRestored:
                    self._known.pop(database_id, None)
                    raise
                except sqlite3.Error as e:
                    raise NotAnchored(f"the chain's head cannot be checked: {e}") from None
                return known
            try:
                kept = keyring_calls.call(compare_and_write, deadline)
            except DatabaseRestored:
                self._known.pop(database_id, None)
                raise
            except (
                HeadUnavailable, LockTimeout, keyring_calls.KeyringTimeout, OSError, sqlite3.Error,
            ) as e:  # fmt: skip
                raise NotAnchored(f"the chain's head cannot be kept in the keyring: {e}") from None
            self._mark_placed(path, database_id)
            self._known[database_id] = kept
            return kept
        finally:
            moving.release()

    def _is_placed(self, path: Path, database_id: str) -> bool:
        with self._guard:
            return all((place, database_id) in self._placed for place in places(path))

    def _mark_placed(self, path: Path, database_id: str, unrecorded: Collection[str] = ()) -> None:
        with self._guard:
            self._placed.update(
                (place, database_id) for place in places(path) if place not in unrecorded
            )


def holds(store: Store, kept: Head) -> None:
    """Raise ``DatabaseRestored`` unless the database holds ``kept`` (rule 2)."""
    _holds(store.path, store.database_id, kept, store.event_rows)


def first_event(store: Store, run_id: str, step: int, kind: str) -> int:
    """The sequence of the step's first event of ``kind`` (where a grant's window starts,
    rule 7); past the end when there is none (the grant's own check then refuses it)."""
    with store.snapshot() as conn:
        row = conn.execute(
            "SELECT min(seq) FROM events WHERE run_id = ? AND step_idx = ? AND kind = ?",
            (run_id, step, kind),
        ).fetchone()
    return int(row[0]) if row[0] is not None else store.head().seq + 1


def holds_since(store: Store, kept: Head, since: int) -> None:
    """``holds``, and the events from ``since`` to the kept head are the ones anchored (rule
    7): recomputed from the one before ``since``, they chain to the kept hash. Else
    ``DatabaseRestored``, naming the first event that differs."""
    holds(store, kept)
    if since > kept.seq:
        return  # nothing from ``since`` was anchored yet
    start = None
    if since > 1:
        before = store.event_rows(since - 2, since - 1, 1)
        if not before:
            raise DatabaseRestored(
                f"the database lacks event {since - 1}, before events anchored in the keyring:"
                " events were deleted, or an older copy was put back. Nothing runs."
            )
        start = Head(store.database_id, since - 1, before[0][6])
    verifier = chain.ChainVerifier(store.database_id, start=start, witnessed=kept)
    after = max(since - 2, 0)
    try:
        while after < kept.seq:
            rows = store.event_rows(after, kept.seq, CHECK_PAGE)
            if not rows:
                break
            verifier.feed(rows)
            after = rows[-1][0]
        verifier.finish()
    except ChainBroken as e:
        raise DatabaseRestored(
            f"the events anchored in the keyring up to event {kept.seq} are not the ones in the"
            f" database: {e}. An older copy was put back and made to look longer, or the log"
            " was rewritten. Nothing runs."
        ) from None


def _holds(path: Path, database_id: str, kept: Head, event_rows: Callable[..., list[Any]]) -> None:
    if kept.database_id != database_id:
        raise DatabaseRestored(
            f"the database at {path} is {database_id}, but the head checked against it is of"
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

        row = conn.execute("SELECT value FROM meta WHERE key = 'database_id'").fetchone()
        found = None if row is None else row[0]
        if found != database_id:  # the file was swapped under the open store
            raise DatabaseRestored(
                f"the file at {path} is now database {found}, not {database_id}, the one"
                " opened there: it was replaced. Nothing runs."
            )
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
