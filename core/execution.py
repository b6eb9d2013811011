"""Executing an allowed step: the tool's start, the call, and the outcome's transaction.

Rules:

1. Only the request an allowed verdict let through runs, and only once.
2. The tool's start is written before the tool is called, with the request when no grant
   recorded it: under the run's lease, checked live by the wall clock; for a grant, under the
   waiting run's compare-and-set guard (``core.waiting`` rule 6), after which the session holds
   the run's lease.
3. A grant runs only once the head that holds its tool's start is kept outside the database
   (core/anchor.py), checked before the start and kept after it: a database that no longer
   holds the kept head raises ``DatabaseRestored`` before anything is written; a head that
   cannot be kept fails the step (nothing ran) and ends the run ``not_anchored``.
4. A grant whose TTL ran out since it was attached cancels the run as ``approval_expired`` and
   raises ``ApprovalExpired``; nothing runs.
5. A tool that raises fails the step: its failure is an observation, not the gate's, recorded
   with the JSON detail of a ``ToolFailed``. So does a value with no exact JSON form.
6. A tool that raises ``OutcomeUnknown`` may or may not have taken effect: a read-only or
   idempotent tool fails the step; any other pauses the run on an ``interrupted_side_effect``
   approval of the step's request, and the gate never runs it again by itself.
7. The outcome is written with its events in one transaction, with whatever the caller's
   ``also`` writes there; a terminal tool's success completes the run with its result.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from datetime import datetime
from typing import Any

from core import canonical, effects, transitions, waiting
from core.anchor import Anchor, first_event, holds_since
from core.canonical import JSONValue
from core.errors import (
    ApprovalExpired,
    DatabaseRestored,
    HeadUnavailable,
    JSONRefused,
    NotAnchored,
    OutcomeUnknown,
    RunStateError,
    ToolFailed,
)
from core.hold import Hold, StepState
from core.operator_key import unauthenticated_mode
from core.policy.policy import Outcome, PolicyDecision
from core.records import ApprovalView, read_step
from core.store import Transaction, format_time
from core.tools import CompiledTool
from core.verdicts import INTERRUPTED_REASON, Observation, Request


async def execute(
    s: Hold, state: StepState, also: Callable[[Transaction, Observation], None] | None
) -> Observation:
    """Run exactly the allowed request of the open step (see ``OpenStep.execute``)."""
    async with s._call_async():
        s._check_open(state)
        if not state.allowed or state.request is None or state.tool is None:
            raise RunStateError(f"step {state.index} has no allowed verdict to execute")
        request, tool, grant = state.request, state.tool, state.grant
        if not state.started:  # else written with the run (core/first_step.py)
            await _start(s, state, request, grant)
        state.allowed = False
        return await _run(s, state, request, tool, also)


async def _start(s: Hold, state: StepState, request: Request, grant: ApprovalView | None) -> None:
    """Write the tool's start (rules 2 to 4)."""
    now = s._gate.config.clock()
    at = format_time(now)
    if grant is not None:
        _check_grant_ttl(s, state.index, grant, now, at)
    request_json = request_record(request)
    if grant is None:
        with s._write(starts_side_effect=True) as tx:
            start(s, state, tx, request, request_json, None, at)
    else:
        # The keyring is called off the event loop: other calls go on meanwhile.
        anchor = await asyncio.to_thread(_anchor_for, s._gate.config.anchor, s._store.database_id,
                                         unauthenticated_mode_of(s))  # fmt: skip
        if anchor is not None:
            kept = await asyncio.to_thread(anchor.kept, s._store)
            if kept is not None:  # a database restored from before the anchor: refused
                since = first_event(s._store, grant.run_id, grant.step, "approval.decided")
                holds_since(s._store, kept, since)
        with s._store.transaction() as tx:
            waiting.check_waiting(s, tx, grant)
            waiting.authenticated(s, grant, tx.conn)
            start(s, state, tx, request, request_json, grant.id, at)
        s._read_run()
        s._hold_lease()
        if anchor is not None:
            state.allowed = False
            await _anchor_started(s, state.index, anchor)


async def _run(
    s: Hold,
    state: StepState,
    request: Request,
    tool: CompiledTool,
    also: Callable[[Transaction, Observation], None] | None,
) -> Observation:
    """Call the started tool and write its outcome (rules 5 to 7)."""
    gate = s._gate
    try:
        observation = await _call_tool(tool, request.args())
    except OutcomeUnknown as e:
        if not effects.repeatable(tool.tool.spec()):  # the spec recorded for this step
            return _outcome_unknown(s, state.index, str(e))
        observation = Observation(False, None, f"outcome unknown: {e}", f"error: {e}")

    end = gate.config.clock()
    end_at = format_time(end)
    with s._write() as tx:
        transitions.finish_step(
            tx, s.run_id, state.index,
            status="done" if observation.ok else "failed",
            observation=_observation_json(observation),
            active_seconds=s._active(end), at=end_at,
        )  # fmt: skip
        if observation.ok and tool.tool.terminal:
            transitions.end_run(
                tx, s.run_id, status="COMPLETED", reason="completed", at=end_at,
                result=observation.result,
            )  # fmt: skip
        if also is not None:
            also(tx, observation)
    s._open = None
    if observation.ok and tool.tool.terminal:
        s._finish("ended")
    return observation


