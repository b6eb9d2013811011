"""The audit chain: one hash chain over every event of every run. Pure code, no I/O.

Rules:

1. Events are numbered 1, 2, 3, ... with no gap, across all runs of a database.
2. Event n's hash is SHA-256, in lowercase hex, over the RFC 8785 form of the object
   ``{"at", "kind", "payload", "prev", "run", "seq", "step"}``: its time, kind, payload
   (a JSON value), the previous event's hash, its run id (or null), its sequence number and its
   step index (or null).
3. Event 1's ``prev`` is the genesis: the hash of ``{"chain": "signoff.chain.v1", "database":
   <database id>}``, so a chain belongs to one database and cannot be spliced into another.
4. Verifying recomputes every hash from the stored fields and the previous hash. The first
   event found wrong is named: a gap (``EventMissing``) or a hash that does not match its
   fields (``EventAltered``).
5. A head witnessed earlier (database id, sequence, hash), kept where whoever can write the
   database cannot reach, turns the chain from "consistent" into "the one that was written":
   another database (``DatabaseReplaced``), a log ending before the head (``LogTruncated``),
   or a different event at the head's place (``HeadMismatch``) is then detected.
6. Without a witnessed head, the chain detects corruption and careless edits, not a rewrite
   of the whole log nor the loss of its last events.

The hash input is built directly as text rather than through a general canonicaliser, so that
verifying a million events is cheap; ``hash_input`` is proven equal to ``rfc8785.dumps`` of the
same object by the tests. The payload is stored in its canonical text and enters the hash
input as stored: any change to a stored byte changes the hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from json.encoder import encode_basestring  # the C encoder; RFC 8785-exact for strings

from core import canonical
from core.errors import (
    DatabaseReplaced,
    EventAltered,
    EventMissing,
    HeadMismatch,
    LogTruncated,
)

CHAIN_VERSION = "signoff.chain.v1"

# One stored event, in the column order the store reads it:
# (seq, run_id, step, kind, payload, at, hash)
EventRow = tuple[int, str | None, int | None, str, str, str, str]


@dataclass(frozen=True)
class Head:
    """A point in one database's chain: the last event a verifier or witness vouched for."""

    database_id: str
    seq: int
    hash: str

    def short(self) -> str:
        return f"event {self.seq} ({self.hash[:12]})"


def genesis(database_id: str) -> str:
    """The ``prev`` of a database's first event."""
    return canonical.sha256_hex({"chain": CHAIN_VERSION, "database": database_id})


def _q(s: str | None) -> str:
    return "null" if s is None else str(encode_basestring(s))


def hash_input(
    *, prev: str, seq: int, run_id: str | None, step: int | None, kind: str, payload: str, at: str
) -> bytes:
    """The bytes event ``seq`` is hashed over; ``payload`` is already canonical JSON text."""
    step_text = "null" if step is None else str(step)
    return (
        f'{{"at":{_q(at)},"kind":{_q(kind)},"payload":{payload},"prev":"{prev}",'
        f'"run":{_q(run_id)},"seq":{seq},"step":{step_text}}}'
    ).encode()


def event_hash(
    *, prev: str, seq: int, run_id: str | None, step: int | None, kind: str, payload: str, at: str
) -> str:
    data = hash_input(
        prev=prev, seq=seq, run_id=run_id, step=step, kind=kind, payload=payload, at=at
    )
    return hashlib.sha256(data).hexdigest()


class ChainVerifier:
    """Checks a chain fed in order, batch by batch, so a caller can show progress.

    Start from the genesis, or from a head already verified (its event is fed again first and
    must carry the same hash). A witnessed head, when given, is checked on the way (the event
    at its sequence must carry its hash) and at ``finish`` (the log must reach it).
    """

    def __init__(
        self, database_id: str, *, start: Head | None = None, witnessed: Head | None = None
    ) -> None:
        for head in (start, witnessed):
            if head is not None and head.database_id != database_id:
                raise DatabaseReplaced(
                    f"the head kept for this place belongs to database {head.database_id}, but"
                    f" this file is database {database_id}: the file was replaced by another"
                    " database",
                    seq=head.seq,
                )
        self.database_id = database_id
        self._start = start
        self._witnessed = witnessed
        self._prev = genesis(database_id) if start is None else start.hash
        self._next = 1 if start is None else start.seq
        self._head = Head(database_id, 0, self._prev) if start is None else start

    @property
    def head(self) -> Head:
        """The last event verified so far (sequence 0 and the genesis before any)."""
        return self._head

    def feed(self, rows: Iterable[EventRow]) -> None:
        """Verify the next events, which must be given in sequence order."""
        sha256 = hashlib.sha256
        q = encode_basestring
        prev, expected = self._prev, self._next
        start = self._start
        w = self._witnessed
        w_seq, w_hash = (-1, "") if w is None else (w.seq, w.hash)
        seq = expected
        try:
            for seq, run_id, step, kind, payload, at, stored in rows:
                if seq != expected:
                    raise EventMissing(
                        f"event {expected} is missing (the next stored event is {seq}):"
                        " events were deleted",
                        seq=expected,
                    )
                if start is not None:
                    # The first row re-reads the head verified before; it must be unchanged.
                    if stored != start.hash:
                        raise HeadMismatch(
                            f"event {seq} no longer has the hash verified before: the log"
                            " was rewritten",
                            seq=seq,
                        )
                    expected, start = seq + 1, None
                    continue
                computed = sha256(
                    (
                        f'{{"at":{q(at)},"kind":{q(kind)},"payload":{payload},"prev":"{prev}",'
                        f'"run":{"null" if run_id is None else q(run_id)},"seq":{seq},'
                        f'"step":{"null" if step is None else step}}}'
                    ).encode()
                ).hexdigest()
                if computed != stored:
                    raise EventAltered(
                        f"event {seq} does not match its hash: its fields, or an event before"
                        " it, were changed",
                        seq=seq,
                    )
                if seq == w_seq and stored != w_hash:
                    raise HeadMismatch(
                        f"event {seq} is not the event the keyring witnessed: the log was"
                        " rewritten from there or before, or an older copy of the database"
                        " was put back",
                        seq=seq,
                    )
                prev, expected = stored, seq + 1
        except (TypeError, ValueError, UnicodeEncodeError):
            # A field of a type or content the writer never produces.
            raise EventAltered(
                f"event {seq} holds a field Signoff never writes: it was edited", seq=seq
            ) from None
        finally:
            self._prev, self._next, self._start = prev, expected, start
        if self._start is None and self._next - 1 > self._head.seq:
            self._head = Head(self.database_id, self._next - 1, self._prev)

    def finish(self) -> Head:
        """The verified head, after checking that the log reaches every head it must."""
        if self._start is not None:
            raise LogTruncated(
                f"the log no longer holds event {self._start.seq}, which was verified before",
                seq=self._start.seq,
            )
        w = self._witnessed
        if w is not None and self._head.seq < w.seq:
            raise LogTruncated(
                f"the log ends at event {self._head.seq}, but event {w.seq} was witnessed:"
                " events were deleted from the end, or an older copy of the database was put"
                " back",
                seq=self._head.seq + 1,
            )
        return self._head
