"""Limits on a run, checked when a step starts. Pure code.

Rules:

1. Steps: a run may start at most ``max_steps`` steps.
2. Consecutive failures: a run whose last ``max_consecutive_failures`` steps each ended in a
   failure (a refused or invalid decision, a denial, a tool error) stops.
3. Loops are keyed on the observation: the same request answered by the same observation
   ``loop_repeats`` times in a row is a loop; the same request with a changed result is progress.
4. Time: active time (the run's working time in sessions) and elapsed time (since the run was
   created) are separate: one measures work, the other staleness.
5. ``grant_ttl_seconds`` bounds how long an approval may wait between being granted and being
   executed; it is judged when attach allows the grant and again at execute.
6. Tokens and cost (``max_tokens``, ``max_cost``, an exact ``Decimal``) are judged on what the
   run's model calls spent (core/model_calls.py: an attempt not answered counts at its
   projection). Before a model call, by projection: the call may reach a limit, never pass
   it (``spending_exceeded(projected=True)``). At a step's start, on what is spent: a limit
   reached leaves nothing to spend. They are recorded only when set, so a run without them
   is recorded as before, and limits stored before they existed still load.

A limit ends the run as FAILED with a named reason (``limit_steps`` ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

from core.canonical import JSONValue
from core.errors import PriceRefused
from core.prices import amount, text_of


@dataclass(frozen=True)
class Limits:
    max_steps: int | None = 100
    max_consecutive_failures: int | None = 5
    loop_repeats: int | None = 3
    max_active_seconds: float | None = None
    max_elapsed_seconds: float | None = None
    grant_ttl_seconds: float | None = None
    max_tokens: int | None = None
    max_cost: Decimal | None = None  # a decimal text or an integer is taken exactly

    def __post_init__(self) -> None:
        tokens = self.max_tokens
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                                   or tokens < 0):  # fmt: skip
            raise PriceRefused(f"max_tokens must be an integer of 0 or more, not {tokens!r}")
        if self.max_cost is not None:
            object.__setattr__(self, "max_cost", amount(self.max_cost, "max_cost"))

    def as_json(self) -> dict[str, JSONValue]:
        # Every field is a number or None: no deep copy needed (``asdict`` makes one, about
        # 30 us, twice on every proxied call). The model limits only when set (rule 6).
        value: dict[str, JSONValue] = {f.name: getattr(self, f.name) for f in _FIELDS}
        if self.max_tokens is None:
            del value["max_tokens"]
        if self.max_cost is None:
            del value["max_cost"]
        else:
            value["max_cost"] = text_of(self.max_cost)
        return value

    @classmethod
    def from_json(cls, value: Any) -> Limits:
        names = {f.name for f in fields(cls)}
        if not isinstance(value, dict) or not set(value) <= names:
            raise ValueError(f"not a set of limits: {value!r}")
        return cls(**value)


_FIELDS = fields(Limits)


@dataclass(frozen=True)
class Spent:
    """What a run's model calls spent (core/model_calls.py)."""

    tokens: int = 0
    cost: Decimal = Decimal(0)


def spending_exceeded(limits: Limits, spent: Spent, *, projected: bool) -> str | None:
    """``limit_tokens`` or ``limit_cost`` when ``spent`` passes a limit (``projected``: what a
    call would bring the run to) or reaches it (what is already spent), else None (rule 6)."""
    for reason, used, most in (("limit_tokens", spent.tokens, limits.max_tokens),
                               ("limit_cost", spent.cost, limits.max_cost)):  # fmt: skip
        if most is not None and (used > most if projected else used >= most):
            return reason
    return None


@dataclass(frozen=True)
class Finished:
    """A finished step, as far as the loop rule cares: its request and what it observed."""

    request_hash: str | None
    observation: str | None


def exceeded(
    limits: Limits,
    *,
    step_count: int,
    consecutive_failures: int,
    recent: Sequence[Finished],
    active_seconds: float,
    elapsed_seconds: float,
    spent: Spent | None = None,
) -> str | None:
    """The reason the next step may not start, or None. ``recent``: newest last."""
    if limits.max_steps is not None and step_count >= limits.max_steps:
        return "limit_steps"
    if (
        limits.max_consecutive_failures is not None
        and consecutive_failures >= limits.max_consecutive_failures
    ):
        return "limit_consecutive_failures"
    n = limits.loop_repeats
    if n is not None and n > 0 and len(recent) >= n:
        tail = recent[-n:]
        first = tail[0]
        if first.request_hash is not None and all(
            (s.request_hash, s.observation) == (first.request_hash, first.observation) for s in tail
        ):
            return "limit_loop"
    if limits.max_active_seconds is not None and active_seconds >= limits.max_active_seconds:
        return "limit_active_time"
    if limits.max_elapsed_seconds is not None and elapsed_seconds >= limits.max_elapsed_seconds:
        return "limit_elapsed_time"
    return None if spent is None else spending_exceeded(limits, spent, projected=False)
