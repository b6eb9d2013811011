"""Pending approvals made the way a proxy makes them, for the app's tests."""

from __future__ import annotations

from core.decisions import Decision
from core.gate import VerdictOutcome
from core.records import ApprovalView
from core.store import Store
from core.tools import SideEffect, Tool
from core.transitions import CallLabel
from tests.core.gatekit import make_gate

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
    gate = make_gate(store, TOOLS, new_id=lambda: f"ap-{run_id}")
    session = gate.begin(run_id, "goal", call=CallLabel("srv", tool, "k" * 64))
    step = session.step()
    verdict = step.propose(Decision.tool_call(tool, arguments or {"n": 7}))
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None
    return verdict.approval