def request_record(request: Request) -> dict[str, JSONValue]:
    """The request as the tool's start records it."""
    return {
        "tool": request.tool,
        "spec_hash": request.spec_hash,
        "arguments": request.value(),  # as parsed when the decision was checked
    }


def start(
    s: Hold,
    state: StepState,
    tx: Transaction,
    request: Request,
    request_json: dict[str, JSONValue],
    approval_id: str | None,
    at: str,
) -> None:
    """Write the tool's start in ``tx`` (and the request, when no grant recorded it)."""
    tool = state.tool
    if tool is None:
        raise RunStateError("no tool")
    if approval_id is None:
        transitions.record_request(
            tx, s.run_id, state.index, tool=request.tool, spec_hash=request.spec_hash,
            spec_text=tool.spec_text, arguments=request.arguments,
            request_hash=request.request_hash, at=at,
        )  # fmt: skip
    transitions.start_tool(
        tx, s.run_id, state.index, request=request_json, request_hash=request.request_hash,
        approval_id=approval_id, owner=s._gate.owner, expires=s._gate._lease_expiry(), at=at,
    )  # fmt: skip


def unauthenticated_mode_of(s: Hold) -> bool:
    with s._store.snapshot() as conn:
        return unauthenticated_mode(conn)


def _anchor_for(anchor: Anchor | None, database_id: str, unauthenticated: bool) -> Anchor | None:
    """The anchor an approved side effect waits for: none only when the operator chose
    unauthenticated decisions and the keyring cannot be read (core/anchor.py rule 4)."""
    if anchor is None or not unauthenticated:
        return anchor
    try:
        anchor.heads.load(database_id)
    except HeadUnavailable:
        return None
    return anchor


async def _anchor_started(s: Hold, index: int, anchor: Anchor) -> None:
    """Keep the head that holds this step's start before its tool is called; when it cannot
    be kept, the step fails, nothing having run, and the run ends ``not_anchored``."""
    try:
        await asyncio.to_thread(anchor.advance, s._store, s._store.head(), latest=True)
    except (NotAnchored, DatabaseRestored) as e:
        at = format_time(s._gate.config.clock())
        with s._write() as tx:
            transitions.finish_step(
                tx, s.run_id, index, status="failed", active_seconds=0.0, at=at,
                observation={"ok": False, "error": f"not run: {e}"},
            )  # fmt: skip
            transitions.end_run(tx, s.run_id, status="FAILED", reason="not_anchored", at=at)
        s._open = None
        s._finish("ended")
        raise


def _check_grant_ttl(s: Hold, index: int, grant: ApprovalView, now: datetime, at: str) -> None:
    granted = waiting.authenticated(s, grant)  # the TTL and the decision's time, as chained
    ttl = granted.ttl
    decided = datetime.fromisoformat(granted.decided_at)
    if ttl is None or (now - decided).total_seconds() < ttl:
        return
    with s._store.snapshot() as conn:
        step = read_step(conn, s.run_id, index)
    if step is None:
        raise RunStateError(f"step {index} is not recorded")
    waiting.end_waiting(s, step, grant, "approval_expired", at, closing="expired")
    raise ApprovalExpired(
        f"approval {grant.id} expired before it was executed; run {s.run_id} was cancelled"
    )


def _outcome_unknown(s: Hold, index: int, why: str) -> Observation:
    """The call may or may not have taken effect: wait for the operator, never re-run."""
    now = s._gate.config.clock()
    at = format_time(now)
    decision = PolicyDecision(Outcome.APPROVE, f"{INTERRUPTED_REASON}: {why}",
                              kind="interrupted_side_effect")  # fmt: skip
    with s._write() as tx:
        approval = waiting.pause(s, tx, index, decision, s._active(now), at)
    s._finish("paused")
    return Observation(False, None, f"outcome unknown: {why}",
                       "outcome unknown: waiting for the operator", approval)  # fmt: skip


async def _call_tool(tool: CompiledTool, arguments: JSONValue) -> Observation:
    try:
        value: Any = tool.tool.func(arguments)  # type: ignore[arg-type]
        if inspect.isawaitable(value):
            value = await value
    except OutcomeUnknown:
        raise
    except ToolFailed as e:
        try:
            detail = canonical.dumps_text(e.detail)
        except JSONRefused:
            detail = None
        return Observation(False, None, f"{type(e).__name__}: {e}", f"error: {e}", detail=detail)
    except Exception as e:  # a tool's failure is an observation, not the gate's failure
        return Observation(False, None, f"{type(e).__name__}: {e}", f"error: {e}")
    try:
        text = canonical.dumps_text(value)
    except JSONRefused as e:
        return Observation(False, None, f"the tool returned a value with no exact JSON form: {e}",
                           "error: unrepresentable result")  # fmt: skip
    summary = value if isinstance(value, str) else text
    return Observation(True, text, None, summary[:200])


def _observation_json(observation: Observation) -> dict[str, JSONValue]:
    if observation.ok:
        return {"ok": True, "result": canonical.loads(observation.result or "null")}
    if observation.detail is not None:
        detail = canonical.loads(observation.detail)
        return {"ok": False, "error": observation.error, "detail": detail}
    return {"ok": False, "error": observation.error}
