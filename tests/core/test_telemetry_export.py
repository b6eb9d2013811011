"""``signoff export --otlp URL``: the stored runs' spans, over OTLP/HTTP, as a real command."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from core.errors import TelemetryFailed
from core.spans import trace_id
from core.store import Store
from core.telemetry import export_stored, otlp, stored_spans
from tests.conftest import run_signoff
from tests.core.test_telemetry import run_with_an_approval
from tests.otlp_receiver import receiving, trickling


def test_export_otlp_sends_every_ended_span_of_the_stored_runs(store: Store, home: Path) -> None:
    run_with_an_approval(store)
    expected = {(s.name, f"{s.span_id:016x}", s.start_ns, s.end_ns) for s in stored_spans(store)}
    with receiving() as receiver:
        done = run_signoff("export", "--otlp", receiver.url, home=home, ok=True)
        received = receiver.spans
    assert done.stdout == f"sent 10 spans to {receiver.url}\n" and len(expected) == 10
    assert {(s.name, s.span_id, s.start_ns, s.end_ns) for s in received} == expected
    assert {s.trace_id for s in received} == {f"{trace_id(store.database_id, 'run-1'):032x}"}
    assert {s.service for s in received} == {"signoff"}
    decisions = [s.attributes for s in received if s.name == "signoff.decision"]
    assert [d.get("signoff.decision.origin") for d in decisions].count("model") == 2
    (run,) = [s for s in received if s.name == "signoff.run"]
    assert run.parent_id == "" and run.attributes["signoff.run.status"] == "COMPLETED"


def test_an_unreachable_endpoint_is_named_and_the_export_fails(store: Store, home: Path) -> None:
    run_with_an_approval(store)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = run_signoff("export", "--otlp", f"http://127.0.0.1:{port}/v1/traces", home=home)
    assert done.returncode == 2
    assert "cannot export: the spans were not taken" in done.stderr
    assert "Connection refused" in done.stderr and "[TelemetryFailed]" in done.stderr


def test_an_endpoint_that_answers_a_byte_at_a_time_is_given_up_not_waited_for(
    store: Store,
) -> None:
    """The OTLP exporter's timeout bounds each read, not the whole answer: an endpoint that
    trickles would hold the export (and ``signoff export --otlp``) for ever."""
    run_with_an_approval(store)
    failed: list[BaseException] = []
    with trickling() as url:
        exporter = otlp(url, timeout=0.3)

        def export() -> None:
            try:
                with Store.open(store.path, create=False, readonly=True) as reader:
                    export_stored(reader, exporter)
            except BaseException as e:
                failed.append(e)

        thread = threading.Thread(target=export, daemon=True)
        thread.start()
        thread.join(60)  # a bound on waiting, not a timing claim: it ends well before
        assert not thread.is_alive(), "the export is still waiting for the endpoint"
        with pytest.raises(TelemetryFailed, match="has not yet answered"):
            export_stored(store, exporter)  # the request given up is not doubled
    assert [type(e) for e in failed] == [TelemetryFailed]
    assert "did not answer within 2.3 seconds" in str(failed[0])


def test_an_unknown_run_or_a_bad_url_is_refused_by_name(store: Store, home: Path) -> None:
    run_with_an_approval(store)
    done = run_signoff("export", "--otlp", "http://127.0.0.1:9/v1/traces", "--run", "nope",
                       home=home)  # fmt: skip
    assert done.returncode == 2 and "[UnknownRun]" in done.stderr
    done = run_signoff("export", "--otlp", "file:///etc/passwd", home=home)
    assert done.returncode == 2 and "[TelemetryFailed]" in done.stderr
