"""Observers: what the record committed, handed on as a copy (telemetry, dashboards, tests).

Rules:

1. An observer is any callable taking the events one transaction committed, in order
   (``Committed``: the chain's own fields). It is registered on a store (``Store.observe``,
   or ``GateConfig.observers``, which registers them on the gate's store) and is told of every
   transaction that store's connection commits with events: runs, steps, decisions (with their
   origin), policy answers, approvals asked and decided, tool calls started and their outcomes,
   run ends, and the operator's events of no run. Another process's commits are not seen.
2. It is called only after ``COMMIT`` returned: never for a transaction rolled back, never
   while the write lock is held. The audit chain stays the record; what an observer is told
   is a copy of it, and is the same events in the same order the chain holds.
3. An observer that raises changes nothing: the exception is caught, logged once per observer
   (by its name), and the other observers are still told. An observer runs on the committing
   thread, so one that must do slow work (send spans over a network) hands the events to a
   thread of its own (core/telemetry.py does) and returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core import canonical
from core.canonical import JSONValue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Committed:
    """One event as committed: its place in the chain, its run and step, kind, payload and time."""

    seq: int
    run_id: str | None
    step: int | None
    kind: str
    payload_text: str  # canonical JSON, as hashed
    at: str
    hash: str

    def payload(self) -> JSONValue:
        return canonical.loads(self.payload_text)


Observer = Callable[[Sequence[Committed]], object]

_failed: set[str] = set()  # observers whose failure was logged already (rule 3)


def name_of(observer: Observer) -> str:
    name = getattr(observer, "__qualname__", None) or type(observer).__qualname__
    module = getattr(observer, "__module__", None) or type(observer).__module__
    return f"{module}.{name}"


def notify(observers: Sequence[Observer], rows: Sequence[tuple[object, ...]]) -> None:
    """Tell each observer of the committed event rows (seq, run, step, kind, payload, at,
    hash); rule 3."""
    events = tuple(Committed(*row) for row in rows)  # type: ignore[arg-type]
    for observer in observers:
        try:
            observer(events)
        except Exception as e:
            name = name_of(observer)
            if name not in _failed:
                _failed.add(name)
                log.error("observer %s raised %s: %s (logged once)", name, type(e).__name__, e)
