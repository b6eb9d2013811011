"""The tamper matrix: each edit of a real database file is detected with the right error,
by the library and by ``signoff verify`` comparing with the head kept in a real keyring.

Guarantee G-CHAIN-1: an edited, deleted or inserted event is detected.
Guarantee G-CHAIN-2: with the head kept in the keyring, a truncated log, an older copy, another
database, and a log rewritten with recomputed hashes are detected.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from core import chain
from core.errors import (
    ChainBroken,
    DatabaseReplaced,
    EventAltered,
    EventMissing,
    HeadMismatch,
    LogTruncated,
)
from core.heads import KeyringHeadStore, MemoryHeadStore, confirm
from core.store import Store
from core.verify import PAGE, Anchor, verify
from tests.builders import T0, events_per_run, record_run, record_runs
from tests.conftest import KeyringUnderTest, run_signoff

RUNS, STEPS = 3, 2
PER_RUN = events_per_run(STEPS)  # 6
TOTAL = RUNS * PER_RUN  # 18


@dataclass
class Place:
    home: Path
    db: Path
    older_copy: Path  # the database as it was after its second run


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")  # a tamperer's connection
    for s in statements:
        conn.execute(s)
    conn.close()


def _replace_file(target: Path, source: Path) -> None:
    for suffix in ("-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    shutil.copyfile(source, target)
    target.chmod(0o600)


def edit_payload(p: Place) -> None:
    _sql(p.db, """UPDATE events SET payload = '{"ok":false,"summary":"wrote 0"}' WHERE seq = 3""")


def edit_kind(p: Place) -> None:
    _sql(p.db, "UPDATE events SET kind = 'step.denied' WHERE seq = 8")


def delete_middle_event(p: Place) -> None:
    _sql(p.db, "DELETE FROM events WHERE seq = 10")


def delete_whole_run(p: Place) -> None:
    _sql(
        p.db,
        "DELETE FROM events WHERE run_id = 'run-2'",
        "DELETE FROM steps WHERE run_id = 'run-2'",
        "DELETE FROM runs WHERE id = 'run-2'",
    )


def truncate_below_head(p: Place) -> None:
    _sql(p.db, f"DELETE FROM events WHERE seq > {TOTAL - 3}")


def delete_the_last_event(p: Place) -> None:
    _sql(p.db, f"DELETE FROM events WHERE seq = {TOTAL}")


def restore_older_copy(p: Place) -> None:
    _replace_file(p.db, p.older_copy)


def restore_older_copy_and_write_past_the_head(p: Place) -> None:
    _replace_file(p.db, p.older_copy)
    with Store.open(p.db) as store:
        for n in range(3):
            record_run(store, f"later-{n}")


def replace_with_another_database(p: Place) -> None:
    other = p.home.parent / "other" / "signoff.db"
    with Store.open(other) as store:
        record_runs(store, RUNS + 1, steps=STEPS)
    _replace_file(p.db, other)


def insert_forged_event_at_the_end(p: Place) -> None:
    _sql(
        p.db,
        "INSERT INTO events (seq, run_id, step_idx, kind, payload, at, hash) VALUES"
        f" ({TOTAL + 1}, 'run-1', 0, 'step.observed', '{{}}', 't', '{'ab' * 32}')",
    )


def insert_forged_event_in_the_middle(p: Place) -> None:
    _sql(
        p.db,
        "UPDATE events SET seq = seq + 1000 WHERE seq >= 6",
        "UPDATE events SET seq = seq - 999 WHERE seq >= 1000",
        "INSERT INTO events (seq, run_id, step_idx, kind, payload, at, hash) VALUES"
        f" (6, 'run-1', 1, 'step.observed', '{{}}', 't', '{'cd' * 32}')",
    )


def rewrite_with_recomputed_hashes(p: Place) -> None:
    """A tamperer who knows the algorithm edits event 3 and recomputes every hash after it."""
    conn = sqlite3.connect(p.db, isolation_level=None)
    database_id = conn.execute("SELECT value FROM meta WHERE key = 'database_id'").fetchone()[0]
    rows = conn.execute(
        "SELECT seq, run_id, step_idx, kind, payload, at FROM events ORDER BY seq"
    ).fetchall()
    prev = chain.genesis(database_id)
    conn.execute("BEGIN")
    for seq, run_id, step, kind, payload, at in rows:
        if seq == 3:
            payload = '{"ok":true,"summary":"nothing to see"}'
        prev = chain.event_hash(
            prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload, at=at
        )
        conn.execute("UPDATE events SET payload = ?, hash = ? WHERE seq = ?", (payload, prev, seq))
    conn.execute("COMMIT")
    conn.close()


Case = tuple[Callable[[Place], None], type[ChainBroken], int]
MATRIX: dict[str, Case] = {
    "payload edited": (edit_payload, EventAltered, 3),
    "kind edited": (edit_kind, EventAltered, 8),
    "event deleted in the middle": (delete_middle_event, EventMissing, 10),
    "a whole run's events deleted": (delete_whole_run, EventMissing, PER_RUN + 1),
    "log truncated below the kept head": (truncate_below_head, LogTruncated, TOTAL - 2),
    "the kept head's own event deleted": (delete_the_last_event, LogTruncated, TOTAL),
    "replaced by an older copy of itself": (restore_older_copy, LogTruncated, 2 * PER_RUN + 1),
    "older copy written past the kept head": (
        restore_older_copy_and_write_past_the_head,
        HeadMismatch,
        TOTAL,
    ),
    "replaced by another Signoff database": (
        replace_with_another_database,
        DatabaseReplaced,
        TOTAL,
    ),
    "forged event inserted at the end": (insert_forged_event_at_the_end, EventAltered, TOTAL + 1),
    "forged event inserted in the middle": (insert_forged_event_in_the_middle, EventAltered, 6),
    "log rewritten with recomputed hashes": (rewrite_with_recomputed_hashes, HeadMismatch, TOTAL),
}
NEEDS_THE_KEPT_HEAD = {
    "log truncated below the kept head",
    "the kept head's own event deleted",
    "replaced by an older copy of itself",
    "older copy written past the kept head",
    "replaced by another Signoff database",
    "log rewritten with recomputed hashes",
}


def _ids(case: str) -> str:
    return case.replace(" ", "-")  # a test id without spaces, as the mutation runner reads them


def _build(tmp_path: Path) -> tuple[Place, chain.Head]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    db = home / "signoff.db"
    older = tmp_path / "older.db"
    with Store.open(db) as store:
        record_runs(store, 2, steps=STEPS)
    shutil.copyfile(db, older)  # closed: the WAL was checkpointed into the file
    with Store.open(db) as store:
        head = record_run(store, f"run-{RUNS}", steps=STEPS, start=T0)
        assert head.seq == TOTAL
    return Place(home, db, older), head


@pytest.mark.guarantee("G-CHAIN-1")
def test_an_edit_past_the_first_page_verify_reads_is_found(home: Path) -> None:
    """``verify`` reads the log a page at a time; an event past the first page is checked too."""
    with Store.open(home / "signoff.db") as store:
        store._conn.execute("PRAGMA synchronous = OFF")  # a fast build: durability is not tested
        head = record_runs(store, 5, steps=510)  # 5,110 events
    assert head.seq > PAGE
    edited = PAGE + 40
    _sql(home / "signoff.db", f"UPDATE events SET at = 'edited' WHERE seq = {edited}")
    with Store.open(home / "signoff.db", readonly=True) as store, pytest.raises(EventAltered) as e:
        verify(store)
    assert e.value.seq == edited


@pytest.mark.parametrize("case", list(MATRIX), ids=_ids)
@pytest.mark.guarantee("G-CHAIN-1")
@pytest.mark.guarantee("G-CHAIN-2")
def test_each_tampering_is_detected_by_the_library(case: str, tmp_path: Path) -> None:
    place, head = _build(tmp_path)
    heads = MemoryHeadStore()
    heads.save(head)
    confirm(heads, place.db, head)  # as the witness leaves it: the head, and where it lies
    tamper, error, seq = MATRIX[case]
    tamper(place)
    with Store.open(place.db, readonly=True) as store, pytest.raises(ChainBroken) as info:
        verify(store, heads)
    assert type(info.value) is error
    assert info.value.seq == seq


@pytest.mark.parametrize("case", sorted(NEEDS_THE_KEPT_HEAD), ids=_ids)
def test_without_a_kept_head_these_tamperings_are_not_detected(case: str, tmp_path: Path) -> None:
    """The stated limit: the chain alone proves consistency, not that it is the one written."""
    place, _ = _build(tmp_path)
    MATRIX[case][0](place)
    with Store.open(place.db, readonly=True) as store:
        assert verify(store).anchor is Anchor.SKIPPED


def _cli_verify(place: Place, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    done = run_signoff("verify", "--json", home=place.home, env=env)
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("case", list(MATRIX), ids=_ids)
@pytest.mark.guarantee("G-CHAIN-1")
@pytest.mark.guarantee("G-CHAIN-2")
def test_each_tampering_is_detected_by_signoff_verify_with_the_keyring(
    case: str, tmp_path: Path, keyring_under_test: KeyringUnderTest
) -> None:
    place, head = _build(tmp_path)
    heads = KeyringHeadStore(keyring_under_test.backend)  # type: ignore[arg-type]
    heads.save(head)
    confirm(heads, place.db, head)
    code, before = _cli_verify(place, keyring_under_test.env)
    assert (code, before["ok"], before["anchor"]) == (0, True, "anchored")

    tamper, error, seq = MATRIX[case]
    tamper(place)
    code, result = _cli_verify(place, keyring_under_test.env)
    assert code == 1
    assert (result["ok"], result["error"], result["seq"]) == (False, error.__name__, seq)
