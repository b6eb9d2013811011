"""Observers and OpenTelemetry: what the gate committed, told after the commit, as spans."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import shutil
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from core import Decision, approve, reject, transitions
from core.errors import ModelLimitReached
from core.gate import VerdictOutcome
from core.limits import Limits
from core.observe import Committed, Relay
from core.policy.policy import DefaultPolicy, Outcome, PolicyDecision, PolicyRequest
from core.prices import ModelConfig, Prices
from core.spans import span_id, trace_id
from core.store import Store
from core.telemetry import SpanObserver, export_stored, otlp, readable, stored_spans
from core.tools import SideEffect, Tool
from tests.core.gatekit import Calls, FakeClock, counter_tool, make_gate, standard_tools
from tests.otlp_receiver import Receiver, carried, receiving

DECISION = "signoff.decision"


def spans_by_name(spans: Sequence[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def run_with_an_approval(store: Store, *, observers: Sequence[Any] = (), clock: Any = None) -> None:
    """Read (allowed), push (waits, approved, runs), then complete; every decision by the model."""
    gate = make_gate(store, standard_tools(Calls()), anchor=None, observers=observers, clock=clock)
    session = gate.begin("run-1", "publish")
    step = session.step()
    step.propose(Decision.tool_call("read", {"n": 1}, origin="model"))
    asyncio.run(step.execute())
    step = session.step()
    verdict = step.propose(Decision.tool_call("push", {"n": 2}, origin="model"))
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval
    approve(store, "run-1", verdict.approval.id, by="op", reason="ok",
            expected_hash=verdict.approval.request_hash, now=clock and clock())  # fmt: skip
    session, verdict = gate.attach("run-1")
    asyncio.run(session.current().execute())
    session.step().propose(Decision.complete('"done"'))


def test_each_kind_of_span_has_its_ids_parent_class_verdict_and_origin(gate_store: Store) -> None:
    exporter = InMemorySpanExporter()
    observer = SpanObserver(gate_store, exporter)
    run_with_an_approval(gate_store, observers=[observer])
    assert gate_store.flush_observers()
    named = spans_by_name(exporter.get_finished_spans())
    assert {k: len(v) for k, v in named.items()} == {
        "signoff.run": 1, "signoff.step": 3, "signoff.decision": 3,
        "signoff.approval": 1, "signoff.tool_call": 2,
    }  # fmt: skip
    trace = trace_id(gate_store.database_id, "run-1")
    (run,) = named["signoff.run"]
    assert run.context.trace_id == trace and run.parent is None
    assert run.context.span_id == span_id(trace, "run")
    assert run.attributes["signoff.run.status"] == "COMPLETED"
    steps = {s.attributes["signoff.step.index"]: s for s in named["signoff.step"]}
    assert all(s.parent.span_id == run.context.span_id for s in steps.values())  # type: ignore[union-attr]
    for kind in ("signoff.decision", "signoff.approval", "signoff.tool_call"):
        for span in named[kind]:
            assert span.context.trace_id == trace
            parent = steps[span.attributes["signoff.step.index"]]
            assert span.parent.span_id == parent.context.span_id  # type: ignore[union-attr]
    decisions = {d.attributes["signoff.step.index"]: d.attributes for d in named[DECISION]}
    assert decisions[0]["signoff.decision.origin"] == "model"
    assert decisions[0]["signoff.verdict"] == "allowed"
    assert decisions[0]["signoff.tool.side_effect"] == "read_only"
    assert decisions[0]["signoff.policy.outcome"] == "allow"
    assert decisions[1]["signoff.verdict"] == "pending"
    assert decisions[1]["signoff.tool.side_effect"] == "remote_mutation"
    assert decisions[1]["signoff.policy.outcome"] == "approve"
    assert decisions[2]["signoff.verdict"] == "ended"
    assert "signoff.decision.origin" not in decisions[2]  # none named, none exported
    (approval,) = named["signoff.approval"]
    assert approval.attributes["signoff.approval.status"] == "approved"
    assert approval.attributes["signoff.approval.kind"] == "remote_mutation"
    assert approval.context.span_id == span_id(
        trace, "approval", approval.attributes["signoff.approval.id"]
    )
    tools = {t.attributes["signoff.tool.name"]: t.attributes for t in named["signoff.tool_call"]}
    assert tools["push"]["signoff.tool.side_effect"] == "remote_mutation"
    assert tools["push"]["signoff.approval.id"] == approval.attributes["signoff.approval.id"]
    assert tools["read"]["signoff.tool.status"] == "done"
    # The live copy is the record's: exporting the store later makes the very same spans.
    assert sorted(map(_key, exporter.get_finished_spans())) == sorted(
        _key(readable(s)) for s in stored_spans(gate_store)
    )


def test_a_denial_a_failed_tool_and_a_failed_run_say_so(gate_store: Store) -> None:
    def broken(args: dict[str, Any]) -> Any:
        raise RuntimeError("the disk is gone")

    exporter = InMemorySpanExporter()
    tools = [counter_tool("read", SideEffect.READ_ONLY, Calls(), result=broken)]
    gate = make_gate(gate_store, tools, anchor=None, observers=[SpanObserver(gate_store, exporter)])
    session = gate.begin("run-1", "read")
    step = session.step()
    assert step.propose(Decision.tool_call("nope", {})).outcome == VerdictOutcome.DENIED
    step = session.step()
    step.propose(Decision.tool_call("read", {"n": 1}, origin="plan"))
    asyncio.run(step.execute())
    session.step().propose(Decision.fail("gave up", origin="operator"))
    assert gate_store.flush_observers()
    named = spans_by_name(exporter.get_finished_spans())
    decisions = [d.attributes for d in sorted(named[DECISION], key=_step)]
    assert [d["signoff.verdict"] for d in decisions] == ["denied", "allowed", "ended"]
    assert [d.get("signoff.decision.origin") for d in decisions] == [None, "plan", "operator"]
    (tool,) = named["signoff.tool_call"]
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.attributes["signoff.tool.status"] == "failed"
    steps = sorted(named["signoff.step"], key=_step)
    assert [s.attributes["signoff.step.status"] for s in steps[:2]] == ["failed", "failed"]
    (run,) = named["signoff.run"]
    assert run.status.status_code == StatusCode.ERROR and run.status.description
    assert run.attributes["signoff.run.status"] == "FAILED"


@pytest.mark.guarantee("G-TRACE-1")
def test_model_calls_are_spans_answered_lost_unanswered_and_refused(gate_store: Store) -> None:
    """A step's model calls (core/model_calls.py) are ``signoff.model_call`` spans under their
    step: tokens, cost and usage when answered; lost and refused as errors; one the run's end
    leaves open says it was unanswered (charged at its projection). No prompt is sent."""
    exporter = InMemorySpanExporter()
    prices = Prices.from_mapping({"p/m": {"input_per_mtok": "1", "output_per_mtok": "2"}})
    tools = [counter_tool("read", SideEffect.READ_ONLY, Calls())]
    gate = make_gate(gate_store, tools, anchor=None, model=ModelConfig(prices),
                     observers=[SpanObserver(gate_store, exporter)])  # fmt: skip
    session = gate.begin("run-1", "read", Limits(max_tokens=300))
    step = session.step()
    caller = step.model()
    assert caller is not None
    caller.begin("p", "m", prompt="a secret prompt", max_output_tokens=10).answered(
        response_text="ok", tokens_in=4, tokens_out=3
    )
    caller.begin("p", "m", prompt="again", max_output_tokens=10).lost("timed out")
    caller.begin("p", "m", prompt="once more", max_output_tokens=10)  # never answered
    step.propose(Decision.tool_call("read", {"n": 1}))
    asyncio.run(step.execute())
    with pytest.raises(ModelLimitReached):
        session.step().model().begin("p", "m", prompt="big", max_output_tokens=500)  # type: ignore[union-attr]
    assert gate_store.flush_observers()
    named = spans_by_name(exporter.get_finished_spans())
    calls = {c.attributes["signoff.model.attempt"]: c for c in named["signoff.model_call"]}
    said = {
        n: (c.attributes["signoff.model.status"], c.status.status_code) for n, c in calls.items()
    }
    assert said == {1: ("answered", StatusCode.UNSET), 2: ("lost", StatusCode.ERROR),
                    3: ("unanswered", StatusCode.UNSET),
                    4: ("refused", StatusCode.ERROR)}  # fmt: skip
    first = calls[1].attributes
    assert (first["signoff.model.tokens_in"], first["signoff.model.tokens_out"]) == (4, 3)
    assert first["signoff.model.cost"] == "0.00001" and first["signoff.model.usage"] == "reported"
    assert calls[4].attributes["signoff.model.reason"] == "limit_tokens"
    steps = {s.attributes["signoff.step.index"]: s.context.span_id for s in named["signoff.step"]}
    assert {c.parent.span_id for n, c in calls.items() if n < 4} == {steps[0]}  # type: ignore[union-attr]
    everything = repr([dict(span.attributes or {}) for span in exporter.get_finished_spans()])
    assert "secret prompt" not in everything


class ShowingPolicy(DefaultPolicy):
    """The default policy, whose approvals give the arguments as their reason: the text the
    operator is shown."""

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        decision = super().evaluate(request)
        if decision.outcome is not Outcome.APPROVE:
            return decision
        return dataclasses.replace(decision, reason=f"sends {json.dumps(request.value())}")


def text_tool(name: str, side_effect: SideEffect, run: Any) -> Tool:
    schema = {"type": "object", "properties": {"q": {"type": "string"}},
              "additionalProperties": False}  # fmt: skip
    return Tool(name, f"{name} something", schema, side_effect, run)


def runs_holding_secrets(store: Store, receiver: Receiver) -> dict[str, str]:
    """Three runs through the gate, sent live to ``receiver``, each holding markers where
    content goes: the goal, arguments, results (text and JSON), a tool's error that echoes its
    arguments, a decision's rationale, a made-up tool whose name holds arguments, an unknown
    origin, the reasons an approval was shown and decided with, a model's prompt, answer and
    loss, the run's result and its failure; one run completes, one fails, one is rejected.
    The markers, by name."""
    secret = {name: secrets.token_hex(16) for name in (
        "goal", "look-arguments", "look-result", "send-arguments", "send-result",
        "broken-arguments", "rationale", "tool-name-arguments", "origin", "operator-reason",
        "prompt", "answer", "lost", "run-result", "failed-goal", "failure", "rejected-goal",
        "rejected-arguments", "rejection",
    )}  # fmt: skip

    def broken(args: dict[str, Any]) -> Any:
        raise RuntimeError(f"cannot look up {json.dumps(args)}")

    tools = [
        text_tool("look", SideEffect.READ_ONLY, lambda args: f"found {secret['look-result']}"),
        text_tool("send", SideEffect.REMOTE_MUTATION, lambda args: {"sent": secret["send-result"]}),
        text_tool("broken", SideEffect.READ_ONLY, broken),
    ]
    prices = Prices.from_mapping({"p/m": {"input_per_mtok": "1", "output_per_mtok": "2"}})
    gate = make_gate(store, tools, anchor=None, policy=ShowingPolicy(), model=ModelConfig(prices),
                     observers=[SpanObserver(store, otlp(receiver.url))])  # fmt: skip
    lenient = Limits(max_consecutive_failures=None)

    session = gate.begin("run-1", secret["goal"], lenient)
    step = session.step()
    step.propose(Decision.tool_call("look", {"q": secret["look-arguments"]}, secret["rationale"],
                                    origin="model"))  # fmt: skip
    assert asyncio.run(step.execute()).ok
    verdict = session.step().propose(Decision.tool_call("send", {"q": secret["send-arguments"]}))
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval
    approve(store, "run-1", verdict.approval.id, by="op", reason=secret["operator-reason"],
            expected_hash=verdict.approval.request_hash)  # fmt: skip
    session, _ = gate.attach("run-1")
    assert asyncio.run(session.current().execute()).ok
    step = session.step()
    step.propose(Decision.tool_call("broken", {"q": secret["broken-arguments"]}))
    assert secret["broken-arguments"] in (asyncio.run(step.execute()).error or "")
    made_up = f'look {{"q": "{secret["tool-name-arguments"]}"}}'  # the arguments in the name
    assert session.step().propose(Decision.tool_call(made_up, {})).outcome == VerdictOutcome.DENIED
    unknown = Decision.tool_call("look", {"q": "x"}, origin=secret["origin"])
    assert session.step().propose(unknown).outcome == VerdictOutcome.DENIED
    step = session.step()
    caller = step.model()
    assert caller is not None
    caller.begin("p", "m", prompt=secret["prompt"], max_output_tokens=10).answered(
        response_text=secret["answer"], tokens_in=4, tokens_out=3
    )
    caller.begin("p", "m", prompt="again", max_output_tokens=10).lost(secret["lost"])
    step.propose(Decision.complete(json.dumps({"answer": secret["run-result"]})))

    session = gate.begin("run-2", secret["failed-goal"])
    session.step().propose(Decision.fail(secret["failure"], origin="model"))

    session = gate.begin("run-3", secret["rejected-goal"])
    verdict = session.step().propose(
        Decision.tool_call("send", {"q": secret["rejected-arguments"]})
    )
    assert verdict.approval
    reject(store, "run-3", verdict.approval.id, by="op", reason=secret["rejection"],
           expected_hash=verdict.approval.request_hash)  # fmt: skip
    assert store.flush_observers()
    return secret


@pytest.mark.guarantee("G-TRACE-1")
def test_no_span_of_a_gated_run_carries_its_content_in_any_spelling(gate_store: Store) -> None:
    """Every text of every span sent, live and by a later export (names, attributes, event
    names and attributes, status descriptions, the resource and the scope), and the bytes sent,
    hold no marker seeded where a run's content goes: whole, in part, in another case, in hex
    or base64 (tests/otlp_receiver.py ``spellings``). The record holds them all."""
    with receiving() as live, receiving() as exported:
        secret = runs_holding_secrets(gate_store, live)
        expected = stored_spans(gate_store)
        received = live.wait_for(len(expected))
        assert export_stored(gate_store, otlp(exported.url)) == len(expected)
        for receiver in (live, exported):
            assert carried(receiver, secret) == []
    with gate_store.snapshot() as conn:
        record = "".join(p for (p,) in conn.execute("SELECT payload FROM events"))
    held = {name for name, value in secret.items() if value in record}
    assert held >= set(secret) - {"prompt", "answer", "lost"}  # the fold had them at hand
    # What the spans do say: each kind of span, the tools by name, the errors by status.
    assert len(received) == len(expected)
    assert {s.name for s in received} == {"signoff.run", "signoff.step", "signoff.decision",
                                          "signoff.approval", "signoff.tool_call",
                                          "signoff.model_call"}  # fmt: skip
    decided = [s.attributes for s in received if s.name == DECISION]
    # The made-up tool and the invalid decision name none, nor do the run's endings.
    tools = sorted(str(d.get("signoff.decision.tool")) for d in decided)
    assert tools == ["None"] * 4 + ["broken", "look", "send", "send"]
    failed = {s.status_message for s in received if s.status == 2}
    assert failed == {"failed", "lost", "FAILED: agent_failed", "CANCELLED: rejected"}
    # A value that is sent is found: the search looks where the spans' values are.
    sent = [
        s.attributes["signoff.tool.call_hash"] for s in received if s.name == "signoff.tool_call"
    ]
    assert carried(live, {"a call hash": sent[0][5:40]})


def _step(span: ReadableSpan) -> int:
    return int(str((span.attributes or {})["signoff.step.index"]))


def test_a_run_paused_in_one_process_and_resumed_in_another_is_one_trace(home: Path) -> None:
    path = home / "signoff.db"
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    clock = FakeClock()
    with Store.open(path) as store:  # the process that began the run and paused
        observer = SpanObserver(store, first)
        gate = make_gate(store, standard_tools(Calls()), anchor=None, observers=[observer],
                         clock=clock)  # fmt: skip
        session = gate.begin("run-1", "publish")
        step = session.step()
        verdict = step.propose(Decision.tool_call("push", {"n": 2}, origin="model"))
        assert verdict.approval
        session.close()
        assert store.flush_observers()
    with Store.open(path) as operator:  # the operator's process: no telemetry
        approve(operator, "run-1", verdict.approval.id, by="op", reason="ok",
                expected_hash=verdict.approval.request_hash)  # fmt: skip
    with Store.open(path) as store:  # another process resumes it
        observer = SpanObserver(store, second)
        gate = make_gate(store, standard_tools(Calls()), anchor=None, observers=[observer],
                         clock=clock)  # fmt: skip
        session, _ = gate.attach("run-1")
        asyncio.run(session.current().execute())
        session.step().propose(Decision.complete())
        assert store.flush_observers()
        everything = sorted(_key(readable(s)) for s in stored_spans(store))
    before, after = first.get_finished_spans(), second.get_finished_spans()
    assert [s.name for s in before] == ["signoff.decision"]  # settled: pending
    assert {s.context.trace_id for s in (*before, *after)} == {trace_id(store.database_id, "run-1")}
    # Every span exactly once between the two processes, the approval sent by the resumer,
    # and the run's span starting where the first process began it.
    assert sorted(_key(s) for s in (*before, *after)) == everything
    (run,) = spans_by_name(after)["signoff.run"]
    assert run.start_time == min(s.start_time or 0 for s in (*before, *after))


def test_an_observer_is_told_after_the_commit_and_never_of_a_rollback(store: Store) -> None:
    told: list[tuple[list[str], int]] = []

    def observer(events: Sequence[Committed]) -> None:
        # Another connection already sees what it is told of: it was committed.
        with sqlite3.connect(store.path) as other:
            (count,) = other.execute("SELECT count(*) FROM events").fetchone()
        told.append(([e.kind for e in events], count))

    store.observe(observer)

    def start(then: Exception | None = None) -> None:
        with store.transaction() as tx:
            transitions.start_run(tx, run_id="r", goal="g", limits=Limits(), owner="o",
                                  expires=0.0, at="2026-11-30T09:00:00.000000Z")  # fmt: skip
            if then:
                raise then

    with pytest.raises(RuntimeError):
        start(RuntimeError("rolled back"))
    assert store.flush_observers() and told == []
    start()
    assert store.flush_observers()
    assert told == [(["run.started"], 1)]


def test_an_observer_that_raises_changes_nothing_in_the_run(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # One database copied twice: the same id and genesis, so the two records can be compared
    # byte for byte.
    with Store.open(home / "base.db"):
        pass
    for name in ("quiet.db", "raising.db"):
        shutil.copy(home / "base.db", home / name)
    calls = 0

    def broken(events: Sequence[Committed]) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("the observer is broken")

    records = {}
    for name, observers in (("quiet.db", []), ("raising.db", [broken])):
        with Store.open(home / name) as store, caplog.at_level(logging.ERROR):
            run_with_an_approval(store, observers=observers, clock=FakeClock())
            assert store.flush_observers()
            conn = store._conn
            records[name] = [
                conn.execute("SELECT * FROM events ORDER BY seq").fetchall(),
                conn.execute("SELECT * FROM steps ORDER BY run_id, idx").fetchall(),
                conn.execute("SELECT * FROM approvals ORDER BY id").fetchall(),
                conn.execute("SELECT id, status, end_reason, result FROM runs").fetchall(),
            ]
    assert calls > 5
    assert records["quiet.db"] == records["raising.db"]
    logged = [r for r in caplog.records if "the observer is broken" in r.getMessage()]
    assert len(logged) == 1 and "broken" in logged[0].getMessage()


def test_an_unreachable_endpoint_does_not_fail_a_live_run(gate_store: Store) -> None:
    from core.telemetry import otlp

    observer = SpanObserver(gate_store, otlp("http://127.0.0.1:9/v1/traces", timeout=0.5))
    run_with_an_approval(gate_store, observers=[observer])
    run = gate_store._conn.execute("SELECT status FROM runs WHERE id = 'run-1'").fetchone()
    assert run == ("COMPLETED",)


def _key(span: ReadableSpan) -> tuple[Any, ...]:
    parent = span.parent.span_id if span.parent else None
    return (span.name, span.context.trace_id, span.context.span_id, parent,
            span.start_time, span.end_time, tuple(sorted(dict(span.attributes or {}).items())),
            span.status.status_code == StatusCode.ERROR)  # fmt: skip


def test_an_observer_that_blocks_delays_no_commit_and_runs_on_a_thread_of_its_own(
    gate_store: Store,
) -> None:
    entered, release, left = threading.Event(), threading.Event(), threading.Event()
    threads: set[threading.Thread] = set()

    def blocked(events: Sequence[Committed]) -> None:
        threads.add(threading.current_thread())
        if not entered.is_set():  # held on the first commit; were it called inline, the run
            entered.set()  # would wait here too, and find ``left`` set when it ends
            release.wait(10)
            left.set()

    run_with_an_approval(gate_store, observers=[blocked])
    # The run ended while the observer was still held on the first commit it was told of.
    assert entered.is_set() and not left.is_set()
    release.set()
    assert gate_store.flush_observers()
    assert threading.current_thread() not in threads and len(threads) == 1


def test_an_observer_left_behind_loses_events_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    relay = Relay(lambda events: release.wait(60), size=2)
    row = (1, "r", None, "run.started", "{}", "2026-11-30T09:00:00.000000Z", "h")
    with caplog.at_level(logging.ERROR):
        for _ in range(6):
            relay.tell([row])
    release.set()
    assert relay.flush(10)
    assert 3 <= relay.dropped <= 4  # two queued, one perhaps taken already, the rest dropped
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1
    relay.stop()


def test_a_run_paused_twice_across_three_processes_sends_each_span_once(home: Path) -> None:
    path, clock = home / "signoff.db", FakeClock()
    exporters = [InMemorySpanExporter() for _ in range(3)]

    def process(n: int, new_id: str) -> Any:
        store = Store.open(path)
        observers = [SpanObserver(store, exporters[n])]
        gate = make_gate(store, standard_tools(Calls()), anchor=None, observers=observers,
                         clock=clock, new_id=lambda: new_id)  # fmt: skip
        return store, gate

    def operator_approves(verdict: Any) -> None:
        with Store.open(path) as operator:
            approve(operator, "run-1", verdict.approval.id, by="op",
                    expected_hash=verdict.approval.request_hash)  # fmt: skip

    store, gate = process(0, "ap-a")
    session = gate.begin("run-1", "publish twice")
    verdict = session.step().propose(Decision.tool_call("push", {"n": 1}))
    session.close()
    assert store.flush_observers()
    store.close()
    operator_approves(verdict)
    store, gate = process(1, "ap-b")
    session, _ = gate.attach("run-1")
    asyncio.run(session.current().execute())
    verdict = session.step().propose(Decision.tool_call("push", {"n": 2}))
    session.close()
    assert store.flush_observers()
    store.close()
    operator_approves(verdict)
    store, gate = process(2, "ap-c")
    session, _ = gate.attach("run-1")
    asyncio.run(session.current().execute())
    session.step().propose(Decision.complete())
    assert store.flush_observers()
    everything = sorted(_key(readable(s)) for s in stored_spans(store))
    store.close()
    sent = [_key(s) for exporter in exporters for s in exporter.get_finished_spans()]
    assert sorted(sent) == everything  # each once: the second resumer re-sends no approval
    assert [s[0] for s in sent].count("signoff.approval") == 2
