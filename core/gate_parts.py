"""What a gate is made of, shared by the gate, the sessions it opens and its takeovers.

The gate (``core.gate``), a session's hold on a run (``core.hold``) and the takeover
(``core.takeover``) all read these parts, and this module imports none of them: a session and a
takeover see the gate as its parts, never as the ``Gate`` that opens sessions, so nothing below
the gate imports it back.

Rules:

1. Tool names are unique: a second tool of one name is refused (``SchemaRefused``) as the gate
   is made. Each tool is compiled once, there. ``retool`` takes up a new tool set whole, between
   calls: a step proposed before keeps the tool it was proposed with, and a run waiting on an
   approval meets the tool of its name as it is now, which holds it only if its spec hash is the
   one approved (core/waiting.py).
2. The owner name is the configured owner with a random suffix: two gates never share a lease,
   not even two in one process under one configured name.
3. A lease runs ``lease_ttl`` seconds by the wall clock from its last renewal; what is recorded
   is stamped by the gate's clock (both are the config's, so tests inject them).
4. The policy is asked about the canonical request. A tool with no side-effect class is never
   put to it (``RunStateError``). A policy that raises, or answers something that is not a
   ``PolicyDecision``, is ``PolicyFailed``: the caller records the failure by its type's name,
   and nothing runs.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from core.canonical import JSONValue
from core.errors import PolicyFailed, RunStateError, SchemaRefused
from core.lease import LeaseKeeper
from core.policy.policy import PolicyDecision, PolicyRequest, identity_of
from core.records import RunView
from core.store import format_time
from core.tools import CompiledTool, Tool
from core.verdicts import GateConfig


@dataclass(frozen=True)
class RunFacts:
    """What a policy request says of its run, for a run not yet written (core.first_step)."""

    id: str
    goal: str
    consecutive_failures: int = 0


class GateParts:
    """The tools, the policy and the store of a gate, its owner name and its lease keeper."""

    def __init__(self, config: GateConfig) -> None:
        self.config = config
        self.store = config.store
        for observer in config.observers:
            self.store.observe(observer)
        self.owner = f"{config.owner}-{secrets.token_hex(4)}"
        self.tools: dict[str, CompiledTool] = {}
        self.retool(config.tools)
        self.leases = LeaseKeeper(
            self.store.path, self.owner, ttl=config.lease_ttl, wall_clock=config.wall_clock,
            busy_timeout=self.store.busy_timeout,
        )  # fmt: skip

    def retool(self, tools: Sequence[Tool]) -> None:
        """This gate's tools from now on (rule 1); nothing changes when one is refused."""
        compiled: dict[str, CompiledTool] = {}
        for tool in tools:
            if tool.name in compiled:
                raise SchemaRefused(f"two tools are named {tool.name}")
            old = self.tools.get(tool.name)  # compiled once while it stays the same
            compiled[tool.name] = (
                old if old is not None and old.tool == tool else CompiledTool(tool)
            )
        self.tools = compiled

    def _now_text(self) -> str:
        return format_time(self.config.clock())

    def _lease_expiry(self) -> float:
        return self.config.wall_clock() + self.config.lease_ttl

    def _policy_request(
        self, tool: CompiledTool, arguments: JSONValue, run: RunView | RunFacts, step: int
    ) -> PolicyRequest:
        side_effect = tool.tool.side_effect
        if side_effect is None:
            raise RunStateError(f"tool {tool.name} has no side-effect class")
        return PolicyRequest.build(
            tool=tool.name,
            spec_hash=tool.spec_hash,
            side_effect=side_effect,
            idempotent=tool.tool.idempotent,
            arguments=arguments,
            run_id=run.id,
            goal=run.goal,
            step=step,
            consecutive_failures=run.consecutive_failures,
        )

    def _evaluate(self, request: PolicyRequest) -> tuple[PolicyDecision, str | None]:
        """The policy's decision and identity; ``PolicyFailed`` when it raised or answered
        something else (the caller records that by name, and runs nothing)."""
        policy = self.config.policy
        try:
            decision = policy.evaluate(request)
            identity = identity_of(policy)
        except Exception as e:  # the operator's code: fail closed, and say what it raised
            raise PolicyFailed(f"the policy raised {type(e).__name__}: {e}",
                               exception=type(e).__name__) from e  # fmt: skip
        if not isinstance(decision, PolicyDecision):
            raise PolicyFailed(f"the policy answered {decision!r}, not a PolicyDecision",
                               exception=TypeError.__name__)  # fmt: skip
        return decision, identity


def policy_failure(failure: PolicyFailed) -> tuple[dict[str, JSONValue], str]:
    """What a step records of a policy that failed, and the verdict's reason."""
    observation: dict[str, JSONValue] = {
        "error": "policy_error", "exception": failure.exception, "detail": str(failure),
    }  # fmt: skip
    return observation, f"the policy failed ({failure.exception}); nothing ran"
