"""What a writer of Signoff's database file can do to a signed record, for the tests of the three
(a decision, a standing grant, a recorded configuration): rewrite one stored event and compute
the chain's hashes again from it on, so that the chain verifies and only the record's MAC can
tell; and the MACs such a writer would try with the real key id, which every event shows.

The attacker cannot read the OS keyring, so cannot compute a MAC; the tests can, to make the
forgeries nearest to the right one (a prefix of it, the same digits in capitals).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from core import canonical, chain

# A MAC forged with the real key id: each must be refused as no MAC at all is. "another
# record's" is the MAC of another record signed with the same key, valid where it was made.
FORGED_MACS = (
    "empty",
    "a prefix",
    "all but its last digit",
    "one digit more",
    "in capitals",
    "in full-width digits",
    "with a line break",
    "another record's",
)


def forged_mac(how: str, right: str, another: str) -> str:
    """The MAC ``how`` names, made from the ``right`` one (and ``another`` record's)."""
    made = {
        "empty": "",
        "a prefix": right[:16],
        "all but its last digit": right[:-1],
        "one digit more": right + "0",
        "in capitals": right.upper(),
        # What reads as the same digits: letters and digits of the full-width block.
        "in full-width digits": right.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}),
        "with a line break": right + "\n",
        "another record's": another,
    }[how]
    assert made != right
    return made


def event(database: Path, seq: int) -> tuple[str | None, int | None, str, dict[str, Any], str]:
    """The stored event ``seq``: its run, step, kind, payload and time."""
    conn = sqlite3.connect(database)
    try:
        run_id, step, kind, text, at = conn.execute(
            "SELECT run_id, step_idx, kind, payload, at FROM events WHERE seq = ?", (seq,)
        ).fetchone()
    finally:
        conn.close()
    payload = canonical.loads(text)
    assert isinstance(payload, dict)
    return run_id, step, kind, payload, at


def last_seq(database: Path, kind: str) -> int:
    """The latest stored event of ``kind``."""
    conn = sqlite3.connect(database)
    try:
        (seq,) = conn.execute("SELECT max(seq) FROM events WHERE kind = ?", (kind,)).fetchone()
    finally:
        conn.close()
    assert seq is not None, f"no {kind} event"
    return int(seq)


def rewrite_event(database: Path, seq: int, *, sql: tuple[tuple[str, tuple[Any, ...]], ...] = (),
                  **changed: Any) -> None:  # fmt: skip
    """Rewrite event ``seq`` in the database file: ``payload`` (a dict) replaced, or single
    members of it given by name (``mac=...``), and ``at``, ``run_id`` or ``step_idx`` when
    given; then every hash from it on computed again, as one who knows the algorithm would.
    ``sql``: statements run in the same transaction (the tables made to agree)."""
    columns = {k: changed.pop(k) for k in ("at", "run_id", "step_idx") if k in changed}
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        database_id = conn.execute("SELECT value FROM meta WHERE key = 'database_id'").fetchone()[0]
        conn.execute("BEGIN IMMEDIATE")
        (text,) = conn.execute("SELECT payload FROM events WHERE seq = ?", (seq,)).fetchone()
        payload = changed.pop("payload", None) or canonical.loads(text)
        payload.update(changed)
        before = conn.execute(
            "SELECT at, run_id, step_idx FROM events WHERE seq = ?", (seq,)
        ).fetchone()
        after = tuple(
            columns.get(k, v) for k, v in zip(("at", "run_id", "step_idx"), before, strict=True)
        )
        assert (canonical.dumps_text(payload), after) != (text, tuple(before)), "nothing changed"
        conn.execute(
            "UPDATE events SET payload = ? WHERE seq = ?", (canonical.dumps_text(payload), seq)
        )
        for column, value in columns.items():
            conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (value, seq))
        for statement, params in sql:
            conn.execute(statement, params)
        row = conn.execute("SELECT hash FROM events WHERE seq < ? ORDER BY seq DESC LIMIT 1",
                           (seq,)).fetchone()  # fmt: skip
        prev = chain.genesis(database_id) if row is None else row[0]
        rows = conn.execute(
            "SELECT seq, run_id, step_idx, kind, payload, at FROM events WHERE seq >= ?"
            " ORDER BY seq",
            (seq,),
        ).fetchall()
        for at_seq, run_id, step, kind, body, at in rows:
            prev = chain.event_hash(prev=prev, seq=at_seq, run_id=run_id, step=step, kind=kind,
                                    payload=body, at=at)  # fmt: skip
            conn.execute("UPDATE events SET hash = ? WHERE seq = ?", (prev, at_seq))
        conn.execute("COMMIT")
    finally:
        conn.close()
