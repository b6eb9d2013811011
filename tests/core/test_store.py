"""The store on real SQLite files: settings, ownership, refusals, migrations, busy and full."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.errors import (
    DatabaseMissing,
    LoneSurrogate,
    NotASignoffDatabase,
    SchemaTooNew,
    StoreBusy,
    StoreError,
    StoreFull,
    UnexpectedSchemaObject,
    UnsafePermissions,
)
from core.migrations import LATEST, MIGRATIONS
from core.store import Store
from core.verify import verify
from tests.builders import record_run, record_runs
from tests.conftest import need


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.guarantee("G-STORE-1")
def test_a_new_database_and_its_wal_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    """With a umask that would let anyone in (0), the file, its WAL and its shared memory are
    still 0600 and ours, and the directory 0700. The WAL exists only while a connection is
    open (the last close folds it back into the file), so it is looked at then."""
    path = tmp_path / "fresh" / "signoff.db"
    with _umask(0), Store.open(path) as store:
        record_run(store, "r1")
        parts = [path.with_name(f"signoff.db{suffix}") for suffix in ("", "-wal", "-shm")]
        for part in parts:
            st = os.lstat(part)
            assert (part.name, stat.S_IMODE(st.st_mode), st.st_uid) == (
                part.name, 0o600, os.geteuid(),
            )  # fmt: skip
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_the_connection_is_wal_synced_with_foreign_keys_and_a_busy_timeout(store: Store) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0


def test_migrations_are_recorded_and_the_version_set(store: Store) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
    recorded = conn.execute("SELECT version, name FROM migrations ORDER BY version").fetchall()
    assert recorded == [(m.version, m.name) for m in MIGRATIONS]


def test_reopening_keeps_the_database_id_and_applies_nothing_twice(home: Path) -> None:
    with Store.open(home / "signoff.db") as a:
        first = a.database_id
    with Store.open(home / "signoff.db") as b:
        assert b.database_id == first
        assert b._conn.execute("SELECT count(*) FROM migrations").fetchone()[0] == len(MIGRATIONS)


def test_each_database_gets_its_own_random_id(tmp_path: Path) -> None:
    ids = set()
    for n in range(3):
        with Store.open(tmp_path / f"{n}.db") as s:
            ids.add(s.database_id)
    assert len(ids) == 3
    assert all(len(i) == 32 for i in ids)


def test_processes_creating_one_database_at_once_agree_on_it(tmp_path: Path) -> None:
    """Four processes race to create and migrate one new file, ten times over: none fails
    (converting to WAL answers "busy" without waiting; the store waits it out), and all agree
    on one database id."""
    code = "import sys; from core.store import Store\nprint(Store.open(sys.argv[1]).database_id)\n"
    for trial in range(10):
        path = tmp_path / f"shared-{trial}.db"
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for _ in range(4)
        ]  # fmt: skip
        outs = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        assert len({out.strip() for out, _ in outs}) == 1


def test_opening_a_missing_database_without_create_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatabaseMissing):
        Store.open(tmp_path / "nothing.db", create=False)
    with pytest.raises(DatabaseMissing):
        Store.open(tmp_path / "nothing.db", readonly=True)
    assert not (tmp_path / "nothing.db").exists()


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
@pytest.mark.guarantee("G-STORE-1")
def test_a_database_others_can_write_is_refused(home: Path, mode: int) -> None:
    path = home / "signoff.db"
    Store.open(path).close()
    path.chmod(mode)
    with pytest.raises(UnsafePermissions):
        Store.open(path)


@pytest.mark.parametrize("mode", [0o720, 0o702, 0o777])
@pytest.mark.guarantee("G-STORE-1")
def test_a_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    d = tmp_path / "d"
    Store.open(d / "signoff.db").close()
    d.chmod(mode)
    with pytest.raises(UnsafePermissions):
        Store.open(d / "signoff.db")
    with pytest.raises(UnsafePermissions):
        Store.open(d / "new.db")


@pytest.mark.guarantee("G-STORE-1")
def test_a_wal_file_others_can_write_is_refused(home: Path) -> None:
    path = home / "signoff.db"
    with Store.open(path) as store:
        record_run(store, "r1")
        wal = path.with_name("signoff.db-wal")
        assert wal.exists()
        wal.chmod(0o666)
        with pytest.raises(UnsafePermissions):
            Store.open(path)


@pytest.mark.guarantee("G-STORE-1")
def test_a_symbolic_link_in_place_of_the_database_is_refused(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.db"
    Store.open(real).close()
    (home / "signoff.db").symlink_to(real)
    with pytest.raises(UnsafePermissions):
        Store.open(home / "signoff.db")


@pytest.mark.parametrize("part", ["signoff.db", "signoff.db-wal", "."])
@pytest.mark.guarantee("G-STORE-1")
def test_a_database_its_wal_or_its_directory_owned_by_another_user_is_refused(
    home: Path, part: str
) -> None:
    need(os.geteuid() == 0, "only root can give a file to another user")
    path = home / "signoff.db"
    with Store.open(path) as store:
        record_run(store, "r1")  # the WAL exists while the store is open
        os.chown(home / part, 65534, 65534)
        with pytest.raises(UnsafePermissions):
            Store.open(path)
        os.chown(home / part, os.geteuid(), os.getegid())  # so the store can close cleanly


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TRIGGER t AFTER INSERT ON events BEGIN DELETE FROM approvals; END",
        "CREATE VIEW v AS SELECT * FROM runs",
        "CREATE TEMP VIEW ignored AS SELECT 1",  # a temp object never reaches the file: allowed
    ],
    ids=["trigger", "view", "temp-view"],
)
@pytest.mark.guarantee("G-STORE-2")
def test_a_trigger_or_a_view_in_the_file_is_refused(home: Path, ddl: str) -> None:
    path = home / "signoff.db"
    Store.open(path).close()
    db = _raw(path)
    db.execute(ddl)
    db.close()
    if "TEMP" in ddl:
        Store.open(path).close()
        return
    with pytest.raises(UnexpectedSchemaObject):
        Store.open(path)
    with pytest.raises(UnexpectedSchemaObject):
        Store.open(path, readonly=True)


@pytest.mark.guarantee("G-STORE-2")
def test_a_trigger_added_while_the_store_is_open_stops_the_next_write(store: Store) -> None:
    db = _raw(store.path)
    db.execute("CREATE TRIGGER t AFTER INSERT ON events BEGIN DELETE FROM approvals; END")
    db.close()
    with pytest.raises(UnexpectedSchemaObject), store.transaction() as tx:
        tx.append_event(kind="run.started", payload={}, at="t")
    assert store.head().seq == 0


@pytest.mark.guarantee("G-STORE-3")
def test_a_database_from_a_newer_signoff_is_refused(home: Path) -> None:
    path = home / "signoff.db"
    Store.open(path).close()
    db = _raw(path)
    db.execute(f"PRAGMA user_version = {LATEST + 1}")
    db.close()
    with pytest.raises(SchemaTooNew):
        Store.open(path)


@pytest.mark.guarantee("G-STORE-3")
def test_a_file_that_is_not_sqlite_is_refused_untouched(home: Path) -> None:
    path = home / "signoff.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    path.chmod(0o600)
    before = path.read_bytes()
    with pytest.raises(NotASignoffDatabase):
        Store.open(path)
    assert path.read_bytes() == before


@pytest.mark.guarantee("G-STORE-3")
def test_someone_elses_sqlite_database_is_refused_not_migrated(home: Path) -> None:
    path = home / "signoff.db"
    db = _raw(path)
    db.execute("CREATE TABLE recipes (name TEXT)")
    db.close()
    path.chmod(0o600)
    with pytest.raises(NotASignoffDatabase):
        Store.open(path)
    db = _raw(path)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("recipes",)]


@pytest.mark.guarantee("G-STORE-4")
def test_a_failed_transaction_leaves_nothing(store: Store) -> None:
    class Boom(Exception):
        pass

    def start_a_run_then_fail() -> None:
        with store.transaction() as tx:
            tx.execute(
                "INSERT INTO runs (id, goal, status, limits, created_at, updated_at)"
                " VALUES ('r', 'g', 'RUNNING', '{}', 't', 't')"
            )
            tx.append_event(kind="run.started", payload={}, at="t", run_id="r")
            raise Boom

    with pytest.raises(Boom):
        start_a_run_then_fail()
    assert store._conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert store.head().seq == 0


def test_an_event_must_name_an_existing_run(store: Store) -> None:
    with pytest.raises(sqlite3.IntegrityError), store.transaction() as tx:
        tx.append_event(kind="run.started", payload={}, at="t", run_id="no-such-run")
    assert store.head().seq == 0


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"kind": "Run Started"}, ValueError),
        ({"kind": "run..started"}, ValueError),
        ({"at": "\ud800"}, LoneSurrogate),
        ({"payload": {"n": 2**60}}, ValueError),
    ],
)
def test_an_event_the_chain_cannot_hold_exactly_is_refused(
    store: Store, fields: dict[str, object], error: type[Exception]
) -> None:
    event: dict[str, object] = {"kind": "run.note", "payload": {}, "at": "t"}
    event.update(fields)
    with pytest.raises(error), store.transaction() as tx:
        tx.append_event(**event)  # type: ignore[arg-type]
    assert store.head().seq == 0


@pytest.mark.guarantee("G-STORE-4")
def test_a_write_lock_held_past_the_busy_timeout_is_named(home: Path) -> None:
    path = home / "signoff.db"
    Store.open(path).close()
    holder = _raw(path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(path, busy_timeout=0.05) as store:
            with pytest.raises(StoreBusy), store.transaction():
                pass
            assert not store._conn.in_transaction
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.guarantee("G-STORE-4")
def test_a_full_disk_rolls_back_and_the_next_write_works_after_space_is_freed(home: Path) -> None:
    path = home / "signoff.db"
    with Store.open(path) as store:
        record_runs(store, 2)
        before = store.head()
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")

        def write_more_than_fits() -> None:
            with store.transaction() as tx:
                for i in range(200):
                    tx.execute(
                        "INSERT INTO runs (id, goal, status, limits, created_at, updated_at)"
                        " VALUES (?, ?, 'RUNNING', '{}', 't', 't')",
                        (f"big-{i}", "x" * 4000),
                    )
                    tx.append_event(
                        kind="run.started", payload={"pad": "y" * 4000}, at="t", run_id=f"big-{i}"
                    )

        with pytest.raises(StoreFull):
            write_more_than_fits()
        assert store.head() == before
        assert verify(store).head == before
        store._conn.execute("PRAGMA max_page_count = 1073741823")
        after = record_run(store, "after-space-freed")
        assert after.seq > before.seq
        assert verify(store).head == after


def test_a_readonly_open_writes_nothing(home: Path) -> None:
    path = home / "signoff.db"
    with Store.open(path) as store:
        record_run(store, "r1")
        head = store.head()
    before = path.read_bytes()
    with Store.open(path, readonly=True) as store:
        assert verify(store).head == head
        with pytest.raises(StoreError), store.transaction() as tx:
            tx.append_event(kind="run.note", payload={}, at="t")
    assert path.read_bytes() == before
