"""What the tray app knows, without Qt: the pending approvals, which were notified, the state.

Rules:

1. The store is the truth: the pending list is read from it on every change, never kept apart.
2. A pending approval is notified once: the ids already notified are kept in a file beside the
   database (so a restart does not notify again) and pruned when no longer pending.
3. The tray's state is ``alarm`` while the witness raises one, else ``pending`` while anything
   waits, else ``idle``. Pausing notifications changes nothing but the notifying.
4. A ``destructive`` request, an ``interrupted_side_effect`` and a ``duplicate`` are never
   approved from a notification alone: their notification opens the dialog.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.records import PendingRequest, pending_requests
from core.store import Store
from core.witness import WitnessState

NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "duplicate"})


@dataclass(frozen=True)
class Pending(PendingRequest):
    """A pending request as the app shows it."""

    @property
    def fingerprint(self) -> str:
        h = self.request_hash
        return f"{h[:4]} {h[4:8]} {h[8:12]} {h[12:16]}"

    @property
    def needs_dialog(self) -> bool:
        return self.side_effect == "destructive" or self.kind in NEEDS_THE_DIALOG_KINDS

    @property
    def title(self) -> str:
        return f"{self.server or '?'}/{self.tool or '?'}"

    def summary(self, limit: int = 120) -> str:
        """A short line of the arguments; the dialog shows them whole."""
        text = self.arguments
        return text if len(text) <= limit else text[: limit - 1] + "…"


def read_pending(store: Store) -> list[Pending]:
    with store.snapshot() as conn:
        return [Pending(**vars(p)) for p in pending_requests(conn)]


class AppModel:
    def __init__(self, store: Store, notified_file: Path) -> None:
        self.store = store
        self.notified_file = notified_file
        self.pending: list[Pending] = []
        self.witness = WitnessState(False, None)
        self.paused = False
        self._notified = self._load()

    @property
    def state(self) -> str:
        if self.witness.alarm:
            return "alarm"
        return "pending" if self.pending else "idle"

    def refresh(self) -> list[Pending]:
        """Read the pending approvals; returns those not notified yet (now marked notified,
        unless notifications are paused)."""
        self.pending = read_pending(self.store)
        ids = {p.id for p in self.pending}
        fresh = [p for p in self.pending if p.id not in self._notified]
        if not self.paused:
            self._notified |= {p.id for p in fresh}
        self._notified &= ids | {p.id for p in fresh}
        self._save()
        return [] if self.paused else fresh

    def _load(self) -> set[str]:
        try:
            value = json.loads(self.notified_file.read_text())
        except (OSError, ValueError):
            return set()
        return {str(v) for v in value} if isinstance(value, list) else set()

    def _save(self) -> None:
        self.notified_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.notified_file.with_name(self.notified_file.name + ".tmp")
        tmp.write_text(json.dumps(sorted(self._notified)))
        tmp.replace(self.notified_file)
