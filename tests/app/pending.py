"""Pending approvals made the way a proxy makes them, for the app's tests."""

from __future__ import annotations

from datetime import UTC, datetime

from core.decisions import Decision
from core.gate import VerdictOutcome
from core.records import ApprovalView
from core.store import Store
from core.tools import SideEffect, Tool
from core.transitions import CallLabel
from tests.core.gatekit import FakeClock, make_gate

TOOLS = [
    Tool(name, f"{name} something", {"type": "object"}, side_effect, lambda args: "done")
    for name, side_effect in (
        ("read", SideEffect.READ_ONLY),
        ("write", SideEffect.LOCAL_MUTATION),
        ("push", SideEffect.REMOTE_MUTATION),
        ("delete", SideEffect.DESTRUCTIVE),
    )
]


def make_pending(store: Store, tool: str = "push", arguments: dict | None = None,
                 run_id: str = "r1") -> ApprovalView:  # fmt: skip
    # Stamped now, as a proxy stamps them: a tray's sweeper expires a request older than a day
    # by the wall clock (core/sweep.py rule 2), and FakeClock's fixed date is in the past.
    clock = FakeClock(now=datetime.now(UTC))
    gate = make_gate(store, TOOLS, clock=clock, new_id=lambda: f"ap-{run_id}")
    session = gate.begin(run_id, "goal", call=CallLabel("srv", tool, "k" * 64))
    step = session.step()
    verdict = step.propose(Decision.tool_call(tool, arguments or {"n": 7}))
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None
    return verdict.approval
