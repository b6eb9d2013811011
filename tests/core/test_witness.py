"""The witness keeps the head moving forward, raises and remembers an alarm, and copes with no
keyring."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from keyring.backends import fail

from core.heads import KeyringHeadStore, MemoryHeadStore
from core.store import Store
from core.witness import Witness
from tests.builders import record_run, record_runs


def test_the_head_follows_the_chain(store: Store, tmp_path: Path) -> None:
    heads = MemoryHeadStore()
    witness = Witness(store, heads, tmp_path / "alarm.json")
    record_runs(store, 2)
    state = witness.check_all()
    assert state.anchored and state.head == store.head() == heads.load(store.database_id)
    newer = record_run(store, "later")
    assert witness.advance().head == newer == heads.load(store.database_id)


def test_an_edit_raises_an_alarm_that_is_remembered_until_acknowledged(
    store: Store, tmp_path: Path
) -> None:
    heads = MemoryHeadStore()
    alarm = tmp_path / "alarm.json"
    witness = Witness(store, heads, alarm)
    record_runs(store, 2)
    witness.check_all()
    kept = heads.load(store.database_id)
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE events SET payload = '{}' WHERE seq = 3")
    conn.commit()
    conn.close()
    state = witness.check_all()
    assert state.alarm and state.alarm_seq == 3 and not state.anchored
    assert heads.load(store.database_id) == kept  # an alarm never moves the head
    again = Witness(store, heads, alarm)  # a restart remembers it
    assert again.state.alarm == state.alarm
    state = again.acknowledge()
    assert state.alarm  # still broken: acknowledging does not make the record good
    assert not alarm.exists() or state.alarm_seq == 3


def test_without_a_keyring_it_is_not_anchored_and_goes_on(store: Store, tmp_path: Path) -> None:
    witness = Witness(store, KeyringHeadStore(fail.Keyring()), tmp_path / "alarm.json")
    record_runs(store, 1)
    state = witness.check_all()
    assert not state.anchored and not state.alarm
    assert state.head == store.head()
    assert "keyring" in state.detail.lower()


def test_the_witness_keeps_its_head_in_a_real_keyring(
    store: Store, tmp_path: Path, keyring_under_test
) -> None:
    """gnome-keyring's Secret Service (inside the test command's dbus-run-session) and
    keyrings.alt's file backend."""
    heads = KeyringHeadStore(keyring_under_test.backend)
    witness = Witness(store, heads, tmp_path / "alarm.json")
    record_runs(store, 1)
    assert witness.check_all().anchored
    newer = record_run(store, "later")
    assert witness.advance().head == newer == heads.load(store.database_id)
    # What a tamperer who recomputes the whole chain cannot get past: the kept head.
    conn = sqlite3.connect(store.path)
    conn.execute("DELETE FROM events WHERE seq > 3")
    conn.commit()
    conn.close()
    fresh = Witness(store, heads, tmp_path / "alarm2.json")
    assert "LogTruncated" in fresh.check_all().alarm


@pytest.mark.guarantee("G-KEY-2")
def test_another_database_where_one_was_anchored_is_an_alarm_until_the_operator_accepts_it(
    home: Path, tmp_path: Path
) -> None:
    heads = MemoryHeadStore()
    alarm = tmp_path / "alarm.json"
    database = home / "signoff.db"
    with Store.open(database) as first:
        record_runs(first, 2)
        assert Witness(first, heads, alarm).check_all().anchored
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    with Store.open(database) as fresh:
        record_run(fresh, "new")
        witness = Witness(fresh, heads, alarm)
        state = witness.check_all()
        assert "another database lies where one was anchored" in state.alarm
        assert state.alarm.endswith("[DatabaseReplaced]") and not state.anchored
        assert heads.load(fresh.database_id) is None  # nothing kept for it meanwhile
        assert Witness(fresh, heads, alarm).state.alarm == state.alarm  # kept across restarts
        assert witness.acknowledge().alarm  # acknowledging is not accepting: it stands
        state = witness.accept()
        assert not state.alarm and state.anchored
        assert heads.load(fresh.database_id) == fresh.head()


@pytest.mark.guarantee("G-KEY-2")
def test_accepting_an_older_copy_of_a_known_database_from_the_tray_is_refused(
    tmp_path: Path,
) -> None:
    heads = MemoryHeadStore()
    alarm = tmp_path / "alarm.json"
    here, there = tmp_path / "a" / "signoff.db", tmp_path / "b" / "signoff.db"
    with Store.open(here) as store, Store.open(there) as other:
        record_runs(store, 1)
        with sqlite3.connect(tmp_path / "backup.db") as backup:
            store._conn.backup(backup)
        record_run(store, "later")
        assert Witness(store, heads, tmp_path / "a.json").check_all().anchored
        assert Witness(other, heads, tmp_path / "b.json").check_all().anchored
    there.unlink()
    (tmp_path / "backup.db").rename(there)
    with Store.open(there) as copy:
        witness = Witness(copy, heads, alarm)
        assert "another database lies where one was anchored" in witness.check_all().alarm
        state = witness.accept()
        assert state.alarm.endswith("[DatabaseRestored]"), state.alarm
        assert heads.placed(str(there)).database_id != copy.database_id  # not re-pointed
