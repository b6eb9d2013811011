"""The time a request has, in words: how long the agent's call is still held, and when the
request lapses. Pure: a pending request, the timings and the time now in, sentences out.

Rules:

1. The hold: a call that needs approval is held by the proxy for ``hold_seconds`` from the
   moment the request was made (its ``created_at``); after that the agent is told the request
   is pending, and it may ask again once it is decided. A request with no call held (a library
   run, or a call cut off that the sweeper put to the operator) has no hold.
2. The lapse: a request nobody decides within ``core.sweep.PENDING_TTL`` of its making is
   expired by the sweeper and nothing runs (a call cut off is then not repeated). Once
   approved, the agent must ask again within ``grant_ttl_seconds``, or the approval lapses.
3. Counting is done by the caller's clock, once a second: the window says "N s more", then,
   at zero, what has happened, in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from core.proxy import config as configuration
from core.records import PendingRequest
from core.sweep import PENDING_TTL

NO_HOLD_KINDS = frozenset({"interrupted_side_effect"})  # put to the operator by the sweeper


@dataclass(frozen=True)
class Timing:
    """The timings a request is held and lapses by (from the configuration)."""

    hold_seconds: float = configuration.DEFAULT_HOLD
    grant_ttl_seconds: float | None = configuration.DEFAULT_GRANT_TTL  # None: never lapses
    pending_ttl: float = PENDING_TTL

    @classmethod
    def of(cls, config: configuration.Config | None) -> Timing:
        if config is None:
            return cls()
        return cls(config.hold_seconds, config.grant_ttl_seconds)


def span(seconds: float) -> str:
    """A duration as a person says it: ``12 s``, ``4 min``, ``23 h 59 min``."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    minutes = whole % 3600 // 60
    return f"{whole // 3600} h" + (f" {minutes} min" if minutes else "")


def made(p: PendingRequest) -> datetime:
    return datetime.fromisoformat(p.created_at)


def waited(p: PendingRequest, now: datetime) -> str:
    return span((now - made(p)).total_seconds())


def held(p: PendingRequest) -> bool:
    """Whether an agent's call waits on this request (rule 1)."""
    return p.server is not None and p.kind not in NO_HOLD_KINDS


def hold_text(p: PendingRequest, timing: Timing, now: datetime) -> str:
    """The hold's line (rule 1), or "" for a request with no call held."""
    if not held(p):
        return ""
    left = (made(p) + timedelta(seconds=timing.hold_seconds) - now).total_seconds()
    if left > 0:
        return (
            f"The agent is waiting {span(left + 0.999)} more; after that it will be told the"
            " request is pending."
        )
    return (
        "The agent has been told the request is pending: approved, it runs when the agent asks"
        " again."
    )


def lapse_text(p: PendingRequest, timing: Timing, now: datetime) -> str:
    """When the request lapses undecided, and then how long an approval holds (rule 2)."""
    at = made(p) + timedelta(seconds=timing.pending_ttl)
    left = (at - now).total_seconds()
    then = "it is not repeated" if p.kind in NO_HOLD_KINDS else "it expires and nothing runs"
    if left > 0:
        local = at.astimezone()
        day = "" if local.date() == now.astimezone().date() else f" on {local.day} {local:%b}"
        when = local.strftime("%H:%M") + day
        said = f"Undecided, it lapses in {span(left + 0.999)} (at {when}): {then}."
    else:
        said = f"It has lapsed undecided: {then}; Signoff closes it within seconds."
    if timing.grant_ttl_seconds is None:
        return f"{said} An approval given now does not lapse."
    return (
        f"{said} Once approved, the agent must ask again within"
        f" {span(timing.grant_ttl_seconds)}, or the approval lapses."
    )
