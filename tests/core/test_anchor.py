"""The anchor (core/anchor.py): the threads of one gate share their keyring writes, a head
another thread kept is still checked against the database (rules 2 and 5), and the head is
the database's wherever it lies (rule 6)."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from core import paths
from core.anchor import Anchor
from core.chain import Head
from core.errors import DatabaseRestored, DatabaseUnconfirmed
from core.heads import KeyringHeadStore, MemoryHeadStore, confirm, places
from core.store import Store
from tests.builders import record_run, record_runs
from tests.conftest import KeyringUnderTest
from tests.waiting import WAIT


class CountedHeads(MemoryHeadStore):
    """An in-memory head store that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    def save(self, head: Head) -> None:
        self.saves += 1
        super().save(head)


@pytest.mark.guarantee("G-KEY-2")
def test_threads_of_one_process_share_their_keyring_writes(store: Store) -> None:
    heads = CountedHeads()
    anchor = Anchor(heads)
    record_runs(store, 1)
    anchor.advance(store, store.head())  # the first write: nothing for the others to share yet
    kept: dict[int, tuple[Head, Head]] = {}
    # Every thread's run is in the database before any keeps its head; the thread whose head
    # is the lowest keeps first, then the seven others at once: its one write must cover them.
    recorded, first_kept = threading.Barrier(8), threading.Event()
    own_heads: dict[int, Head] = {}

    def one(n: int) -> None:
        with Store.open(store.path) as mine:
            own = own_heads[n] = record_run(mine, f"thread-{n}")
            recorded.wait(WAIT)
            lowest = min(own_heads.values(), key=lambda h: h.seq) == own
            if not lowest:
                assert first_kept.wait(WAIT)
            kept[n] = (own, anchor.advance(mine, own, latest=True))
            if lowest:
                first_kept.set()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) == 8
    for own, got in kept.values():  # every thread's head is kept, by its write or a later one
        assert got.database_id == own.database_id and got.seq >= own.seq
    assert heads.load(store.database_id) == max(
        (got for _, got in kept.values()), key=lambda h: h.seq
    )
    assert heads.saves == 1 + 1  # the first, then one for all eight (the lowest's own: more)


@pytest.mark.guarantee("G-KEY-2")
def test_a_head_another_thread_kept_is_checked_against_the_database(
    store: Store, tmp_path: Path
) -> None:
    anchor = Anchor(MemoryHeadStore())
    record_runs(store, 1)
    copy = tmp_path / "copy.db"
    with sqlite3.connect(store.path) as conn, sqlite3.connect(copy) as backup:
        conn.backup(backup)
    anchor.advance(store, record_run(store, "later"))  # kept by this process: known here
    with sqlite3.connect(copy) as older, sqlite3.connect(store.path) as database:
        older.backup(database)  # an older copy put back: the kept head is not in it
    with Store.open(store.path) as restored, pytest.raises(DatabaseRestored):
        anchor.advance(restored, restored.head())  # behind the known head, yet refused


def _backup(store: Store, to: Path) -> None:
    """A consistent copy, with SQLite's own backup API (as the user guide says to take one)."""
    to.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with sqlite3.connect(to) as target:
        store._conn.backup(target)


@pytest.mark.parametrize("reached", ["moved", "linked", "copied"])
@pytest.mark.guarantee("G-KEY-2")
def test_a_backup_put_back_anywhere_meets_the_head_kept_for_its_database(
    reached: str, tmp_path: Path, keyring_under_test: KeyringUnderTest
) -> None:
    """The head is kept by the database's id: a copy from before an anchored side effect is
    refused wherever it lies and however it is reached, not only put back in place."""
    heads = KeyringHeadStore(keyring_under_test.backend)  # type: ignore[arg-type]
    share = tmp_path / "share"  # as ~/.local/share holds signoff/signoff.db
    database = share / "signoff" / "signoff.db"
    database.parent.mkdir(mode=0o700, parents=True)
    elsewhere = tmp_path / "restored" / "signoff"
    with Store.open(database) as store:
        record_runs(store, 1)
        _backup(store, elsewhere / "signoff.db")  # approved, not yet run
        Anchor(heads).advance(store, record_run(store, "the payment"))
    if reached == "moved":  # the backup in a folder of its own, opened there
        database = elsewhere / "signoff.db"
    elif reached == "linked":  # the folders moved away, their name a link to the backup's
        share.rename(tmp_path / "moved-away")
        share.symlink_to(elsewhere.parent, target_is_directory=True)
    else:  # a copy beside the real one, opened by its own name
        database = database.with_name("copy.db")
        shutil.copyfile(elsewhere / "signoff.db", database)
    with Store.open(database) as restored:
        with pytest.raises(DatabaseRestored, match="before event"):
            Anchor(heads).check(restored)
        with pytest.raises(DatabaseRestored):
            Anchor(heads).advance(restored, restored.head(), latest=True)


