"""Pending approvals made the way a proxy makes them, for the app's tests."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.decisions import Decision
from core.errors import OutcomeUnknown
from core.gate import VerdictOutcome
from core.policy.meaning import Reading
from core.policy.own_files import OwnFiles
from core.policy.policy import ConfigPolicy, Policy, PolicyDecision, PolicyRequest, Rule
from core.proxy.server import ProxyRules
from core.records import ApprovalView
from core.store import Store
from core.tools import SideEffect, Tool
from core.transitions import CallLabel
from tests.core.gatekit import FakeClock, make_gate

CLASSES = {"read": SideEffect.READ_ONLY, "write": SideEffect.LOCAL_MUTATION,
           "push": SideEffect.REMOTE_MUTATION, "delete": SideEffect.DESTRUCTIVE}  # fmt: skip
TOOLS = [
    Tool(name, f"{name} something", {"type": "object"}, side_effect, lambda args: "done")
    for name, side_effect in CLASSES.items()
]


def make_pending(store: Store, tool: str = "push", arguments: dict | None = None,
                 run_id: str = "r1", kind: str = "", fixed: dict[str, Any] | None = None,
                 server: str = "srv", read: tuple[Reading, ...] = ()) -> ApprovalView:  # fmt: skip
    """A request waiting for the operator. ``kind``: "" for the policy's own approval;
    ``duplicate`` as the proxy's duplicate rule asks one (the same call ran moments ago);
    ``interrupted_side_effect`` for a call the policy allowed whose server was cut off
    mid-call, so that its outcome is unknown; ``own_files`` for a call the policy allowed
    whose arguments name a path in ``OWN_FOLDER``, taken as Signoff's own folder here.
    ``fixed``: the tool's fixed values, recorded in its spec as the proxy records them.
    ``server``: the server's name the call is recorded under. ``read``: what the policy says
    the request's values mean (``PolicyDecision.read``), as the proxy's rules say it."""
    # Stamped now, as a proxy stamps them: a tray's sweeper expires a request older than a day
    # by the wall clock (core/sweep.py rule 2), and FakeClock's fixed date is in the past.
    clock = FakeClock(now=datetime.now(UTC))
    tools, policy = TOOLS, None
    if fixed is not None:  # as core/proxy/server.py's _gate_tool writes the schema
        schema = {"type": "object", "x-signoff": {"pin": "0" * 64, "fixed": fixed}}
        tools = [t if t.name != tool else dataclasses.replace(t, input_schema=schema)
                 for t in TOOLS]  # fmt: skip
    if kind == "duplicate":
        duplicate = ProxyRules(ConfigPolicy())
        duplicate.duplicate_of = clock.now.isoformat()
        policy = duplicate
    elif kind == "own_files":
        everything = {c: Rule.ALLOW for c in CLASSES.values()}
        policy = ProxyRules(ConfigPolicy(everything), OwnFiles((OWN_FOLDER,)))
    elif kind == "interrupted_side_effect":
        tools = [
            *(t for t in TOOLS if t.name != tool),
            Tool(tool, f"{tool} something", {"type": "object"}, CLASSES[tool], _cut_off),
        ]
        policy = ConfigPolicy({CLASSES[tool]: Rule.ALLOW})
    else:
        assert not kind, f"no way to make a pending {kind!r}"
    if read:
        policy = _Reading(policy or ConfigPolicy(), read)
    return _propose(store, tools, policy, clock, tool, arguments or {"n": 7}, run_id, server)


# The host every request here is made by, as a proxy records it (core/proxy/host_identity.py).
HOST = ("a" * 64, "host-a 1.0 (process 41)")
# Short, so that a path in it fits a notification's line; nothing is made there.
OWN_FOLDER = Path("/tmp/signoff-own")
# What a policy may say values mean (``make_pending``'s ``read``), short for the same reason: a
# link that leads elsewhere, and a relative path read against a folder not known.
LINKED = Reading("/srv/link/id", ("/home/me/.ssh/id",))
RELATIVE = Reading("notes/id", (), "is a relative path, and the folder it is read against is"
                                   " not known")  # fmt: skip


class _Reading:
    """A policy that says what the request's values mean, as core/proxy/rules.py rule 4 does
    (read here from the test, not from this machine's files)."""

    def __init__(self, inner: Policy, read: tuple[Reading, ...]) -> None:
        self.inner, self.read = inner, read

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        return self.inner.evaluate(request).reading(self.read)


def _propose(store: Store, tools: list[Tool], policy: Policy | None, clock: FakeClock,
             tool: str, arguments: dict[str, Any], run_id: str,
             server: str = "srv") -> ApprovalView:  # fmt: skip
    gate = make_gate(store, tools, policy=policy, clock=clock, new_id=lambda: f"ap-{run_id}")
    session = gate.begin(run_id, "goal", call=CallLabel(server, tool, "k" * 64, *HOST))
    step = session.step()
    verdict = step.propose(Decision.tool_call(tool, arguments))
    if verdict.outcome == VerdictOutcome.ALLOWED:  # the call is made, and cut off
        observation = asyncio.run(step.execute())
        assert observation.approval is not None, observation
        return observation.approval
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None
    return verdict.approval


def _cut_off(arguments: Any) -> str:
    raise OutcomeUnknown("server srv exited (code 3) before it answered")
