"""The chain's hash input and verifier, as pure code and over real database files."""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import chain
from core.chain import ChainVerifier, Head
from core.errors import DatabaseReplaced, EventAltered, EventMissing, HeadMismatch, LogTruncated
from core.store import Store
from tests.core.test_canonical import json_values, text

kinds = st.from_regex(r"[a-z][a-z0-9_]{0,8}(\.[a-z][a-z0-9_]{0,8}){0,2}", fullmatch=True)
steps = st.none() | st.integers(0, 10_000)
hexes = st.text("0123456789abcdef", min_size=64, max_size=64)


@given(hexes, st.integers(1, 2**40), st.none() | text, steps, kinds, json_values, text)
def test_the_hash_input_is_the_rfc8785_form_of_the_event(
    prev: str, seq: int, run_id: str | None, step: int | None, kind: str, payload: object, at: str
) -> None:
    payload_text = rfc8785.dumps(payload).decode()
    expected = rfc8785.dumps(
        {
            "at": at,
            "kind": kind,
            "payload": payload,
            "prev": prev,
            "run": run_id,
            "seq": seq,
            "step": step,
        }
    )
    got = chain.hash_input(
        prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload_text, at=at
    )
    assert got == expected
    assert (
        chain.event_hash(
            prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload_text, at=at
        )
        == hashlib.sha256(expected).hexdigest()
    )


def test_the_genesis_is_tied_to_the_database_id() -> None:
    assert chain.genesis("a" * 32) != chain.genesis("b" * 32)
    assert (
        chain.genesis("a" * 32)
        == hashlib.sha256(
            b'{"chain":"signoff.chain.v1","database":"' + b"a" * 32 + b'"}'
        ).hexdigest()
    )


def _rows(database_id: str, events: list[tuple[str | None, int | None, str, str, str]]):
    prev, rows = chain.genesis(database_id), []
    for seq, (run_id, step, kind, payload, at) in enumerate(events, start=1):
        prev = chain.event_hash(
            prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload, at=at
        )
        rows.append((seq, run_id, step, kind, payload, at, prev))
    return rows


EVENTS = [
    ("r1", None, "run.started", "{}", "t1"),
    ("r1", 0, "step.decided", '{"a":1}', "t2"),
    ("r2", None, "run.started", "{}", "t3"),
    ("r1", 0, "step.observed", "[]", "t4"),
]


def test_a_fed_chain_verifies_to_its_last_event() -> None:
    rows = _rows("db", EVENTS)
    v = ChainVerifier("db")
    v.feed(rows[:2])
    v.feed(rows[2:])
    assert v.finish() == Head("db", 4, rows[-1][6])


def test_an_empty_chain_verifies_to_the_genesis() -> None:
    assert ChainVerifier("db").finish() == Head("db", 0, chain.genesis("db"))


@pytest.mark.parametrize("field", [1, 2, 3, 4, 5])
def test_changing_any_field_of_an_event_is_found_at_that_event(field: int) -> None:
    rows = [list(r) for r in _rows("db", EVENTS)]
    rows[1][field] = {1: "r9", 2: 7, 3: "step.forged", 4: '{"a":2}', 5: "t9"}[field]
    with pytest.raises(EventAltered) as info:
        ChainVerifier("db").feed([tuple(r) for r in rows])
    assert info.value.seq == 2


def test_a_field_of_a_type_the_writer_never_uses_is_an_alteration() -> None:
    rows = [list(r) for r in _rows("db", EVENTS)]
    rows[2][5] = 12345
    with pytest.raises(EventAltered) as info:
        ChainVerifier("db").feed([tuple(r) for r in rows])
    assert info.value.seq == 3


def test_a_gap_is_named_at_the_first_missing_event() -> None:
    rows = _rows("db", EVENTS)
    with pytest.raises(EventMissing) as info:
        ChainVerifier("db").feed([rows[0], rows[2], rows[3]])
    assert info.value.seq == 2


def test_a_chain_of_another_database_does_not_verify() -> None:
    with pytest.raises(EventAltered):
        ChainVerifier("other").feed(_rows("db", EVENTS))


def test_continuing_from_a_verified_head_checks_only_what_follows() -> None:
    rows = _rows("db", EVENTS)
    start = Head("db", 2, rows[1][6])
    v = ChainVerifier("db", start=start)
    v.feed(rows[1:])
    assert v.finish().seq == 4


def test_continuing_from_a_head_whose_event_changed_is_refused() -> None:
    rows = _rows("db", EVENTS)
    with pytest.raises(HeadMismatch):
        ChainVerifier("db", start=Head("db", 2, "0" * 64)).feed(rows[1:])


def test_continuing_from_a_head_the_log_no_longer_holds_is_truncation() -> None:
    rows = _rows("db", EVENTS)  # four events: the head verified before was the fifth
    v = ChainVerifier("db", start=Head("db", 5, "0" * 64))
    v.feed([r for r in rows if r[0] >= 5])
    with pytest.raises(LogTruncated) as info:
        v.finish()
    assert info.value.seq == 5


def test_a_witnessed_head_beyond_the_log_is_truncation() -> None:
    rows = _rows("db", EVENTS)
    v = ChainVerifier("db", witnessed=Head("db", 6, "f" * 64))
    v.feed(rows)
    with pytest.raises(LogTruncated) as info:
        v.finish()
    assert info.value.seq == 5


def test_a_witnessed_head_with_another_hash_is_a_rewrite() -> None:
    rows = _rows("db", EVENTS)
    with pytest.raises(HeadMismatch) as info:
        ChainVerifier("db", witnessed=Head("db", 3, "f" * 64)).feed(rows)
    assert info.value.seq == 3


def test_a_witnessed_head_of_another_database_is_a_replacement() -> None:
    with pytest.raises(DatabaseReplaced):
        ChainVerifier("db", witnessed=Head("other", 1, "f" * 64))


event_lists = st.lists(
    st.tuples(st.none() | st.sampled_from(["r1", "r2", 'run "3"\n']), steps, kinds, json_values),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_lists, st.data())
@pytest.mark.guarantee("G-CHAIN-1")
def test_appended_events_verify_and_any_edit_is_found(events, data) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "signoff.db"
        with Store.open(path) as store:
            with store.transaction() as tx:
                for run_id in {"r1", "r2", 'run "3"\n'}:
                    tx.execute(
                        "INSERT INTO runs (id, goal, status, limits, created_at, updated_at)"
                        " VALUES (?, 'g', 'RUNNING', '{}', 't', 't')",
                        (run_id,),
                    )
            for run_id, step, kind, payload in events:
                with store.transaction() as tx:
                    tx.append_event(
                        kind=kind,
                        payload=payload,
                        at="2026-11-30T09:00:00.000000Z",
                        run_id=run_id,
                        step=step,
                    )
            v = ChainVerifier(store.database_id)
            v.feed(store.event_rows(0, len(events), len(events)))
            assert v.finish() == store.head()
            assert store.head().seq == len(events)

        seq = data.draw(st.integers(1, len(events)), label="edited event")
        db = sqlite3.connect(path)
        db.execute("UPDATE events SET at = 'edited' WHERE seq = ?", (seq,))
        db.commit()
        db.close()
        with Store.open(path) as store:
            v = ChainVerifier(store.database_id)
            with pytest.raises(EventAltered) as info:
                v.feed(store.event_rows(0, len(events), len(events)))
            assert info.value.seq == seq
