"""Approvals bound to the exact request; grants with a TTL; policy re-evaluated on attach."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3

import pytest

from core import canonical
from core.approvals import approve, reject
from core.canonical import JSONValue
from core.decisions import Decision
from core.errors import (
    ApprovalExpired,
    ApprovalMismatch,
    ApprovalNotPending,
    DecisionUnauthenticated,
    RunLeased,
    RunStateError,
    UnknownApproval,
)
from core.gate import Gate, VerdictOutcome
from core.limits import Limits
from core.policy.policy import ConfigPolicy, Outcome, PolicyDecision, PolicyRequest, Rule
from core.store import Store
from core.tools import SideEffect
from tests.core.gatekit import Calls, FakeClock, make_gate, record_snapshot, standard_tools
from tests.forgery import last_seq, rewrite_event


def _pending(store: Store, *, clock: FakeClock | None = None, limits: Limits | None = None,
             tool: str = "push", origin: str = "", **kw):  # fmt: skip
    calls = Calls()
    clock = clock or FakeClock()
    g = make_gate(store, standard_tools(calls), clock=clock, **kw)
    s = g.begin("r", "goal", limits)
    v = s.step().propose(Decision.tool_call(tool, {"n": 7}, origin=origin))
    assert v.outcome == VerdictOutcome.PENDING and v.approval is not None
    return g, v.approval, calls, clock


def _set_arguments(store: Store, text: str) -> None:
    """Edit the step's recorded arguments behind the gate's back, as a tamperer would."""
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE steps SET arguments = ? WHERE run_id = 'r' AND idx = 0", (text,))
    conn.commit()
    conn.close()


# The push tool's spec and the pending request, in their RFC 8785 form written out by hand
# (keys sorted, no white space), so the hashes below owe nothing to the code under test.
PUSH_SPEC = (
    b'{"description":"push the counter","idempotent":false,"input_schema":'
    b'{"additionalProperties":false,"properties":{"n":{"type":"integer"}},"required":["n"],'
    b'"type":"object"},"name":"push","side_effect":"remote_mutation","terminal":false}'
)
PUSH_SPEC_HASH = hashlib.sha256(PUSH_SPEC).hexdigest()
PUSH_REQUEST = (
    b'{"arguments":{"n":7},"kind":"remote_mutation","run":"r","step":0,"tool":"push",'
    b'"tool_spec":"' + PUSH_SPEC_HASH.encode() + b'"}'
)


@pytest.mark.guarantee("G-GATE-1")
def test_the_approval_hash_is_over_the_canonical_request(gate_store: Store) -> None:
    """The hash binds the tool as specified, its arguments, the run, the step and the kind."""
    g, approval, _, _ = _pending(gate_store)
    assert g.tools["push"].spec_hash == PUSH_SPEC_HASH
    assert approval.request.encode() == PUSH_REQUEST
    assert approval.request_hash == hashlib.sha256(PUSH_REQUEST).hexdigest()
    row = gate_store._conn.execute("SELECT request, request_hash FROM approvals").fetchone()
    assert row == (PUSH_REQUEST.decode(), hashlib.sha256(PUSH_REQUEST).hexdigest())


@pytest.mark.guarantee("G-GATE-1")
def test_approving_then_attaching_runs_exactly_the_approved_request_once(
    gate_store: Store,
) -> None:
    g, approval, calls, clock = _pending(gate_store)
    approve(gate_store, "r", approval.id, "operator", "fine", now=clock())
    s, v = g.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.ALLOWED
    assert v.request is not None and v.request.args() == {"n": 7}
    asyncio.run(s.current().execute())
    assert calls.made == [("push", {"n": 7})]
    status = gate_store._conn.execute("SELECT status FROM approvals").fetchone()[0]
    assert status == "consumed"
    s.close()
    # The grant is spent: attaching again finds a running run with nothing approved to run.
    s2, v2 = g.attach("r")
    assert v2 is None and s2.current() is None
    s2.close()
    assert calls.made == [("push", {"n": 7})]


@pytest.mark.guarantee("G-GATE-1")
def test_an_approval_whose_request_was_edited_is_refused_and_nothing_changes(
    gate_store: Store,
) -> None:
    _g, approval, _calls, _ = _pending(gate_store)
    _set_arguments(gate_store, '{"n":700}')
    before = record_snapshot(gate_store)
    with pytest.raises(ApprovalMismatch):
        approve(gate_store, "r", approval.id, "operator")
    with pytest.raises(ApprovalMismatch):
        reject(gate_store, "r", approval.id, "operator")
    assert record_snapshot(gate_store) == before
    # Put the record back so the end-of-test checks see what the gate wrote.
    _set_arguments(gate_store, '{"n":7}')


@pytest.mark.guarantee("G-GATE-1")
def test_an_approval_edited_after_it_was_granted_does_not_execute(gate_store: Store) -> None:
    g, approval, calls, clock = _pending(gate_store)
    approve(gate_store, "r", approval.id, "operator", now=clock())
    _set_arguments(gate_store, '{"n":700}')
    before = record_snapshot(gate_store)
    with pytest.raises(ApprovalMismatch):
        g.attach("r")
    assert record_snapshot(gate_store) == before
    assert calls.made == []
    _set_arguments(gate_store, '{"n":7}')


# What the request hash covers (core/approvals.py rule 1), each rewritten after the approval by
# a writer of the database file, the request and its hash computed again so that the binding
# holds, and the decision's event made to name the new hash (the chain's hashes computed again):
# the operator's MAC, over the hash they approved, refuses it. The run and the step it names
# are pinned by the request's bytes above.
REQUEST_EDITS: dict[str, tuple[str, JSONValue]] = {
    "tool": ("UPDATE steps SET tool_name = 'write'", "write"),
    "tool_spec": ("UPDATE steps SET tool_spec_hash = :spec", ":spec"),
    "arguments": ("UPDATE steps SET arguments = '{\"n\":700}'", {"n": 700}),
    "kind": ("UPDATE approvals SET kind = 'destructive'", "destructive"),
}


@pytest.mark.guarantee("G-GATE-1")
@pytest.mark.parametrize("field", REQUEST_EDITS)
def test_a_request_rewritten_in_any_field_its_hash_covers_after_its_approval_runs_nothing(
    store: Store, field: str
) -> None:
    g, approval, calls, clock = _pending(store)
    approve(store, "r", approval.id, "operator", now=clock())
    spec = g.tools["write"].spec_hash  # another tool's, as it is recorded
    statement, value = REQUEST_EDITS[field]
    request = canonical.loads(approval.request)
    assert isinstance(request, dict)
    request[field] = spec if value == ":spec" else value
    new_hash = canonical.sha256_hex(request)
    assert new_hash != approval.request_hash
    rewrite_event(store.path, last_seq(store.path, "approval.decided"), request_hash=new_hash,
                  sql=((statement, {"spec": spec}),
                       ("UPDATE approvals SET request = ?, request_hash = ?",
                        (canonical.dumps_text(request), new_hash))))  # fmt: skip
    with pytest.raises(DecisionUnauthenticated):
        g.attach("r")
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-1")
def test_approving_a_hash_other_than_the_one_shown_is_refused(gate_store: Store) -> None:
    _, approval, _, _ = _pending(gate_store)
    before = record_snapshot(gate_store)
    with pytest.raises(ApprovalMismatch):
        approve(gate_store, "r", approval.id, "operator", expected_hash="0" * 64)
    assert record_snapshot(gate_store) == before
    approve(gate_store, "r", approval.id, "operator", expected_hash=approval.request_hash)


def test_an_approval_is_decided_once(gate_store: Store) -> None:
    _, approval, _, _ = _pending(gate_store)
    approve(gate_store, "r", approval.id, "operator")
    before = record_snapshot(gate_store)
    with pytest.raises(ApprovalNotPending):
        approve(gate_store, "r", approval.id, "operator")
    with pytest.raises(ApprovalNotPending):
        reject(gate_store, "r", approval.id, "operator")
    with pytest.raises(UnknownApproval):
        approve(gate_store, "other-run", approval.id, "operator")
    assert record_snapshot(gate_store) == before


@pytest.mark.guarantee("G-GATE-1")
def test_rejecting_cancels_the_run_and_nothing_runs(gate_store: Store) -> None:
    g, approval, calls, _ = _pending(gate_store)
    reject(gate_store, "r", approval.id, "operator", "not today")
    row = gate_store._conn.execute("SELECT status, end_reason FROM runs").fetchone()
    assert row == ("CANCELLED", "rejected")
    with pytest.raises(RunStateError):
        g.attach("r")
    assert calls.made == []


def test_a_pending_approval_attached_to_stays_pending(gate_store: Store) -> None:
    g, approval, calls, _ = _pending(gate_store)
    before = record_snapshot(gate_store)
    s, v = g.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.PENDING
    assert v.approval is not None and v.approval.id == approval.id
    assert s.done() and calls.made == []
    assert record_snapshot(gate_store) == before


@pytest.mark.guarantee("G-GATE-3")
def test_a_grant_past_its_ttl_at_attach_cancels_the_run_and_runs_nothing(
    gate_store: Store,
) -> None:
    g, approval, calls, clock = _pending(gate_store, limits=Limits(grant_ttl_seconds=60))
    approve(gate_store, "r", approval.id, "operator", now=clock())
    clock.advance(61)
    _s, v = g.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.ENDED
    assert (v.run.status, v.run.end_reason) == ("CANCELLED", "approval_expired")
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-3")
def test_a_grant_that_expires_between_attach_and_execute_runs_nothing(gate_store: Store) -> None:
    g, approval, calls, clock = _pending(gate_store, limits=Limits(grant_ttl_seconds=60))
    approve(gate_store, "r", approval.id, "operator", now=clock())
    clock.advance(30)
    s, v = g.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.ALLOWED
    clock.advance(31)
    with pytest.raises(ApprovalExpired):
        asyncio.run(s.current().execute())
    assert calls.made == []
    row = gate_store._conn.execute("SELECT status, end_reason FROM runs").fetchone()
    assert row == ("CANCELLED", "approval_expired")
    assert s.done()


@pytest.mark.guarantee("G-GATE-3")
def test_a_grant_attached_days_after_it_was_granted_is_past_an_hours_ttl(
    gate_store: Store,
) -> None:
    """A TTL of an hour lapses however long past it the attach comes: days too."""
    g, approval, calls, clock = _pending(gate_store, limits=Limits(grant_ttl_seconds=3600))
    approve(gate_store, "r", approval.id, "operator", now=clock())
    clock.advance(3 * 86_400 + 10)
    _s, v = g.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.ENDED
    assert (v.run.status, v.run.end_reason) == ("CANCELLED", "approval_expired")
    status = gate_store._conn.execute("SELECT status FROM approvals").fetchone()[0]
    assert status == "expired"
    assert calls.made == []


@pytest.mark.parametrize(
    ("ttl", "pending", "granted"),
    [(None, 86_400 * 30, 86_400 * 30), (3600, 86_400 * 30, 3599)],
    ids=["no-ttl", "an-hour-counted-from-the-decision"],
)
def test_a_grant_within_its_ttl_or_with_none_executes_however_long_the_wait(
    gate_store: Store, ttl: float | None, pending: float, granted: float
) -> None:
    """No TTL: a grant runs a month after it was given. A TTL counts from the decision, not
    from the request: a request pending for a month, then granted, runs within the hour."""
    g, approval, calls, clock = _pending(gate_store, limits=Limits(grant_ttl_seconds=ttl))
    clock.advance(pending)
    approve(gate_store, "r", approval.id, "operator", now=clock())
    clock.advance(granted)
    s, v = g.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.ALLOWED
    asyncio.run(s.current().execute())
    assert calls.made == [("push", {"n": 7})]


class Switch:
    """A policy the test changes between the proposal and the attach."""

    def __init__(self) -> None:
        self.answer: PolicyDecision | None = None
        self.seen: list[str] = []

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        self.seen.append(request.text)
        if self.answer is not None:
            return self.answer
        return PolicyDecision(Outcome.APPROVE, "ask", kind=request.side_effect.value)


def _granted_then(store: Store, answer: PolicyDecision | None):
    """A push pending, approved, and then the policy changed to ``answer``; then attach."""
    policy = Switch()
    g, approval, calls, clock = _pending(store, policy=policy)
    approve(store, "r", approval.id, "operator", now=clock())
    policy.answer = answer
    session, verdict = g.attach("r")
    assert verdict is not None
    return session, verdict, approval, calls, policy


@pytest.mark.guarantee("G-GATE-4")
def test_a_changed_policy_re_pauses_on_attach_and_a_reject_then_cancels(
    gate_store: Store,
) -> None:
    answer = PolicyDecision(Outcome.APPROVE, "now a second look", kind="second_look")
    _, v, approval, calls, _ = _granted_then(gate_store, answer)
    assert v.outcome == VerdictOutcome.PENDING
    assert v.approval is not None and v.approval.kind == "second_look"
    assert v.approval.id != approval.id
    statuses = dict(gate_store._conn.execute("SELECT id, status FROM approvals").fetchall())
    assert statuses == {approval.id: "superseded", v.approval.id: "pending"}
    reject(gate_store, "r", v.approval.id, "operator", "no")
    assert gate_store._conn.execute("SELECT status FROM runs").fetchone() == ("CANCELLED",)
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-4")
def test_a_policy_that_now_denies_denies_on_attach_and_the_run_goes_on(gate_store: Store) -> None:
    s, v, _, calls, _ = _granted_then(gate_store, PolicyDecision(Outcome.DENY, "no pushes"))
    assert v.outcome == VerdictOutcome.DENIED
    assert v.run.status == "RUNNING" and not s.done()
    assert s.step() is not None
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-4")
def test_a_policy_that_now_aborts_ends_the_run_on_attach(gate_store: Store) -> None:
    _, v, _, calls, _ = _granted_then(gate_store, PolicyDecision(Outcome.ABORT, "stop"))
    assert v.outcome == VerdictOutcome.ENDED
    assert (v.run.status, v.run.end_reason) == ("FAILED", "policy_abort")
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-4")
def test_the_policy_sees_the_same_request_on_proposal_and_on_attach(gate_store: Store) -> None:
    _, v, _, _, policy = _granted_then(gate_store, None)
    assert v.outcome == VerdictOutcome.ALLOWED
    assert len(policy.seen) == 2
    assert policy.seen[0] == policy.seen[1]


@pytest.mark.guarantee("G-GATE-1")
def test_a_grant_for_a_tool_whose_spec_changed_is_not_executed(gate_store: Store) -> None:
    _, approval, calls, clock = _pending(gate_store)
    approve(gate_store, "r", approval.id, "operator", now=clock())
    tools = standard_tools(calls)
    changed = [t if t.name != "push" else type(t)(t.name, "push, reworded", t.input_schema,
               t.side_effect, t.func) for t in tools]  # fmt: skip
    g2 = make_gate(gate_store, changed, clock=clock)
    _s, v = g2.attach("r")
    assert v is not None and v.outcome == VerdictOutcome.ENDED
    assert v.run.end_reason == "tool_changed"
    assert calls.made == []


@pytest.mark.guarantee("G-GATE-1")
def test_two_gates_attaching_one_grant_execute_it_once(gate_store: Store) -> None:
    g, approval, calls, clock = _pending(gate_store)
    approve(gate_store, "r", approval.id, "operator", now=clock())
    other = Gate(g.config)
    s1, v1 = g.attach("r")
    assert v1.outcome == VerdictOutcome.ALLOWED
    # The first attach claimed the grant: the second is refused and writes nothing.
    before = record_snapshot(gate_store)
    with pytest.raises(RunLeased):
        other.attach("r")
    assert record_snapshot(gate_store) == before
    asyncio.run(s1.current().execute())
    with pytest.raises(RunLeased):
        other.attach("r")
    assert calls.made == [("push", {"n": 7})]


def test_origin_is_recorded_and_changes_nothing_else(home, tmp_path) -> None:
    records = {}
    for origin in ("", "model", "operator"):
        with Store.open(tmp_path / f"{origin or 'none'}.db") as store:
            _, approval, _, _ = _pending(store, origin=origin)
            decision = canonical.loads(
                store._conn.execute("SELECT decision FROM steps").fetchone()[0]
            )
            origin_column = store._conn.execute("SELECT origin FROM steps").fetchone()[0]
            records[origin] = (approval.request_hash, decision, origin_column)
    assert records[""][0] == records["model"][0] == records["operator"][0]
    assert "origin" not in records[""][1]
    assert records["model"][1] == {**records[""][1], "origin": "model"}
    assert (records[""][2], records["model"][2]) == (None, "model")


def test_a_config_policy_rule_for_the_tool_beats_the_rule_for_its_class(
    gate_store: Store,
) -> None:
    policy = ConfigPolicy({SideEffect.REMOTE_MUTATION: Rule.APPROVE}, {"push": Rule.ALLOW})
    calls = Calls()
    g = make_gate(gate_store, standard_tools(calls), policy=policy)
    s = g.begin("r", "goal")
    assert s.step().propose(Decision.tool_call("push", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    identity = canonical.loads(
        gate_store._conn.execute(
            "SELECT payload FROM events WHERE kind = 'step.policy'"
        ).fetchone()[0]
    )["policy"]
    assert identity == policy.identity()
