"""``signoff export``: runs with their events as JSON Lines, each event checkable on its own."""

from __future__ import annotations

import io
import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from core import canonical, chain
from core.errors import EventAltered, EventMissing, UnknownRun
from core.export import ExportMalformed, export_runs, verify_export
from core.store import Store
from tests.builders import events_per_run, record_runs
from tests.conftest import run_signoff

STEPS = 2


def _export(store: Store, run_ids: list[str] | None = None) -> list[str]:
    out = io.StringIO()
    written = export_runs(store, out, run_ids)
    text = out.getvalue()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert written == len(lines) - 1
    return lines


def _as_json(text: str | None) -> Any:
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return text  # builders store Python reprs in some columns: exported as their text


def _store_rows(store: Store, sql: str, run_id: str, json_columns: tuple[str, ...]) -> list[Any]:
    with store.snapshot() as conn:
        cursor = conn.execute(sql, (run_id,))
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, values, strict=True)) for values in cursor]
    for row in rows:
        for name in json_columns:
            row[name] = _as_json(row[name])
    return rows


@pytest.fixture
def runs(store: Store) -> Store:
    record_runs(store, 3, steps=STEPS)
    with store.transaction() as tx:  # a result and an approval, so every table has a row
        tx.execute("UPDATE runs SET result = ? WHERE id = 'run-2'", ('{"ok":true,"n":[1,2]}',))
        tx.execute(
            "INSERT INTO approvals (id, run_id, step_idx, kind, request, request_hash, status,"
            " created_at) VALUES ('ap-1', 'run-2', 1, 'approval', '{\"a\":1}', 'h', 'pending',"
            " '2026-11-30T09:01:02.000000Z')"
        )
    return store


def test_all_runs_are_exported_newest_first_after_a_header(runs: Store) -> None:
    lines = _export(runs)
    header = json.loads(lines[0])
    head = runs.head()
    assert header == {
        "signoff_export": 1,
        "database": runs.database_id,
        "genesis": chain.genesis(runs.database_id),
        "head": {"seq": head.seq, "hash": head.hash},
    }
    records = [json.loads(line) for line in lines[1:]]
    assert [r["run"]["id"] for r in records] == ["run-3", "run-2", "run-1"]
    assert all(line == canonical.dumps_text(json.loads(line)) for line in lines)
    assert verify_export(lines) == 3 * events_per_run(STEPS) == head.seq


def test_one_run_is_exported_with_the_hash_before_each_event(runs: Store) -> None:
    lines = _export(runs, ["run-2"])
    assert len(lines) == 2
    events = json.loads(lines[1])["events"]
    assert {e["run"] for e in events} == {"run-2"}
    stored = {row[0]: row[6] for row in runs.event_rows(0, runs.head().seq, 1000)}
    for event in events:
        assert event["hash"] == stored[event["seq"]]
        assert event["prev"] == stored[event["seq"] - 1]  # run-1's last event, for the first
    assert verify_export(lines) == events_per_run(STEPS)


def test_the_first_event_starts_from_the_genesis(runs: Store) -> None:
    first = json.loads(_export(runs, ["run-1"])[1])["events"][0]
    assert (first["seq"], first["prev"]) == (1, chain.genesis(runs.database_id))


def test_exported_rows_match_the_stores_rows_exactly(runs: Store) -> None:
    for line in _export(runs)[1:]:
        record = json.loads(line)
        run_id = record["run"]["id"]
        assert [record["run"]] == _store_rows(
            runs, "SELECT * FROM runs WHERE id = ?", run_id, ("result", "limits")
        )
        assert {"server", "tool", "call_key", "status", "end_reason"} <= record["run"].keys()
        assert record["steps"] == _store_rows(
            runs,
            "SELECT * FROM steps WHERE run_id = ? ORDER BY idx",
            run_id,
            ("decision", "arguments", "observation"),
        )
        assert record["approvals"] == _store_rows(
            runs, "SELECT * FROM approvals WHERE run_id = ?", run_id, ()
        )
    run_2 = json.loads(_export(runs, ["run-2"])[1])
    assert run_2["run"]["result"] == {"ok": True, "n": [1, 2]}
    assert [a["id"] for a in run_2["approvals"]] == ["ap-1"]


