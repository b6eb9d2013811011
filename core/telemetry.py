"""OpenTelemetry: the record's spans (core/spans.py) sent live by an observer, or from the store.

Imported only where telemetry is configured (a library user's ``SpanObserver``, the proxy's
``[telemetry] otlp``, ``signoff export --otlp``): nothing else pays for loading the SDK.

Rules:

1. ``SpanObserver`` is an observer (core/observe.py): on its own thread, fed by a bounded
   queue, it folds each commit's events into spans and sends those that ended. A slow or
   unreachable endpoint delays no commit and no call: the exporter gives up after its timeout,
   a failed export is logged once and its spans dropped, and a queue left full meanwhile drops
   events (core/observe.py rule 3). ``Store.flush_observers(wait)`` gives it ``wait`` seconds
   to send what is queued; what is still queued when the process exits, and spans not yet
   ended (a run still waiting), are lost to the live copy and are in the record, which
   ``signoff export --otlp`` sends again with the same ids.
2. A run whose earlier events this process did not see (resumed after a pause, taken over) is
   read back from the store, on the observer's thread with a read-only connection of its own,
   so that its spans open where they opened. Of the spans those earlier events ended, only
   approvals are sent: the operator decides in another process (the app, the terminal), which
   sends none; every other span was ended by a gate, which sent it if it exports.
3. ``export_stored`` sends every ended span of the stored runs (``signoff export --otlp``), and
   raises ``TelemetryFailed`` naming the exporter's error when the endpoint does not take them.
4. An export is given up after its timeout and a grace (``Bounded``): the OTLP exporter's own
   timeout bounds each read of the answer, not the whole of it, so an endpoint answering a
   byte at a time would hold ``signoff export --otlp``, or the live observer, for as long as it
   likes. The request given up is left to end on a thread of its own; while it has not, the
   next export is refused rather than a second request stuck beside it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from core.errors import SignoffError, TelemetryFailed, UnknownRun
from core.observe import Committed
from core.spans import SPAN_KINDS, RunSpans, SpanRecord
from core.store import Store

log = logging.getLogger(__name__)

RESOURCE = Resource.create({"service.name": "signoff"})
SCOPE = InstrumentationScope("signoff")
EXPORT_TIMEOUT = 5.0  # seconds an OTLP request may take, retries included
BATCH = 512  # spans per request


GRACE = 2.0  # seconds past its timeout before an export is given up (rule 4)


def otlp(url: str, timeout: float = EXPORT_TIMEOUT) -> Bounded:
    """An OTLP/HTTP (protobuf) exporter to ``url``, e.g. ``http://127.0.0.1:4318/v1/traces``,
    given up ``GRACE`` seconds past its timeout (rule 4)."""
    return Bounded(OTLPSpanExporter(endpoint=url, timeout=timeout), timeout + GRACE)


class Bounded(SpanExporter):
    """An exporter whose ``export`` returns within ``wait`` seconds, or raises
    ``TelemetryFailed`` (rule 4)."""

    def __init__(self, exporter: SpanExporter, wait: float) -> None:
        self.exporter = exporter
        self.wait = wait
        self._stuck: threading.Thread | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stuck is not None and self._stuck.is_alive():
            raise TelemetryFailed("the endpoint has not yet answered an export given up")
        outcome: list[SpanExportResult | Exception] = []

        def send() -> None:
            try:
                outcome.append(self.exporter.export(spans))
            except Exception as e:
                outcome.append(e)

        thread = threading.Thread(target=send, name="signoff-otlp-export", daemon=True)
        thread.start()
        thread.join(self.wait)
        if not outcome:
            self._stuck = thread
            raise TelemetryFailed(f"the endpoint did not answer within {self.wait:g} seconds")
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    def shutdown(self) -> None:
        self.exporter.shutdown()


def readable(span: SpanRecord) -> ReadableSpan:
    """The SDK's span for a span of the record, with its derived ids (core/spans.py rule 2)."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent = None
    if span.parent_id is not None:
        parent = SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=flags)
    status = Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.UNSET)
    return ReadableSpan(
        name=span.name,
        context=SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=flags),
        parent=parent,
        resource=RESOURCE,
        attributes=span.attributes,
        kind=SpanKind.INTERNAL,
        status=status,
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=SCOPE,
    )


# --- from the store ---------------------------------------------------------------------------


