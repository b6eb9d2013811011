"""Observers: what the record committed, handed on as a copy (telemetry, dashboards, tests).

Rules:

1. An observer is any callable taking the events one transaction committed, in order
   (``Committed``: the chain's own fields). It is registered on a store (``Store.observe``,
   or ``GateConfig.observers``, which registers them on the gate's store) and is told of every
   transaction that store's connection commits with events: runs, steps, decisions (with their
   origin), policy answers, approvals asked and decided, tool calls started and their outcomes,
   run ends, and the operator's events of no run. Another process's commits are not seen.
2. It is told only after ``COMMIT`` returned: never of a transaction rolled back, never while
   the write lock is held. The audit chain stays the record; what an observer is told is a
   copy of it: the same events, in the order the chain holds them.
3. Each observer is called on a thread of its own (``Relay``), fed by a bounded queue: the
   committing thread only puts the events there, so an observer that is slow or blocks delays
   no commit and no call. One that raises changes nothing: the exception is caught and logged
   once per observer, by its name. A full queue (an observer blocked for that long) drops the
   newest events for it, counted in ``dropped`` and logged once. ``Store.flush_observers``
   waits, bounded, until each has been told of everything committed so far; what an observer
   has not been told when the process exits is lost to it (the record has it).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
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

QUEUE = 10_000  # batches of events an observer may be behind before they are dropped
_STOP = object()


def name_of(observer: Observer) -> str:
    name = getattr(observer, "__qualname__", None) or type(observer).__qualname__
    module = getattr(observer, "__module__", None) or type(observer).__module__
    return f"{module}.{name}"


class Relay:
    """One observer, its queue and its thread (rule 3)."""

    def __init__(self, observer: Observer, size: int = QUEUE) -> None:
        self.observer = observer
        self.name = name_of(observer)
        self.dropped = 0
        self._queue: queue.Queue[object] = queue.Queue(size)
        self._logged: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="signoff-observer", daemon=True)
        self._thread.start()

    def tell(self, rows: Sequence[tuple[object, ...]]) -> None:
        """Hand on one commit's event rows (seq, run, step, kind, payload, at, hash)."""
        events = tuple(Committed(*row) for row in rows)  # type: ignore[arg-type]
        try:
            self._queue.put_nowait(events)
        except queue.Full:
            self.dropped += 1
            self._once("full", "is behind: committed events are dropped for it")

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the observer was told of all queued so far."""
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def stop(self) -> None:
        """No more events; what is queued is still told, on the observer's thread."""
        with contextlib.suppress(queue.Full):  # else, a daemon thread: it ends with the process
            self._queue.put_nowait(_STOP)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self.observer(item)  # type: ignore[arg-type]
            except Exception as e:
                self._once(f"raised {type(e).__name__}", f"raised {type(e).__name__}: {e}")

    def _once(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.error("observer %s %s (logged once)", self.name, message)