@pytest.mark.guarantee("G-KEY-2")
def test_another_database_where_one_was_anchored_runs_nothing_until_the_operator_confirms(
    home: Path, keyring_under_test: KeyringUnderTest
) -> None:
    heads = KeyringHeadStore(keyring_under_test.backend)  # type: ignore[arg-type]
    database = home / "signoff.db"
    with Store.open(database) as store:
        Anchor(heads).advance(store, record_run(store, "first"))
        first = store.database_id
    for suffix in ("", "-wal", "-shm"):  # a fresh database in its place: the keyring never saw it
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    with Store.open(database) as fresh:
        assert fresh.database_id != first
        with pytest.raises(DatabaseUnconfirmed, match="another database lies where one was"):
            Anchor(heads).check(fresh)
        with pytest.raises(DatabaseUnconfirmed):
            Anchor(heads).advance(fresh, record_run(fresh, "second"))
        assert heads.load(fresh.database_id) is None  # nothing was kept for it meanwhile
        confirm(heads, database, fresh.head())  # the operator's word
        anchor = Anchor(heads)
        assert anchor.advance(fresh, fresh.head()) == fresh.head()
        assert anchor.check(fresh) == fresh.head()


@pytest.mark.guarantee("G-KEY-2")
def test_a_database_the_keyring_knows_from_elsewhere_is_not_taken_for_the_one_here(
    home: Path, tmp_path: Path
) -> None:
    """Another Signoff home's database (known to the keyring, holding its own head) moved to
    where this one was anchored is not this one."""
    heads = MemoryHeadStore()
    with (
        Store.open(home / "signoff.db") as here,
        Store.open(tmp_path / "b" / "signoff.db") as other,
    ):
        Anchor(heads).advance(here, record_run(here, "here"))
        Anchor(heads).advance(other, record_run(other, "there"))
    (home / "signoff.db").unlink()
    shutil.copyfile(tmp_path / "b" / "signoff.db", home / "signoff.db")
    with Store.open(home / "signoff.db") as moved, pytest.raises(DatabaseUnconfirmed):
        Anchor(heads).check(moved)


@pytest.mark.guarantee("G-KEY-2")
def test_a_head_kept_by_place_before_the_upgrade_is_still_the_kept_head(store: Store) -> None:
    """Heads kept before heads were kept by id (``db:<path>``) are read as this database's."""
    heads = MemoryHeadStore()
    record_runs(store, 2)
    earlier = store.head()
    for place in places(store.path):
        heads.place(place, earlier)  # what the earlier version kept
    assert Anchor(heads).check(store) == earlier
    with store.transaction() as tx:  # the log cut back to before the kept head
        tx.conn.execute("DELETE FROM events WHERE seq > 3")
    with pytest.raises(DatabaseRestored):
        Anchor(heads).check(store)


def test_a_place_is_recorded_once_and_then_costs_no_keyring_call(store: Store) -> None:
    counted = CountingHeads()
    anchor = Anchor(counted)
    for n in range(3):
        anchor.advance(store, record_run(store, f"r{n}"))
    assert counted.calls.count("place") == len(places(store.path))
    assert counted.calls.count("placed") == len(places(store.path))  # read once per process
    assert counted.calls.count("save") == 3


class CountingHeads(MemoryHeadStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def load(self, database_id: str) -> Head | None:
        self.calls.append("load")
        return super().load(database_id)

    def save(self, head: Head) -> None:
        self.calls.append("save")
        super().save(head)

    def placed(self, place: str) -> Head | None:
        self.calls.append("placed")
        return super().placed(place)

    def place(self, place: str, head: Head) -> None:
        self.calls.append("place")
        super().place(place, head)


@pytest.mark.guarantee("G-KEY-2")
def test_accepting_a_database_never_forgives_a_rollback(tmp_path: Path) -> None:
    """A backup of a known database put where another was anchored, then accepted there: it
    still has to hold the head kept for it."""
    heads = MemoryHeadStore()
    here, there = tmp_path / "a" / "signoff.db", tmp_path / "b" / "signoff.db"
    with Store.open(here) as store, Store.open(there) as other:
        record_runs(store, 1)
        _backup(store, tmp_path / "backup.db")
        Anchor(heads).advance(store, record_run(store, "the payment"))
        Anchor(heads).advance(other, record_run(other, "other"))
    there.unlink()
    shutil.copyfile(tmp_path / "backup.db", there)
    with Store.open(there) as copy:
        with pytest.raises(DatabaseUnconfirmed):
            Anchor(heads).check(copy)
        confirm(heads, there, copy.head())
        with pytest.raises(DatabaseRestored, match="before event"):
            Anchor(heads).check(copy)


@pytest.mark.guarantee("G-KEY-2")
def test_another_database_behind_a_link_put_on_the_way_to_signoff_home_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGNOFF_HOME is resolved when read; the place as the variable names it still counts, so
    a fresh home linked in where the anchored one was is another database, not a new place."""
    heads = MemoryHeadStore()
    share = tmp_path / "share"
    (share / "signoff").mkdir(mode=0o700, parents=True)
    monkeypatch.setenv("SIGNOFF_HOME", str(share / "signoff"))
    with Store.open(paths.database_path()) as store:
        Anchor(heads).advance(store, record_run(store, "first"))
    share.rename(tmp_path / "moved-away")
    other = tmp_path / "other"
    (other / "signoff").mkdir(mode=0o700, parents=True)
    share.symlink_to(other, target_is_directory=True)
    assert paths.database_path() == other / "signoff" / "signoff.db"
    with Store.open(paths.database_path()) as fresh, pytest.raises(DatabaseUnconfirmed):
        Anchor(heads).check(fresh)
