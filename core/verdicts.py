"""The gate's vocabulary: its configuration, verdicts, requests and observations."""

from __future__ import annotations

import enum
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core import canonical, operator_key
from core.anchor import Anchor
from core.canonical import JSONValue
from core.errors import TTLRefused
from core.operator_key import OperatorKey
from core.policy.policy import DUPLICATE_KIND, OWN_FILES_KIND, DefaultPolicy, Policy
from core.prices import ModelConfig
from core.records import ApprovalView, RunView, StepView
from core.store import Store
from core.tools import CompiledTool, SideEffect, Tool

if TYPE_CHECKING:
    from core.observe import Observer


def _new_approval_id() -> str:
    return f"ap-{secrets.token_hex(6)}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


# Grants of these kinds are the operator's word on this exact request, whatever class the
# policy would now ask an approval for (it still may deny or abort). Each is decided in the
# dialog (or the terminal), never from a notification.
OPERATOR_KINDS = frozenset({"interrupted_side_effect", DUPLICATE_KIND, OWN_FILES_KIND})


@dataclass(frozen=True)
class Reconciled:
    """A reconcile hook's answer: ``done`` (with the call's result), ``not_done``, ``unknown``."""

    answer: str
    result: JSONValue = None

    @classmethod
    def done(cls, result: JSONValue = None) -> Reconciled:
        return cls("done", result)

    @classmethod
    def not_done(cls) -> Reconciled:
        return cls("not_done")

    @classmethod
    def unknown(cls) -> Reconciled:
        return cls("unknown")


def _keyring_anchor() -> Anchor:
    from core.heads import KeyringHeadStore

    return Anchor(KeyringHeadStore())


@dataclass(frozen=True)
class GateConfig:
    store: Store
    tools: Sequence[Tool]
    policy: Policy = field(default_factory=DefaultPolicy)
    clock: Callable[[], datetime] = _utc_now  # run times; lease times never come from it
    new_id: Callable[[], str] = _new_approval_id
    owner: str = "signoff"  # the lease owner's name; each gate adds a random suffix
    lease_ttl: float = 30.0
    wall_clock: Callable[[], float] = time.time  # lease expiry only
    # Asked, on takeover, about a step found executing a tool that is not read-only and not
    # idempotent: did the call take effect? Without it, such a step waits for the operator.
    reconcile: Callable[[Request], Reconciled] | None = None
    # Checks that a grant is the operator's authenticated decision (core/operator_key.py);
    # the OS keyring's, read once per process, unless given another.
    operator: OperatorKey = field(default_factory=operator_key.default)
    # Keeps the head outside the database before an approved side effect (core/anchor.py):
    # the OS keyring's, unless given another; None runs grants unanchored (a library user's
    # choice, never the proxy's).
    anchor: Anchor | None = field(default_factory=_keyring_anchor)
    # Prices and a token counter (core/prices.py): with it, each open step offers an accounting
    # model caller (``OpenStep.model()``, core/model_calls.py) held to the run's limits.
    model: ModelConfig | None = None
    # Told, after each commit, of the events the gate's store committed (core/observe.py): a
    # copy for telemetry (core/telemetry.py); the record stays the chain.
    observers: Sequence[Observer] = ()

    def __post_init__(self) -> None:
        # Zero or less lapses as it is taken and the heartbeat (every TTL/3) never sleeps; not
        # finite, a dead process blocks its run for ever (or the heartbeat cannot sleep at all).
        ttl = self.lease_ttl
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
            raise TTLRefused(f"the lease TTL must be a finite number of seconds, not {ttl!r}")
        if ttl <= 0:
            raise TTLRefused(f"the lease TTL must be more than 0 seconds, not {ttl!r}")


class VerdictOutcome(enum.StrEnum):
    ALLOWED = "allowed"  # the request may run; execute runs exactly it
    DENIED = "denied"  # a failure observation; the session goes on with the next step
    PENDING = "pending"  # the run waits on a hash-bound approval; the session is over
    ENDED = "ended"  # the run is terminal


@dataclass(frozen=True)
class Request:
    """A copy of the request a verdict is about: changing it changes nothing about what runs."""

    run_id: str
    step: int
    tool: str
    spec_hash: str
    side_effect: SideEffect
    arguments: str  # canonical JSON text
    request_hash: str  # SHA-256 over the call: tool spec, tool, arguments (approvals.call_hash)
    # The arguments as parsed when the decision was checked, carried to the tool's start record
    # rather than parsed again; never handed to the tool (``args`` is a copy of its own).
    parsed: canonical.Canonical | None = field(default=None, compare=False, repr=False)

    def args(self) -> JSONValue:
        return canonical.loads(self.arguments)

    def value(self) -> JSONValue:
        """The arguments' value, shared: for reading only."""
        return canonical.loads(self.arguments) if self.parsed is None else self.parsed.value


@dataclass(frozen=True)
class Verdict:
    outcome: VerdictOutcome
    run: RunView
    request: Request | None = None
    approval: ApprovalView | None = None
    reason: str = ""


@dataclass(frozen=True)
class Observation:
    ok: bool
    result: str | None  # canonical JSON text of what the tool returned
    error: str | None
    summary: str
    # Set when the call's outcome is unknown and the run now waits for the operator.
    approval: ApprovalView | None = None
    detail: str | None = None  # canonical JSON a failing tool recorded with its failure


@dataclass(frozen=True)
class StepInput:
    """What an agent deciding at this point is handed: copies of the run and its steps."""

    run: RunView
    steps: tuple[StepView, ...]
    step: int | None  # the open step's index, if one is open


OPEN_STEPS = frozenset({"deciding", "executing"})
INTERRUPTED_REASON = "started, outcome unknown"


def copy_request(step: StepView, tool: CompiledTool) -> Request:
    side_effect = tool.tool.side_effect or SideEffect.DESTRUCTIVE
    return Request(
        step.run_id, step.index, tool.name, tool.spec_hash, side_effect,
        step.arguments or "null", step.request_hash or "",
    )  # fmt: skip