def stored_spans(store: Store, run_ids: Sequence[str] | None = None) -> list[SpanRecord]:
    """Every ended span of the runs (all, or ``run_ids``), read in one snapshot."""
    spans: list[SpanRecord] = []
    with store.snapshot() as conn:
        if run_ids is None:
            run_ids = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY created_at, rowid")]
        for run_id in run_ids:
            rows = conn.execute(
                "SELECT seq, run_id, step_idx, kind, payload, at, hash FROM events"
                " WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
            spans += RunSpans(store.database_id, run_id).feed_all(Committed(*r) for r in rows)
    return spans


def export_stored(
    store: Store, exporter: SpanExporter, run_ids: Sequence[str] | None = None
) -> int:
    """Send the stored runs' spans; return how many. ``TelemetryFailed`` when one batch is
    refused or cannot be sent (rule 3)."""
    spans = [readable(s) for s in stored_spans(store, run_ids)]
    for start in range(0, len(spans), BATCH):
        with _exporter_errors() as errors:
            result = exporter.export(spans[start : start + BATCH])
        if result is not SpanExportResult.SUCCESS:
            # The first error names the cause (refused, not found); the last, how it ended.
            why = "; ".join(dict.fromkeys(errors[:1] + errors[-1:]))
            why = why or "the exporter reported a failure"
            raise TelemetryFailed(f"the spans were not taken: {why}")
    return len(spans)


@contextmanager
def _exporter_errors() -> Iterator[list[str]]:
    """What the OTLP exporter logged while exporting: it reports its errors only there."""
    messages: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    handler = Catch(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


# --- live ---------------------------------------------------------------------------------------


class SpanObserver:
    """An observer sending the spans of what ``store`` commits, as they end (rule 1). It is
    called on its own thread (core/observe.py rule 3), and sends from there."""

    def __init__(self, store: Store, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self._database = store.database_id
        self._path = store.path
        self._runs: dict[str, RunSpans] = {}
        self._logged: set[str] = set()

    def __call__(self, events: Sequence[Committed]) -> None:
        spans = self._fold(events)
        if spans:
            self._send(spans)

    def _fold(self, events: Sequence[Committed]) -> list[SpanRecord]:
        spans: list[SpanRecord] = []
        for event in events:
            if event.run_id is None or event.kind not in SPAN_KINDS:
                continue  # no span starts or ends with it: no need to read the run back
            try:
                spans += self._run(event).feed(event)
            except Exception as e:  # a copy: a fold that fails loses spans, never the record
                self._once(f"fold {type(e).__name__}", f"telemetry could not fold an event: {e}")
            if event.kind == "run.ended":
                self._runs.pop(event.run_id, None)
        return spans

    def _run(self, event: Committed) -> RunSpans:
        run_id = str(event.run_id)
        spans = self._runs.get(run_id)
        if spans is None:
            spans = self._runs[run_id] = RunSpans(self._database, run_id)
            if event.kind != "run.started":
                self._backfill(spans, run_id, event.seq)
        return spans

    def _backfill(self, spans: RunSpans, run_id: str, before: int) -> None:
        """Rule 2: the run's earlier events, from the store. The approvals sent are those
        decided since a gate last wrote: the trailing decisions, which no gate has seen."""
        with (
            Store.open(Path(self._path), create=False, readonly=True) as reader,
            reader.snapshot() as conn,
        ):
            rows = conn.execute(
                "SELECT seq, run_id, step_idx, kind, payload, at, hash FROM events"
                " WHERE run_id = ? AND seq < ? ORDER BY seq",
                (run_id, before),
            ).fetchall()
        decided: list[SpanRecord] = []
        for row in rows:
            event = Committed(*row)
            ended = spans.feed(event)
            if event.kind != "approval.decided":
                decided = []  # a gate wrote after: it saw those decisions
            decided += [span for span in ended if span.name == "signoff.approval"]
        if decided:
            self._send(decided)

    def _send(self, spans: list[SpanRecord]) -> None:
        try:
            result = self.exporter.export([readable(s) for s in spans])
        except Exception as e:
            self._once(f"export {type(e).__name__}", f"telemetry export raised: {e}")
            return
        if result is not SpanExportResult.SUCCESS:
            self._once("export failed", f"telemetry export failed; {len(spans)} spans lost")

    def _once(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning("%s (logged once)", message)


def export_command(args: Any, say: Callable[[Any, dict[str, object], str], None]) -> int:
    """``signoff export --otlp URL [--run ID]...``: exit 0 when the endpoint took every span,
    2 when it did not, or a run is unknown, or the database cannot be read."""
    from core import paths
    from core.proxy.telemetry import valid_url

    try:
        if args.out is not None:
            raise TelemetryFailed("--otlp sends the spans away; it writes no --out file")
        if not valid_url(args.otlp):
            raise TelemetryFailed(f"{args.otlp!r} is not an http:// or https:// URL")
        with Store.open(paths.database_path(), create=False, readonly=True) as store:
            runs = list(dict.fromkeys(args.runs)) if args.runs else None  # each run once
            if runs:
                _known_runs(store, runs)
            sent = export_stored(store, otlp(args.otlp), runs)
    except (SignoffError, OSError) as e:
        message = f"cannot export: {e} [{type(e).__name__}]"
        say(args, {"ok": False, "error": type(e).__name__, "message": str(e)}, message)
        return 2
    say(args, {"ok": True, "spans": sent}, f"sent {sent} spans to {args.otlp}")
    return 0


def _known_runs(store: Store, run_ids: Sequence[str]) -> None:
    with store.snapshot() as conn:
        for run_id in run_ids:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise UnknownRun(f"there is no run {run_id}")
