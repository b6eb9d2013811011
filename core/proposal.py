"""Proposing a step's decision: its validation, the policy, and the verdict's transaction.

Rules:

1. The decision is recorded verbatim, whatever it is, in the transaction that writes its
   verdict; nothing is written before validation and the policy have both been done.
2. A decision that fails validation (malformed, an unknown tool, a tool with no side-effect
   class, arguments that are not exact JSON or do not match the schema) is denied as
   ``invalid_decision``: the step fails, the run goes on, and the policy is not asked.
3. ``complete`` ends the run ``COMPLETED`` with its result (which must be exact JSON, else the
   decision is invalid); ``fail`` ends it ``FAILED`` as ``agent_failed``.
4. A tool call is put to the policy as its canonical request. ``allow`` lets exactly that
   request through to ``execute`` (the policy's decision is recorded; the request is recorded
   as the tool starts); ``deny`` records the request and denies the step; ``approve`` records it
   and pauses the run on an approval of the policy's kind (``core.waiting``); ``abort`` fails
   the run as ``policy_abort``. A policy that fails ends the run as ``policy_error``, with the
   request and the failure recorded, and nothing runs.
5. A denied step closes and the session goes on; a pending verdict is the end of the session
   (paused), and an ended one the end of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core import approvals, canonical, transitions, waiting
from core.canonical import JSONValue
from core.decisions import Decision, Kind
from core.errors import JSONRefused, PolicyFailed, RunStateError
from core.gate_parts import GateParts, RunFacts, policy_failure
from core.hold import Hold, StepState
from core.policy.policy import Outcome, PolicyDecision, PolicyRequest
from core.records import RunView
from core.store import Transaction, format_time
from core.tools import CompiledTool
from core.verdicts import Request, Verdict, VerdictOutcome


def propose(s: Hold, state: StepState, decision: Decision) -> Verdict:
    """Record the open step's decision and answer its verdict."""
    with s._call():
        s._check_open(state)
        if state.proposed:
            raise RunStateError(f"step {state.index} already has a decision")
        gate = s._gate
        now = gate.config.clock()
        at = format_time(now)
        run = s._run
        # Pure: validation and the policy, before any write.
        planned = plan(gate, decision, run, state.index)
        with s._write() as tx:
            verdict = decide(s, state, tx, decision, planned, run, now, at)
        state.proposed = True
        return conclude(s, verdict)


@dataclass
class Plan:
    invalid: str | None = None
    complete: str | None = None
    fail: str | None = None
    tool: CompiledTool | None = None
    request: Request | None = None
    policy_request: PolicyRequest | None = None
    policy: PolicyDecision | None = None
    identity: str | None = None
    failure: tuple[dict[str, JSONValue], str] | None = None  # the policy failed: nothing runs


def plan(gate: GateParts, decision: Decision, run: RunView | RunFacts, index: int) -> Plan:
    """Validation and the policy: pure, done before the transaction that records them."""
    problem = decision.problem()
    if problem is not None:
        return Plan(invalid=problem)
    if decision.kind == Kind.COMPLETE:
        try:
            return Plan(complete=canonical.dumps_text(decision.parsed_result()))
        except JSONRefused as e:
            return Plan(invalid=f"the result is not exact JSON: {e}")
    if decision.kind == Kind.FAIL:
        return Plan(fail=decision.error or "the agent gave up")
    tool = gate.tools.get(decision.tool)
    if tool is None:
        return Plan(invalid=f"there is no tool {decision.tool!r}")
    if tool.tool.side_effect is None:
        return Plan(invalid=f"tool {tool.name} is unavailable: it has no side-effect class")
    try:
        parsed = decision.canonical_arguments()  # parsed once, here or by the caller
    except JSONRefused as e:
        return Plan(invalid=f"the arguments are not exact JSON: {e} [{type(e).__name__}]")
    arguments = parsed.value
    errors = tool.schema_errors(arguments)
    if errors:
        return Plan(invalid="the arguments do not match the schema: " + "; ".join(errors))
    request_hash = approvals.call_hash(
        spec_hash=tool.spec_hash, tool=tool.name, arguments=arguments
    )
    request = Request(
        run.id, index, tool.name, tool.spec_hash, tool.tool.side_effect,
        parsed.text, request_hash, parsed,
    )  # fmt: skip
    policy_request = gate._policy_request(tool, arguments, run, index)
    try:
        policy_decision, identity = gate._evaluate(policy_request)
    except PolicyFailed as failure:
        return Plan(tool=tool, request=request, policy_request=policy_request,
                     failure=policy_failure(failure))  # fmt: skip
    return Plan(
        tool=tool, request=request, policy_request=policy_request,
        policy=policy_decision, identity=identity,
    )  # fmt: skip


