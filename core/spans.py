"""A run's spans, folded from its committed events: the one mapping from the record to traces.

No OpenTelemetry here (core/telemetry.py turns these into its spans, imported only when
telemetry is configured). Live export and ``signoff export --otlp`` fold the same events with
this module, so they make the same spans.

Rules:

1. Six kinds of span, each opened and closed by events of the run:
   ``signoff.run`` (run.started to run.ended), ``signoff.step`` (step.started to step.observed
   or step.interrupted), ``signoff.decision`` (step.decided to the event that settles it: the
   tool's start, an approval asked, the step's observation), ``signoff.approval``
   (approval.requested to approval.decided or approval.closed) and ``signoff.tool_call``
   (step.tool_started to step.observed or step.interrupted), and ``signoff.model_call``
   (model.started to model.answered or model.lost; model.refused is a span of no length, an
   error: core/model_record.py). A run's end closes whatever of it
   is still open. A span still open (a run waiting on an approval) is not made yet: spans are
   made when they end, whichever process commits their end.
2. Ids are derived, not random: the trace id from the database id and the run id, each span id
   from the trace and the span's own name (the step index, the approval id, the tool start's
   sequence number). A run paused in one process and resumed in another, and the same run
   exported later from the store, make one trace of the same spans.
3. Attributes, all prefixed ``signoff.``: the run, step and approval ids, the decision's kind,
   tool and origin (``signoff.decision.origin``, only when the decision names one; seed 002's
   ``agentrt.decision.origin``), the policy's answer, the verdict (``allowed``, ``pending``,
   ``denied``, ``ended``), the side-effect class, the call hash, statuses and end reasons; a
   model call's provider, model, attempt, projection, tokens, cost and whether its usage was
   reported or counted (an attempt the run's end leaves open says ``unanswered``: charged at
   its projection). Never a tool's arguments, result or error, a prompt or an answer, a run's
   goal or result, a decision's rationale or a reason given with an approval (G-TRACE-1): a
   copy sent away carries no more than it needs. A decision is recorded verbatim, so of its
   own fields only words known here are taken: its kind and origin when they are among the
   known ones, and its tool only once the policy was asked about it (a tool the gate holds);
   an invalid decision's fields are whatever its proposer wrote (a model that wrote the
   arguments into the tool's name). Statuses and reasons are Signoff's own words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from core.decisions import ORIGINS, Kind
from core.observe import Committed

Attributes = dict[str, str | int | bool]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
KINDS = frozenset(kind.value for kind in Kind)
# The events that start, change or end a span; a run's other events make none.
SPAN_KINDS = frozenset({
    "run.started", "run.ended", "step.started", "step.decided", "step.policy",
    "approval.requested", "approval.decided", "approval.closed", "step.tool_started",
    "step.observed", "step.interrupted", "model.started", "model.refused", "model.answered",
    "model.lost",
})  # fmt: skip


@dataclass(frozen=True)
class SpanRecord:
    name: str
    trace_id: int  # 128 bits
    span_id: int  # 64 bits
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: Attributes
    error: str | None = None  # the span's outcome was an error, and why


def trace_id(database: str, run_id: str) -> int:
    digest = hashlib.sha256(f"signoff trace\0{database}\0{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1


def span_id(trace: int, *name: object) -> int:
    text = "\0".join(str(part) for part in name)
    digest = hashlib.sha256(f"signoff span\0{trace:032x}\0{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def nanoseconds(at: str) -> int:
    moment = datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass
class _Open:
    name: str
    span_id: int
    parent_id: int | None
    start_ns: int
    attributes: Attributes = field(default_factory=dict)


class RunSpans:
    """The spans of one run, fed its events in order; ``feed`` answers the spans they ended."""

    def __init__(self, database: str, run_id: str) -> None:
        self.run_id = run_id
        self.trace_id = trace_id(database, run_id)
        self._open: dict[tuple[object, ...], _Open] = {}
        self._side_effect: dict[int, str] = {}  # the class the policy was asked about, by step

    def feed_all(self, events: Iterable[Committed]) -> list[SpanRecord]:
        return [span for event in events for span in self.feed(event)]

    def feed(self, event: Committed) -> list[SpanRecord]:
        at, kind, step = nanoseconds(event.at), event.kind, event.step
        if kind not in SPAN_KINDS:
            return []
        payload: Any = event.payload()
        if not isinstance(payload, dict):
            return []
        ended: list[SpanRecord] = []
        if kind == "run.started":
            attrs: Attributes = {}
            call = payload.get("call")
            if isinstance(call, dict):
                attrs |= _strings(call, server="signoff.call.server", tool="signoff.call.tool")
                host = call.get("host")
                if isinstance(host, dict) and isinstance(host.get("id"), str):
                    attrs["signoff.call.host"] = host["id"]
            self._start(("run",), "signoff.run", None, at, attrs)
        elif kind == "run.ended":
            for key in [k for k in self._open if k != ("run",)][::-1]:  # innermost first
                verdict: Attributes = {"signoff.verdict": "ended"} if key[0] == "decision" else {}
                if key[0] == "model":
                    verdict = {"signoff.model.status": "unanswered"}
                ended += self._end(key, at, verdict)
            status = str(payload.get("status", ""))
            reason = str(payload.get("reason", ""))
            error = None if status == "COMPLETED" else f"{status}: {reason}"
            attrs = {"signoff.run.status": status, "signoff.run.end_reason": reason}
            ended += self._end(("run",), at, attrs, error)
        elif step is None:
            return []
        elif kind == "step.started":
            self._start(("step", step), "signoff.step", self._id("run"), at, {}, step)
        elif kind == "step.decided":
            decision = payload.get("decision")
            attrs = _known(decision if isinstance(decision, dict) else {})
            self._child(("decision", step), "signoff.decision", at, attrs, step)
        elif kind == "step.policy":
            ended += self._policy(step, payload)
        elif kind == "approval.requested":
            ended += self._settle(step, at, "pending")
            attrs = _strings(payload, approval="signoff.approval.id", kind="signoff.approval.kind",
                             hash="signoff.approval.request_hash")  # fmt: skip
            approval = ("approval", payload.get("approval"))
            self._child(approval, "signoff.approval", at, attrs, step)
        elif kind in ("approval.decided", "approval.closed"):
            attrs = _strings(payload, status="signoff.approval.status", by="signoff.approval.by")
            ended += self._end(("approval", payload.get("approval")), at, attrs)
        elif kind == "step.tool_started":
            ended += self._settle(step, at, "allowed")
            request = payload.get("request")
            attrs = _strings(request if isinstance(request, dict) else {}, tool="signoff.tool.name")
            attrs |= _strings(payload, request_hash="signoff.tool.call_hash",
                              approval="signoff.approval.id")  # fmt: skip
            if step in self._side_effect:
                attrs["signoff.tool.side_effect"] = self._side_effect[step]
            self._child(("tool", step), "signoff.tool_call", at, attrs, step)
            self._open[("tool", step)].span_id = span_id(self.trace_id, "tool", step, event.seq)
        elif kind.startswith("model."):
            ended += self._model(kind, step, at, payload)
        elif kind in ("step.observed", "step.interrupted"):
            status = str(payload.get("status", "interrupted"))
            error = status if status == "failed" else None
            ended += self._end(("tool", step), at, {"signoff.tool.status": status}, error)
            decision = self._open.get(("decision", step))
            ending = decision and decision.attributes.get("signoff.decision.kind") != "tool_call"
            ended += self._settle(step, at, "ended" if ending else "denied")
            ended += self._end(("step", step), at, {"signoff.step.status": status}, error)
        return ended

    # --- internals ----------------------------------------------------------------------

    def _id(self, *name: object) -> int:
        return span_id(self.trace_id, *name)

    def _start(
        self,
        key: tuple[object, ...],
        name: str,
        parent: int | None,
        at: int,
        attrs: Attributes,
        step: int | None = None,
    ) -> None:
        attrs = {"signoff.run.id": self.run_id, **attrs}
        if step is not None:
            attrs["signoff.step.index"] = step
        self._open[key] = _Open(name, self._id(*key), parent, at, attrs)

    def _child(
        self, key: tuple[object, ...], name: str, at: int, attrs: Attributes, step: int
    ) -> None:
        self._start(key, name, self._id("step", step), at, attrs, step)

    def _end(
        self,
        key: tuple[object, ...],
        at: int,
        attrs: Attributes | None = None,
        error: str | None = None,
    ) -> list[SpanRecord]:
        span = self._open.pop(key, None)
        if span is None:
            return []
        attributes = span.attributes | (attrs or {})
        return [SpanRecord(span.name, self.trace_id, span.span_id, span.parent_id,
                           span.start_ns, max(at, span.start_ns), attributes, error)]  # fmt: skip

    def _settle(self, step: int, at: int, verdict: str) -> list[SpanRecord]:
        """The step's decision is settled: its verdict is known."""
        return self._end(("decision", step), at, {"signoff.verdict": verdict})

    def _model(self, kind: str, step: int, at: int, payload: dict[str, Any]) -> list[SpanRecord]:
        """A model call: begun (or refused by projection), then answered or lost."""
        key = ("model", payload.get("attempt"))
        if kind in ("model.started", "model.refused"):
            attrs = _strings(payload, provider="signoff.model.provider",
                             model="signoff.model.model",
                             projected_cost="signoff.model.projected_cost")  # fmt: skip
            attrs |= _numbers(payload, attempt="signoff.model.attempt",
                              projected_tokens="signoff.model.projected_tokens")  # fmt: skip
            self._child(key, "signoff.model_call", at, attrs, step)
            if kind == "model.refused":
                reason = str(payload.get("reason", ""))
                return self._end(key, at, {"signoff.model.status": "refused",
                                           "signoff.model.reason": reason}, reason)  # fmt: skip
            return []
        if kind == "model.lost":
            return self._end(key, at, {"signoff.model.status": "lost"}, "lost")
        attrs = {"signoff.model.status": "answered"}
        attrs |= _strings(payload, cost="signoff.model.cost", usage="signoff.model.usage")
        attrs |= _numbers(payload, tokens_in="signoff.model.tokens_in",
                          tokens_out="signoff.model.tokens_out")  # fmt: skip
        return self._end(key, at, attrs)

    def _policy(self, step: int, payload: dict[str, Any]) -> list[SpanRecord]:
        request, answer = payload.get("request"), payload.get("decision")
        if isinstance(request, dict) and isinstance(request.get("side_effect"), str):
            self._side_effect[step] = request["side_effect"]
        decision = self._open.get(("decision", step))
        if decision is not None and isinstance(request, dict):
            # A tool the gate holds: only such a call reaches the policy (rule 3).
            decision.attributes |= _strings(request, tool="signoff.decision.tool")
        if decision is not None and isinstance(answer, dict):
            decision.attributes |= _strings(answer, outcome="signoff.policy.outcome",
                                            kind="signoff.policy.kind")  # fmt: skip
            if step in self._side_effect:
                decision.attributes["signoff.tool.side_effect"] = self._side_effect[step]
        return []


def _known(decision: dict[str, Any]) -> Attributes:
    """A decision's kind and origin when they are among the known words (rule 3): the decision
    is recorded verbatim (core/decisions.py rule 1), so an invalid one's fields are whatever
    its proposer wrote, the call's arguments or the run's goal included."""
    attrs: Attributes = {}
    if decision.get("kind") in KINDS:
        attrs["signoff.decision.kind"] = decision["kind"]
    if decision.get("origin") in ORIGINS:
        attrs["signoff.decision.origin"] = decision["origin"]
    return attrs


def _strings(source: dict[str, Any], **names: str) -> Attributes:
    """``source``'s non-empty text fields, under the attribute names given."""
    return {
        attribute: source[key]
        for key, attribute in names.items()
        if isinstance(source.get(key), str) and source[key]
    }


def _numbers(source: dict[str, Any], **names: str) -> Attributes:
    """``source``'s integer fields, under the attribute names given."""
    return {
        attribute: source[key]
        for key, attribute in names.items()
        if isinstance(source.get(key), int) and not isinstance(source.get(key), bool)
    }
