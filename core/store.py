"""The durable store: one SQLite file, owned by the operator, shared by several processes.

Rules:

1. WAL, ``synchronous=FULL`` (every commit is synced), foreign keys on, a busy timeout, and
   ``trusted_schema=OFF``. Writes happen only inside ``transaction()``, which takes the write
   lock up front (``BEGIN IMMEDIATE``) so that a read-then-write never deadlocks another process.
2. The file is the operator's: created 0600 in a directory created 0700; refused when the file,
   its WAL, or its directory can be written by group or others, belongs to another user, or is
   a symbolic link; refused when it carries a trigger or a view (checked at open, and again
   whenever the schema changes under an open store).
3. A database at an unknown, newer schema version is refused; an older one is migrated.
   A SQLite file that is not Signoff's is refused, never migrated into.
4. An event is appended in the transaction of the state change it explains and chained to the
   event before it (core/chain.py). The chain's genesis is tied to a random database id made
   with the database.
5. SQLite's "busy" and "full" are named (``StoreBusy``, ``StoreFull``); the transaction is rolled
   back and nothing half-written remains.
"""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from core import canonical, chain, private_files
from core.chain import EventRow, Head
from core.errors import (
    DatabaseMissing,
    LoneSurrogate,
    NotASignoffDatabase,
    SchemaTooNew,
    StoreBusy,
    StoreError,
    StoreFull,
    UnexpectedSchemaObject,
)
from core.migrations import LATEST, MIGRATIONS

if TYPE_CHECKING:  # loaded once an observer is registered: no cost for a store without
    from core.observe import Observer, Relay

DEFAULT_BUSY_TIMEOUT = 30.0
_EVENT_KIND = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
_CHECK_PERMISSIONS = private_files.CHECKED


def format_time(moment: datetime) -> str:
    """The one text form of a time in the store: UTC, microseconds, ``Z``."""
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no place in the record; give it a time zone")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_now() -> str:
    return format_time(datetime.now(UTC))


