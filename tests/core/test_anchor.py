"""The anchor (core/anchor.py): the threads of one gate share their keyring writes, and a
head another thread kept is still checked against the database (rules 2 and 5)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from core.anchor import Anchor
from core.chain import Head
from core.errors import DatabaseRestored
from core.heads import MemoryHeadStore
from core.store import Store
from tests.builders import record_run, record_runs


class SlowHeads(MemoryHeadStore):
    """An in-memory head store whose writes take as long as a busy Secret Service's."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    def save(self, location: Path, head: Head) -> None:
        time.sleep(0.2)
        self.saves += 1
        super().save(location, head)


@pytest.mark.guarantee("G-KEY-2")
def test_threads_of_one_process_share_their_keyring_writes(store: Store) -> None:
    heads = SlowHeads()
    anchor = Anchor(heads)
    record_runs(store, 1)
    anchor.advance(store, store.head())  # the first write: nothing for the others to share yet
    kept: dict[int, tuple[Head, Head]] = {}

    def one(n: int) -> None:
        with Store.open(store.path) as mine:
            own = record_run(mine, f"thread-{n}")
            kept[n] = (own, anchor.advance(mine, own, latest=True))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) == 8
    for own, got in kept.values():  # every thread's head is kept, by its write or a later one
        assert got.database_id == own.database_id and got.seq >= own.seq
    assert heads.load(store.path) == max((got for _, got in kept.values()), key=lambda h: h.seq)
    assert heads.saves < 1 + 8  # without sharing: one write per thread


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
