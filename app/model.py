"""What the tray app knows, without Qt: the pending approvals, which were notified, the state.

Rules:

1. The store is the truth: the pending list is read from it on every change, never kept apart.
2. A pending approval is notified once: the ids already notified are kept in a file beside the
   database (so a restart does not notify again) and pruned when no longer pending.
3. The tray's state is ``alarm`` while the witness raises one, else ``pending`` while anything
   waits, else ``idle``. Pausing notifications changes nothing but the notifying.
4. A ``destructive`` request, an ``interrupted_side_effect``, a ``duplicate`` and a request
   that touches Signoff's own files (``own_files``) are never approved from a notification
   alone: their notification opens the dialog. Neither is a request whose arguments the
   notification cannot show whole (``core.present`` rule 4), nor one holding a value that
   means other than it is written or cannot be read as one thing (``read``,
   core/policy/meaning.py rule 8): the notification, the dialog and the history say what each
   means beside its spelling (``meaning``).
5. Arguments are shown in the order of the schema the operator pinned (read from the pinned
   tool's kept text); without it, in the order ``core.present`` gives without a schema. The
   values the operator fixed follow them, marked set by Signoff, as recorded with the request
   (``core.records.fixed_values``), never as the configuration says now.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from app.countdown import Timing
from core import canonical, marks, present, private_files
from core.errors import SignoffError, UnsafePermissions
from core.operator_key import unauthenticated_mode
from core.policy.meaning import Reading
from core.proxy import config as configuration
from core.proxy import manage, pinstore
from core.records import PendingRequest, pending_requests
from core.store import Store
from core.witness import WitnessState

log = logging.getLogger("signoff.app")

NEEDS_THE_DIALOG_KINDS = frozenset({"interrupted_side_effect", "duplicate", "own_files"})


@dataclass(frozen=True)
class Pending(PendingRequest):
    """A pending request as the app shows it."""

    schema: dict[str, Any] | None = field(default=None, compare=False)  # the pinned one

    @property
    def fingerprint(self) -> str:
        return present.fingerprint(self.request_hash)

    @cached_property
    def view(self) -> present.RequestView:
        return present.view(self.arguments, self.schema, self.fixed)

    @property
    def needs_dialog(self) -> bool:
        if self.side_effect == "destructive" or self.kind in NEEDS_THE_DIALOG_KINDS:
            return True
        if self.read:  # what a value means is not what it says: read it in the dialog
            return True
        return not self.view.whole()

    @property
    def meanings(self) -> tuple[str, ...]:
        """Each value whose meaning differs from its spelling, with that meaning (rule 4)."""
        return tuple(meaning(r) for r in self.read)

    @property
    def title(self) -> str:
        """``server/tool``, with anything a reader cannot see marked."""
        return present.name(f"{self.server or '?'}/{self.tool or '?'}")


def meaning(reading: Reading) -> str:
    """``"/srv/link/x" resolves to /home/me/.ssh/x``: the spelling as JSON (as the arguments
    show it), then what it means or why it cannot be read as one thing; marked (core.marks)."""
    spelled = marks.visible(canonical.dumps_text(reading.spelling), lines=False)
    return f"{spelled} {marks.visible(reading.words(), lines=False)}"


def read_pending(
    store: Store, config_path: Path | None = None, schemas: Schemas | None = None
) -> list[Pending]:
    with store.snapshot() as conn:
        found = pending_requests(conn)
    schemas = schemas or Schemas(config_path)
    return [Pending(**vars(p), schema=schemas.of(p.server, p.tool)) for p in found]


class Schemas:
    """The input schemas the operator pinned, read from the pinned tools' kept texts (rule 5).
    Kept between reads: the configuration is read again only when its file changed, and a kept
    text, addressed by its pin, never changes."""

    def __init__(self, config_path: Path | None) -> None:
        self.config_path = config_path
        self.config: configuration.Config | None = None
        self._stamp: object = ()  # never a file's stamp: the first read loads
        self._kept: dict[str, dict[str, Any] | None] = {}
        self.pins_dir = manage.pins_dir(config_path) if config_path is not None else None

    def _load(self) -> None:
        now = configuration.stamp(self.config_path)
        if now == self._stamp or self.config_path is None:
            return
        self._stamp = now
        try:
            self.config = configuration.load(self.config_path)
        except SignoffError:
            self.config = None  # shown in the schema-less order; the config page says why

    def current(self) -> configuration.Config | None:
        """The configuration as the file says now (None when it cannot be read)."""
        self._load()
        return self.config

    def of(self, server: str | None, tool: str | None) -> dict[str, Any] | None:
        self._load()
        if self.config is None or self.pins_dir is None or server is None or tool is None:
            return None
        entry = self.config.servers.get(server)
        pin = entry.tools.get(tool) if entry is not None else None
        pin_hash = getattr(pin, "pin", None)
        if not isinstance(pin_hash, str):
            return None
        if pin_hash not in self._kept:
            try:
                kept = pinstore.kept(self.pins_dir, pin_hash)
            except SignoffError:
                kept = None
            self._kept[pin_hash] = kept.input_schema if kept is not None else None
        return self._kept[pin_hash]


class AppModel:
    def __init__(self, store: Store, notified_file: Path, config_path: Path | None = None) -> None:
        self.store = store
        self.config_path = config_path
        self._schemas = Schemas(config_path)
        self.notified_file = notified_file
        self.pending: list[Pending] = []
        self.witness = WitnessState(False, None)
        self.unauthenticated = False  # the operator chose unsigned decisions (core/operator_key)
        self.paused = False
        self._notified = self._load()

    @property
    def state(self) -> str:
        if self.witness.alarm:
            return "alarm"
        return "pending" if self.pending else "idle"

    def timing(self) -> Timing:
        """How long a call is held and when a request lapses, as configured now."""
        return Timing.of(self._schemas.current())

    def refresh(self) -> list[Pending]:
        """Read the pending approvals; returns those not notified yet (now marked notified,
        unless notifications are paused)."""
        self.pending = read_pending(self.store, schemas=self._schemas)
        with self.store.snapshot() as conn:
            self.unauthenticated = unauthenticated_mode(conn)
        ids = {p.id for p in self.pending}
        fresh = [p for p in self.pending if p.id not in self._notified]
        if not self.paused:
            self._notified |= {p.id for p in fresh}
        self._notified &= ids | {p.id for p in fresh}
        self._save()
        return [] if self.paused else fresh

    def _load(self) -> set[str]:
        """The ids notified; none (so each waiting request is notified again, the safe side)
        when the file is missing, unreadable or not Signoff's own."""
        try:
            text = private_files.read_text(self.notified_file)
            value = json.loads(text) if text is not None else None
        except (OSError, UnsafePermissions, ValueError):
            return set()
        return {str(v) for v in value} if isinstance(value, list) else set()

    def _save(self) -> None:
        try:
            private_files.write_text(self.notified_file, json.dumps(sorted(self._notified)))
        except (OSError, UnsafePermissions) as e:  # a restart notifies these again: the safe side
            log.warning("the notified requests cannot be kept in %s: %s", self.notified_file, e)
