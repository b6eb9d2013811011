"""A host's call as the code under it sees it, carried in the context of the call's own task.

``Proxy.call`` sets ``HOST_CALL`` in its task's context; what runs in that task (the hold, the
upstream call, the record of its outcome) reads it there, so each call reads its own:

- ``cancelled``: the event the host's cancellation sets;
- ``progress``: the host's progress token, which the upstream call carries, so that the
  server's ``notifications/progress`` reach the host under the host's own token;
- ``answer``: what the host is handed once the server answered (the result as the host
  receives it), set by the upstream call; the record keeps what decision 0029 says, and
  ``whole`` is the canonical text of a result too large to be recorded whole;
- ``error``: the JSON-RPC error the server answered the call with, handed to the host as is.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from core.proxy.upstream import Cancelled


@dataclass
class HostCall:
    cancelled: Cancelled | None = None
    progress: str | int | None = None
    answer: dict[str, Any] | None = None
    whole: bytes | None = None
    error: dict[str, Any] | None = None


HOST_CALL: ContextVar[HostCall | None] = ContextVar("HOST_CALL", default=None)


def current() -> HostCall:
    """This task's call, or a call of no host's (a proxy driven directly)."""
    call = HOST_CALL.get()
    if call is None:
        call = HostCall()
        HOST_CALL.set(call)
    return call


def host_gave_up() -> bool:
    call = HOST_CALL.get()
    return call is not None and call.cancelled is not None and call.cancelled.is_set()
