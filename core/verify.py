"""Verifying a database's chain, and comparing it with the head kept in the keyring.

``verify(store, heads)`` reads the events in pages (so a window can show progress and the
database is never held in one long read), checks them with ``ChainVerifier``, and raises the
named ``ChainBroken`` for the first bad event. The head kept for this database, when there is
one, must be reached and matched. A head store that cannot be reached is a state
("not anchored"), reported in the result, never an error.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from core.chain import ChainVerifier, Head
from core.errors import DatabaseReplaced, DatabaseUnconfirmed, HeadUnavailable
from core.heads import HeadStore, kept_head
from core.store import Store

PAGE = 5_000  # measured: smaller pages verify faster (cache-warm), see bench/verify.py


class Anchor(enum.Enum):
    ANCHORED = "anchored"  # a kept head was found and the chain reaches and matches it
    NO_HEAD = "no head kept"  # the keyring works but holds no head for this database yet
    UNAVAILABLE = "keyring unavailable"  # no keyring backend, or it failed
    SKIPPED = "not checked"  # the caller asked not to look


@dataclass(frozen=True)
class Report:
    head: Head  # the last event verified
    anchor: Anchor
    witnessed: Head | None  # the head kept in the keyring, when one was read
    detail: str = ""  # why the chain is not anchored, when it is not

    def summary(self) -> str:
        head = self.head
        text = f"intact: {head.seq} events, head {head.hash[:16]}, database {head.database_id}"
        if self.anchor is Anchor.ANCHORED and self.witnessed is not None:
            return f"{text}; anchored in the keyring at event {self.witnessed.seq}"
        why = f": {self.detail}" if self.detail else ""
        return f"{text}; not anchored ({self.anchor.value}{why})"


def verify(
    store: Store,
    heads: HeadStore | None = None,
    *,
    start: Head | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Verify the chain (whole, or onwards from ``start``), raising ``ChainBroken`` if bad.

    ``progress(done, total)`` is called after each page, ``total`` being the last event
    present when verification began.
    """
    if start is not None and start.seq == 0:
        start = None  # a head before any event: verify from the genesis
    witnessed: Head | None = None
    anchor, detail = Anchor.SKIPPED, ""
    if heads is not None:
        try:
            witnessed, _ = kept_head(heads, store.path, store.database_id)
        except DatabaseUnconfirmed as e:  # another database where one was anchored
            raise DatabaseReplaced(str(e), seq=e.anchored_seq) from None
        except HeadUnavailable as e:
            anchor, detail = Anchor.UNAVAILABLE, str(e)
        else:
            anchor = Anchor.NO_HEAD if witnessed is None else Anchor.ANCHORED

    verifier = ChainVerifier(store.database_id, start=start, witnessed=witnessed)
    end = store.head().seq
    after = 0 if start is None else start.seq - 1
    while after < end:
        rows = store.event_rows(after, end, PAGE)
        if not rows:
            break
        verifier.feed(rows)
        after = rows[-1][0]
        if progress is not None:
            progress(after, end)
    head = verifier.finish()
    return Report(head=head, anchor=anchor, witnessed=witnessed, detail=detail)
