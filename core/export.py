"""Exporting runs, with their events, as JSON Lines that can be checked away from the database.

Rules:

1. An export is UTF-8 text, one canonical JSON object a line (``canonical.dumps_text``). The
   first line is the header: ``{"signoff_export": 1, "database", "genesis", "head"}``. Each
   further line is one run: ``{"run", "steps", "approvals", "events"}``, read in one snapshot.
2. The state rows are exported whole, column by column. The JSON columns (a run's ``result``
   and ``limits``, a step's ``decision``, ``arguments`` and ``observation``) are parsed; a
   value that is not JSON is exported as its stored text. An approval's ``request`` stays the
   text its ``request_hash`` is over. Fields keep their columns' names (renaming one is a
   migration, and readers of earlier exports rely on them), so two hashes share a name: an
   approval's ``request_hash`` is the *request hash*, the one the operator approves; a step's
   ``request_hash`` is its *call hash* (``approvals.call_hash``: the same tool and arguments
   anywhere, never approved). A run's ``call_key`` is the proxy's *call key*.
3. Each event carries ``prev``, the hash of the event before it in the database (the genesis
   for event 1), so that every exported event can be checked on its own. A payload whose stored
   text is not canonical JSON is exported as that text, so that it fails the check rather than
   being made canonical here.
4. ``verify_export`` recomputes every event's hash from its fields and its ``prev`` and names
   the first that does not match (``EventAltered``); it also checks the header's genesis, that
   event 1 starts from it, and that consecutive exported events link up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from core import canonical, chain
from core.errors import EventAltered, EventMissing, JSONRefused, SignoffError, UnknownRun
from core.store import Store

EXPORT_VERSION = 1

_RUN_JSON = ("result", "limits")
_STEP_JSON = ("decision", "arguments", "observation")


class ExportMalformed(SignoffError):
    """Not a Signoff export: no header, another version, or a line of the wrong shape."""


def export_runs(store: Store, out: TextIO, run_ids: Sequence[str] | None = None) -> int:
    """Write the header and one line per run (all, newest first, or ``run_ids`` in order).

    An unknown id raises ``UnknownRun`` before anything is written. Returns the runs written.
    """
    with store.snapshot() as conn:
        if run_ids is None:
            ids = [
                row[0]
                for row in conn.execute("SELECT id FROM runs ORDER BY created_at DESC, rowid DESC")
            ]
        else:
            ids = list(dict.fromkeys(run_ids))  # each run once, in the order asked
            for run_id in ids:
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                    raise UnknownRun(f"there is no run {run_id}")
        head = store.head()
        genesis = chain.genesis(store.database_id)
        header = {
            "signoff_export": EXPORT_VERSION,
            "database": store.database_id,
            "genesis": genesis,
            "head": {"seq": head.seq, "hash": head.hash},
        }
        out.write(canonical.dumps_text(header) + "\n")
        for run_id in ids:
            out.write(canonical.dumps_text(_run_record(conn, run_id, genesis)) + "\n")
    return len(ids)


def verify_export(lines: Iterable[str]) -> int:
    """Check every event of an export; return how many were checked, or raise the first bad.

    ``EventAltered`` (with ``seq``) for an event whose hash does not match its fields and
    ``prev``, or that does not link to the event before it; ``ExportMalformed`` for a text
    that is not an export.
    """
    records = (line for line in lines if line.strip())
    first = next(records, None)
    if first is None:
        raise ExportMalformed("the export is empty: it has no header line")
    header = canonical.loads(first)
    if not isinstance(header, dict) or header.get("signoff_export") != EXPORT_VERSION:
        raise ExportMalformed(
            f"the first line is not a version {EXPORT_VERSION} Signoff export header"
        )
    database = header.get("database")
    if not isinstance(database, str) or header.get("genesis") != chain.genesis(database):
        raise ExportMalformed(
            "the header's genesis is not the genesis of the database it names: the header was"
            " edited"
        )
    genesis = chain.genesis(database)
    seen: dict[int, tuple[str, str]] = {}  # seq -> (hash, prev)
    checked = 0
    for number, line in enumerate(records, start=2):
        record = canonical.loads(line)
        events = record.get("events") if isinstance(record, dict) else None
        if not isinstance(events, list):
            raise ExportMalformed(f"line {number} is not a run with a list of events")
        for event in events:
            seq, stored, prev = _check_event(event, genesis)
            if seen.setdefault(seq, (stored, prev)) != (stored, prev):
                raise EventAltered(f"event {seq} is exported twice, differently", seq=seq)
            checked += 1
    for seq in sorted(seen):
        before = seen.get(seq - 1)
        if before is not None and before[0] != seen[seq][1]:
            raise EventAltered(
                f"event {seq}'s prev is not the hash of the exported event {seq - 1}", seq=seq
            )
    return checked


def _check_event(event: Any, genesis: str) -> tuple[int, str, str]:
    seq = event.get("seq") if isinstance(event, dict) else None
    if type(seq) is not int:
        raise ExportMalformed(f"an exported event has no sequence number: {event!r:.200}")
    try:
        run_id, step, kind = event["run"], event["step"], event["kind"]
        at, stored, prev = event["at"], event["hash"], event["prev"]
        if not (
            (run_id is None or type(run_id) is str)
            and (step is None or type(step) is int)
            and all(type(v) is str for v in (kind, at, stored, prev))
        ):
            raise TypeError
        computed = chain.event_hash(
            prev=prev,
            seq=seq,
            run_id=run_id,
            step=step,
            kind=kind,
            payload=canonical.dumps_text(event["payload"]),
            at=at,
        )
    except (KeyError, TypeError, ValueError, UnicodeEncodeError):
        raise EventAltered(
            f"event {seq} lacks a field, or holds one Signoff never writes: it was edited", seq=seq
        ) from None
    if computed != stored:
        raise EventAltered(
            f"event {seq} does not match its hash: its fields or its prev were changed", seq=seq
        )
    if seq == 1 and prev != genesis:
        raise EventAltered("event 1 does not start from this database's genesis", seq=1)
    return seq, stored, prev


def _run_record(conn: sqlite3.Connection, run_id: str, genesis: str) -> dict[str, Any]:
    (run,) = _rows(conn, "SELECT * FROM runs WHERE id = ?", run_id, _RUN_JSON)
    steps = _rows(conn, "SELECT * FROM steps WHERE run_id = ? ORDER BY idx", run_id, _STEP_JSON)
    approvals = _rows(
        conn, "SELECT * FROM approvals WHERE run_id = ? ORDER BY created_at, rowid", run_id, ()
    )
    events = []
    for seq, event_run, step, kind, payload, at, stored, before in conn.execute(
        "SELECT e.seq, e.run_id, e.step_idx, e.kind, e.payload, e.at, e.hash, p.hash"
        " FROM events e LEFT JOIN events p ON p.seq = e.seq - 1"
        " WHERE e.run_id = ? ORDER BY e.seq",
        (run_id,),
    ):
        if seq == 1:
            before = genesis
        elif before is None:
            raise EventMissing(
                f"event {seq - 1} is missing, so event {seq} cannot be exported with its prev:"
                " events were deleted",
                seq=seq - 1,
            )
        events.append(
            {
                "seq": seq,
                "run": event_run,
                "step": step,
                "kind": kind,
                "payload": _canonical_or_text(payload),
                "at": at,
                "hash": stored,
                "prev": before,
            }
        )
    return {"run": run, "steps": steps, "approvals": approvals, "events": events}


def _rows(
    conn: sqlite3.Connection, sql: str, run_id: str, json_columns: tuple[str, ...]
) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, (run_id,))
    names = [d[0] for d in cursor.description]
    rows = []
    for values in cursor:
        row = dict(zip(names, values, strict=True))
        for name in json_columns:
            row[name] = _json_or_text(row[name])
        rows.append(row)
    return rows


def _json_or_text(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return canonical.loads(text)
    except JSONRefused:
        return text


def _canonical_or_text(text: str) -> Any:
    """The payload's value when it is stored canonically; otherwise its text, which will fail."""
    value = _json_or_text(text)
    return value if value is not text and canonical.dumps_text(value) == text else text
