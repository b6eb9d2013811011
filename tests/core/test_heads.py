"""Heads kept in a real keyring; a missing keyring is a state, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
from keyring.backends import fail

from core.chain import Head
from core.errors import HeadUnavailable
from core.heads import KeyringHeadStore, MemoryHeadStore, decode_head, encode_head
from core.store import Store
from core.verify import Anchor, verify
from tests.builders import record_runs
from tests.conftest import KeyringUnderTest

HEAD = Head("0123456789abcdef0123456789abcdef", 42, "ab" * 32)


def test_a_head_round_trips_through_the_keyring_by_database_id(
    keyring_under_test: KeyringUnderTest, tmp_path: Path
) -> None:
    heads = KeyringHeadStore(keyring_under_test.backend)  # type: ignore[arg-type]
    assert heads.load(HEAD.database_id) is None
    heads.save(HEAD)
    assert heads.load(HEAD.database_id) == HEAD
    newer = Head(HEAD.database_id, 43, "cd" * 32)
    heads.save(newer)
    assert heads.load(HEAD.database_id) == newer
    assert heads.load("another database") is None
    place = str(tmp_path / "signoff.db")
    assert heads.placed(place) is None
    heads.place(place, HEAD)
    assert heads.placed(place) == HEAD
    assert heads.load(HEAD.database_id) == newer  # a place's record is not the head


def test_verify_reports_anchored_when_the_kept_head_is_reached(
    keyring_under_test: KeyringUnderTest, store: Store
) -> None:
    heads = KeyringHeadStore(keyring_under_test.backend)  # type: ignore[arg-type]
    head = record_runs(store, 2)
    assert verify(store, heads).anchor is Anchor.NO_HEAD
    heads.save(head)
    report = verify(store, heads)
    assert report.anchor is Anchor.ANCHORED
    assert report.witnessed == head


def test_a_missing_keyring_backend_is_not_anchored_and_no_crash(store: Store) -> None:
    record_runs(store, 1)
    heads = KeyringHeadStore(fail.Keyring())
    with pytest.raises(HeadUnavailable):
        heads.load(store.database_id)
    with pytest.raises(HeadUnavailable):
        heads.save(store.head())
    report = verify(store, heads)
    assert report.anchor is Anchor.UNAVAILABLE
    assert report.head == store.head()
    assert "not anchored" in report.summary()


def test_the_memory_head_store_keeps_one_head_per_database(tmp_path: Path) -> None:
    heads = MemoryHeadStore()
    heads.save(HEAD)
    assert heads.load(HEAD.database_id) == HEAD
    assert heads.load("b") is None
    assert heads.placed(str(tmp_path / "a.db")) is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"database":"x","seq":1}',
        '{"database":"x","seq":-1,"hash":"h"}',
        '{"database":"x","seq":true,"hash":"h"}',
        '{"database":"x","seq":1,"hash":"h","extra":1}',
        '{"database":"x","seq":1,"hash":"h","seq":2}',
    ],
)
def test_a_kept_value_that_is_not_a_head_is_unusable_not_trusted(text: str) -> None:
    with pytest.raises(HeadUnavailable):
        decode_head(text)


def test_a_head_is_kept_as_canonical_json() -> None:
    assert decode_head(encode_head(HEAD)) == HEAD
    assert encode_head(HEAD).startswith('{"database":')