class Store:
    """An open Signoff database. One connection; not shared between threads."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        database_id: str,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        self.path = path
        self.database_id = database_id
        self.busy_timeout = busy_timeout
        self._conn = conn
        self._schema_version = self._read_schema_version()
        # When a list, each committed transaction that changed a row is recorded as (purpose,
        # event kinds): tests hold every state change to its events and compare transaction
        # boundaries.
        self.trace: list[tuple[str, tuple[str, ...]]] | None = None
        self.observers: list[Relay] = []  # told of each commit (core/observe.py)

    def observe(self, observer: Observer) -> None:
        """Tell ``observer`` of every transaction this store commits from now on, after it
        commits, on a thread of its own (core/observe.py); registering it again changes
        nothing."""
        from core.observe import Relay

        if all(relay.observer is not observer for relay in self.observers):
            self.observers.append(Relay(observer))

    def flush_observers(self, timeout: float = 10.0) -> bool:
        """Wait, at most ``timeout`` seconds each, until every observer was told of every
        commit so far; False when one was not."""
        return all([relay.flush(timeout) for relay in self.observers])

    # --- opening ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        readonly: bool = False,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> Store:
        """Open (and, with ``create``, make) the database at ``path``, or raise a ``StoreError``.

        ``readonly`` opens without writing anything, migrations included, for verification.
        """
        path = Path(path).absolute()
        if not path.exists():
            if not create or readonly:
                raise DatabaseMissing(f"there is no Signoff database at {path}")
            _create_owner_only(path)
        _check_owner_only(path)
        mode = "ro" if readonly else "rw"
        try:
            conn = sqlite3.connect(
                f"file:{quote(str(path))}?mode={mode}",
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
            )
        except sqlite3.Error as e:
            raise NotASignoffDatabase(f"{path} cannot be opened as SQLite: {e}") from None
        try:
            database_id = _prepare(conn, path, busy_timeout=busy_timeout, readonly=readonly)
        except BaseException:
            conn.close()
            raise
        return cls(path, conn, database_id, busy_timeout)

    def close(self) -> None:
        for relay in self.observers:
            relay.stop()  # told what is queued, on its own thread
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transactions -------------------------------------------------------------------

    @contextmanager
    def transaction(self, purpose: str = "state") -> Iterator[Transaction]:
        """One write transaction: everything in it commits (synced) or nothing does.

        ``purpose`` is "state" for a change of the record (which must append its events) and
        "lease" for the lease's own bookkeeping, which writes no event.
        """
        conn = self._conn
        with _named_sqlite_errors(self.path):
            conn.execute("BEGIN IMMEDIATE")
        try:
            with _named_sqlite_errors(self.path):
                self._check_schema_unchanged()
            tx = Transaction(self)
            changes = conn.total_changes
            yield tx
            changed = conn.total_changes != changes
            with _named_sqlite_errors(self.path):
                conn.execute("COMMIT")
            if self.trace is not None and changed:
                self.trace.append((purpose, tuple(tx.kinds)))
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        for relay in self.observers:
            relay.tell(tx.rows)  # committed: never a rollback

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A consistent read: everything read inside sees one state of the database."""
        conn = self._conn
        with _named_sqlite_errors(self.path):
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    # --- reading the chain --------------------------------------------------------------

    def head(self) -> Head:
        """The last event's place in the chain (sequence 0 and the genesis when empty)."""
        with _named_sqlite_errors(self.path):
            row = self._conn.execute(
                "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return Head(self.database_id, 0, chain.genesis(self.database_id))
        return Head(self.database_id, row[0], row[1])

    def event_rows(self, after: int, up_to: int, limit: int) -> list[EventRow]:
        """Up to ``limit`` events with ``after < seq <= up_to``, in order."""
        with _named_sqlite_errors(self.path):
            rows: list[EventRow] = self._conn.execute(
                "SELECT seq, run_id, step_idx, kind, payload, at, hash FROM events"
                " WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                (after, up_to, limit),
            ).fetchall()
        return rows

    # --- internals ----------------------------------------------------------------------

    def _read_schema_version(self) -> int:
        version: int = self._conn.execute("PRAGMA schema_version").fetchone()[0]
        return version

    def _check_schema_unchanged(self) -> None:
        # Cheap (one header read); only a changed schema costs the full look at sqlite_master.
        version = self._read_schema_version()
        if version != self._schema_version:
            _refuse_foreign_objects(self._conn, self.path)
            self._schema_version = version


class Transaction:
    """Writes inside one ``Store.transaction()``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.conn = store._conn
        self.kinds: list[str] = []  # the kinds of the events appended, in order
        self._head: Head | None = None  # the chain's head as this transaction left it
        self.rows: list[EventRow] = []  # the events appended, for the store's observers

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        with _named_sqlite_errors(self._store.path):
            return self.conn.execute(sql, params)

    def append_event(
        self,
        *,
        kind: str,
        payload: Any,
        at: str,
        run_id: str | None = None,
        step: int | None = None,
    ) -> Head:
        """Append one event to the chain, in this transaction, and return its place."""
        return self.append_events([(run_id, step, kind, payload, at)])

    def append_events(self, events: list[tuple[str | None, int | None, str, Any, str]]) -> Head:
        """Append several events in order: (run_id, step, kind, payload, at) each."""
        store = self._store
        head = self._head or store.head()  # read once: the write lock is held until commit
        prev, seq = head.hash, head.seq
        rows = []
        for run_id, step, kind, payload, at in events:
            if not _EVENT_KIND.fullmatch(kind):
                raise ValueError(f"event kind {kind!r} is not a dotted lowercase name")
            for text in (run_id, at):
                if text is not None and not _encodable(text):
                    raise LoneSurrogate("a run id or time holds a lone UTF-16 surrogate")
            seq += 1
            payload_text = canonical.dumps_text(payload)
            prev = chain.event_hash(
                prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload_text, at=at
            )
            rows.append((seq, run_id, step, kind, payload_text, at, prev))
            self.kinds.append(kind)
        with _named_sqlite_errors(store.path):
            self.conn.executemany(
                "INSERT INTO events (seq, run_id, step_idx, kind, payload, at, hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        self.rows.extend(rows)
        self._head = Head(store.database_id, seq, prev)
        return self._head


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@contextmanager
def _named_sqlite_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as e:
        name = getattr(e, "sqlite_errorname", "")
        if _busy(e):
            raise StoreBusy(
                f"{path} stayed locked by another process past the busy timeout; try again"
            ) from e
        if name.startswith("SQLITE_FULL"):
            raise StoreFull(
                f"no space left to write {path}; nothing was written. Free space and try again"
            ) from e
        if name.startswith("SQLITE_READONLY"):
            raise StoreError(f"{path} was opened read-only; nothing was written") from e
        raise
    except sqlite3.DatabaseError as e:
        if isinstance(e, sqlite3.IntegrityError | sqlite3.ProgrammingError):
            raise
        raise StoreError(f"{path}: {e}") from e


def _create_owner_only(path: Path) -> None:
    private_files.make_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return  # Another process made it first; it is checked like any existing file.
    os.close(fd)


def _check_owner_only(path: Path, what: str = "database") -> None:
    if not _CHECK_PERMISSIONS:
        return
    if what == "database":
        _check_owner_only(path.parent, what="directory")
        for side in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if side.exists() or side == path:
                _check_one(side, what="database file")
    else:
        _check_one(path, what=what)


def _check_one(path: Path, *, what: str) -> None:
    private_files.check(path, what, kind=None)


def _prepare(conn: sqlite3.Connection, path: Path, *, busy_timeout: float, readonly: bool) -> str:
    """Settings, checks and migrations on a fresh connection; returns the database id."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA trusted_schema = OFF")
            conn.execute("PRAGMA synchronous = FULL")
            version: int = conn.execute("PRAGMA user_version").fetchone()[0]
            _refuse_foreign_objects(conn, path)
            break
        except sqlite3.OperationalError as e:
            # Busy at once while another process converts the file to WAL: wait it out.
            if not _busy(e) or time.monotonic() >= deadline:
                with _named_sqlite_errors(path):
                    raise
            time.sleep(0.01)
        except sqlite3.DatabaseError as e:
            raise NotASignoffDatabase(f"{path} is not a SQLite database: {e}") from None
    if version > LATEST:
        raise SchemaTooNew(
            f"{path} has schema version {version}, newer than this Signoff knows ({LATEST});"
            " use the newer Signoff that wrote it"
        )
    if not readonly:
        _ensure_wal(conn, path, busy_timeout)
        with _named_sqlite_errors(path):
            _migrate(conn, path)
    elif version == 0 and _has_tables(conn):
        raise NotASignoffDatabase(f"{path} is a SQLite database, but not Signoff's")
    elif version < LATEST:
        raise StoreError(
            f"{path} is at schema version {version}; open it once with a writing command to"
            " upgrade it before verifying"
        )
    row = conn.execute("SELECT value FROM meta WHERE key = 'database_id'").fetchone()
    if row is None:
        raise NotASignoffDatabase(f"{path} has no database id: it is not a Signoff database")
    database_id: str = row[0]
    return database_id