def decide(
    s: Hold,
    state: StepState,
    tx: Transaction,
    decision: Decision,
    plan: Plan,
    run: RunView,
    now: datetime,
    at: str,
) -> Verdict:
    """Record the decision and write its verdict in ``tx`` (propose's transaction, or the one
    that begins a run with its first step: core/first_step.py)."""
    transitions.record_decision(tx, s.run_id, state.index, decision=decision.record(), at=at)
    return _apply(s, state, tx, plan, run, now, at)


def _apply(
    s: Hold, state: StepState, tx: Transaction, plan: Plan, run: RunView, now: datetime, at: str
) -> Verdict:
    index = state.index
    active = s._active(now)
    if plan.invalid is not None:
        transitions.finish_step(
            tx, s.run_id, index, status="failed", active_seconds=active, at=at,
            observation={"error": "invalid_decision", "detail": plan.invalid},
        )  # fmt: skip
        return Verdict(VerdictOutcome.DENIED, run, reason=plan.invalid)
    if plan.complete is not None:
        transitions.finish_step(
            tx, s.run_id, index, status="done", active_seconds=active, at=at,
            observation={"completed": True},
        )  # fmt: skip
        transitions.end_run(
            tx, s.run_id, status="COMPLETED", reason="completed", at=at, result=plan.complete
        )
        return Verdict(VerdictOutcome.ENDED, run, reason="completed")
    if plan.fail is not None:
        transitions.finish_step(
            tx, s.run_id, index, status="failed", active_seconds=active, at=at,
            observation={"error": "agent_failed", "detail": plan.fail},
        )  # fmt: skip
        transitions.end_run(tx, s.run_id, status="FAILED", reason="agent_failed", at=at)
        return Verdict(VerdictOutcome.ENDED, run, reason=plan.fail)

    tool, request, decision = plan.tool, plan.request, plan.policy
    if tool is None or request is None or plan.policy_request is None:
        raise RunStateError("incomplete plan")
    if plan.failure is not None:  # nothing to record of the policy but how it failed
        observation, reason = plan.failure
        transitions.record_request(
            tx, s.run_id, index, tool=tool.name, spec_hash=tool.spec_hash,
            spec_text=tool.spec_text, arguments=request.arguments,
            request_hash=request.request_hash, at=at,
        )  # fmt: skip
        transitions.finish_step(
            tx, s.run_id, index, status="failed", active_seconds=active, at=at,
            observation=observation,
        )  # fmt: skip
        transitions.end_run(tx, s.run_id, status="FAILED", reason="policy_error", at=at)
        return Verdict(VerdictOutcome.ENDED, run, request, None, reason)
    if decision is None:
        raise RunStateError("incomplete plan")
    transitions.record_policy(
        tx, s.run_id, index, request=plan.policy_request.recorded(),
        decision=decision.as_json(), policy=plan.identity, at=at,
    )  # fmt: skip
    if decision.outcome is Outcome.ALLOW:
        state.allowed, state.request, state.tool = True, request, tool
        return Verdict(VerdictOutcome.ALLOWED, run, request, None, decision.reason)
    transitions.record_request(
        tx, s.run_id, index, tool=tool.name, spec_hash=tool.spec_hash,
        spec_text=tool.spec_text, arguments=request.arguments,
        request_hash=request.request_hash, at=at,
    )  # fmt: skip
    if decision.outcome is Outcome.DENY:
        transitions.finish_step(
            tx, s.run_id, index, status="denied", active_seconds=active, at=at,
            observation={"error": "denied", "reason": decision.reason},
        )  # fmt: skip
        return Verdict(VerdictOutcome.DENIED, run, request, None, decision.reason)
    if decision.outcome is Outcome.APPROVE:
        approval = waiting.pause(s, tx, index, decision, active, at)
        return Verdict(VerdictOutcome.PENDING, run, request, approval, decision.reason)
    transitions.finish_step(
        tx, s.run_id, index, status="failed", active_seconds=active, at=at,
        observation={"error": "policy_abort", "reason": decision.reason},
    )  # fmt: skip
    transitions.end_run(tx, s.run_id, status="FAILED", reason="policy_abort", at=at)
    return Verdict(VerdictOutcome.ENDED, run, request, None, decision.reason)


def conclude(s: Hold, verdict: Verdict) -> Verdict:
    """Attach the run as written, and end the step or the session as the verdict says."""
    run = s._run
    result = Verdict(verdict.outcome, run, verdict.request, verdict.approval,
                           verdict.reason)  # fmt: skip
    if verdict.outcome == VerdictOutcome.DENIED:
        s._open = None
    elif verdict.outcome == VerdictOutcome.PENDING:
        s._finish("paused")
    elif verdict.outcome == VerdictOutcome.ENDED:
        s._finish("ended")
    return result