def test_an_unknown_run_is_refused_and_nothing_is_written(runs: Store) -> None:
    out = io.StringIO()
    with pytest.raises(UnknownRun):
        export_runs(runs, out, ["run-1", "nope"])
    assert out.getvalue() == ""


def _edit_event(lines: list[str], seq: int, change: Any) -> list[str]:
    edited = []
    for line in lines:
        record = json.loads(line)
        for event in record.get("events", []):
            if event["seq"] == seq:
                change(event)
        edited.append(canonical.dumps_text(record))
    return edited


def test_an_edited_payload_is_named_at_its_event(runs: Store) -> None:
    lines = _export(runs)
    edited = _edit_event(lines, 8, lambda e: e["payload"].update(summary="wrote 99"))
    assert edited != lines
    with pytest.raises(EventAltered) as caught:
        verify_export(edited)
    assert caught.value.seq == 8


def test_an_event_forged_with_a_recomputed_hash_breaks_the_link_to_the_next(
    runs: Store,
) -> None:
    def forge(event: dict[str, Any]) -> None:
        event["payload"] = {"forged": True}
        event["hash"] = chain.event_hash(
            prev=event["prev"],
            seq=event["seq"],
            run_id=event["run"],
            step=event["step"],
            kind=event["kind"],
            payload=canonical.dumps_text(event["payload"]),
            at=event["at"],
        )

    with pytest.raises(EventAltered) as caught:
        verify_export(_edit_event(_export(runs), 8, forge))
    assert caught.value.seq == 9


def test_a_header_with_another_genesis_is_refused(runs: Store) -> None:
    lines = _export(runs)
    header = json.loads(lines[0])
    header["genesis"] = chain.genesis("another")
    with pytest.raises(ExportMalformed):
        verify_export([canonical.dumps_text(header), *lines[1:]])
    with pytest.raises(ExportMalformed):
        verify_export([])


def test_a_tampered_database_exports_what_it_holds_and_fails_the_check(runs: Store) -> None:
    conn = sqlite3.connect(runs.path)
    conn.execute("""UPDATE events SET payload = '{"goal": "goal of run-1"}' WHERE seq = 1""")
    conn.commit()
    with pytest.raises(EventAltered) as caught:  # same value, but not the bytes hashed
        verify_export(_export(runs, ["run-1"]))
    assert caught.value.seq == 1
    conn.execute("DELETE FROM events WHERE seq = 7")
    conn.commit()
    conn.close()
    with pytest.raises(EventMissing) as missing:
        _export(runs, ["run-2"])
    assert missing.value.seq == 7


def test_the_command_writes_an_owner_only_file_that_verifies(home: Path, runs: Store) -> None:
    out = home / "export.jsonl"
    done = run_signoff("export", "--out", str(out), home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == _export(runs)
    assert verify_export(lines) == 3 * events_per_run(STEPS)

    one = run_signoff("export", "--run", "run-1", "--run", "run-3", home=home)
    assert one.returncode == 0, one.stderr
    assert [json.loads(x)["run"]["id"] for x in one.stdout.splitlines()[1:]] == ["run-1", "run-3"]


def test_the_command_exits_2_naming_an_unknown_run(home: Path, runs: Store) -> None:
    out = home / "export.jsonl"
    done = run_signoff("export", "--run", "nope", "--out", str(out), home=home)
    assert done.returncode == 2
    assert "UnknownRun" in done.stderr
    assert done.stdout == ""
    assert sorted(p.name for p in home.iterdir() if "export" in p.name) == []


def test_the_command_exits_2_without_a_database(home: Path) -> None:
    done = run_signoff("export", home=home)
    assert done.returncode == 2
    assert "DatabaseMissing" in done.stderr
