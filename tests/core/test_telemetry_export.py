"""``signoff export --otlp URL``: the stored runs' spans, over OTLP/HTTP, as a real command."""

from __future__ import annotations

import socket
from pathlib import Path

from core.spans import trace_id
from core.store import Store
from core.telemetry import stored_spans
from tests.conftest import run_signoff
from tests.core.test_telemetry import run_with_an_approval
from tests.otlp_receiver import receiving


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


def test_an_unknown_run_or_a_bad_url_is_refused_by_name(store: Store, home: Path) -> None:
    run_with_an_approval(store)
    done = run_signoff("export", "--otlp", "http://127.0.0.1:9/v1/traces", "--run", "nope",
                       home=home)  # fmt: skip
    assert done.returncode == 2 and "[UnknownRun]" in done.stderr
    done = run_signoff("export", "--otlp", "file:///etc/passwd", home=home)
    assert done.returncode == 2 and "[TelemetryFailed]" in done.stderr
