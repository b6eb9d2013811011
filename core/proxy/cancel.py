"""A host's cancellation of a call, carried in the context of the call's own task.

``Proxy.call`` sets ``HOST_CANCEL`` in its task's context to the event the host's cancellation
sets; what runs in that task (the hold, the upstream call, the record of its outcome) reads it
there, so each call reads its own.
"""

from __future__ import annotations

from contextvars import ContextVar

from core.proxy.upstream import Cancelled

HOST_CANCEL: ContextVar[Cancelled | None] = ContextVar("HOST_CANCEL", default=None)


def host_gave_up() -> bool:
    cancelled = HOST_CANCEL.get()
    return cancelled is not None and cancelled.is_set()