def _busy(e: sqlite3.OperationalError) -> bool:
    return str(getattr(e, "sqlite_errorname", "")).startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None


def _refuse_foreign_objects(conn: sqlite3.Connection, path: Path) -> None:
    rows = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')"
    ).fetchall()
    if rows:
        names = ", ".join(f"{kind} {name!r}" for kind, name in rows)
        raise UnexpectedSchemaObject(
            f"{path} carries {names}; Signoff never makes these, and one could rewrite what it"
            " writes. Remove it, or restore the database from a copy you trust"
        )


def _ensure_wal(conn: sqlite3.Connection, path: Path, busy_timeout: float) -> None:
    """Put the database in WAL mode, waiting out other processes doing the same.

    Changing the journal mode returns SQLITE_BUSY at once, without the busy handler, while
    another connection is in the middle of opening or converting the same file; so this retries
    until the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal":
                return
            raise StoreError(f"{path} cannot be put in WAL mode")
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() >= deadline:
                with _named_sqlite_errors(path):
                    raise
            time.sleep(0.01)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    if conn.execute("PRAGMA user_version").fetchone()[0] >= LATEST:
        return  # The usual case: no write lock taken just to open.
    for migration in MIGRATIONS:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            current: int = conn.execute("PRAGMA user_version").fetchone()[0]
            if current == 0 and _has_tables(conn):
                raise NotASignoffDatabase(f"{path} is a SQLite database, but not Signoff's")
            if current >= migration.version:
                conn.execute("ROLLBACK")
                continue
            for statement in migration.statements:
                conn.execute(statement)
            now = utc_now()
            if migration.version == 1:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('database_id', ?), ('created_at', ?)",
                    (secrets.token_hex(16), now),
                )
            conn.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, now),
            )
            conn.execute(f"PRAGMA user_version = {migration.version}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
