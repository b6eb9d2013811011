"""The proxy's live telemetry (``[telemetry] otlp``): each proxied call's spans, sent by the
real ``signoff proxy`` processes to a receiver on 127.0.0.1, are the record's spans."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from core.telemetry import stored_spans
from tests.conftest import _secret_service_problem, need
from tests.host import text
from tests.otlp_receiver import carried, receiving
from tests.proxy.rig import NOTES_TOOLS, Rig

pytestmark = [pytest.mark.slow]

WAITS = "This call needs the operator's approval"
TOOL = "signoff.call.tool"
DECISION = "signoff.decision"


@pytest.fixture
def rig(home: Path, tmp_path: Path) -> Rig:
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(tmp_path / "notes.txt"))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    return rig


def send_spans_to(rig: Rig, home: Path, url: str) -> None:
    """As the operator configures it: the file edited, then taken up by its fingerprint."""
    config = home / "config.toml"
    config.write_text(config.read_text() + f'\n[telemetry]\notlp = "{url}"\n')
    shown = rig.signoff("settings", "diff", check=False)
    fingerprint = shown.stdout.rsplit("signoff settings accept ", 1)[1].strip()
    rig.signoff("settings", "accept", fingerprint)


def call(rig: Rig, tool: str, arguments: dict[str, str]) -> str:
    async def scenario() -> str:
        async with rig.client("notes") as host:
            return text(await host.call_tool(tool, arguments))

    return anyio.run(scenario)


def test_proxied_calls_are_sent_live_and_a_resumed_call_joins_its_trace(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    with receiving() as receiver:
        send_spans_to(rig, home, receiver.url)
        assert WAITS in call(rig, "write_note", {"text": "one"})  # one proxy process pauses
        (waiting,) = rig.pending()
        rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
        assert WAITS not in call(rig, "write_note", {"text": "one"})  # another runs it
        call(rig, "read_note", {})
        with rig.store() as store:
            expected = {
                (s.name, f"{s.trace_id:032x}", f"{s.span_id:016x}", s.start_ns, s.end_ns)
                for s in stored_spans(store)
            }
        received = receiver.wait_for(len(expected))
    assert (tmp_path / "notes.txt").read_text() == "one\n"
    got = [(s.name, s.trace_id, s.span_id, s.start_ns, s.end_ns) for s in received]
    assert sorted(got) == sorted(expected)  # each span once, as the record makes it
    write_trace = {s.trace_id for s in received if s.attributes.get(TOOL) == "write_note"}
    assert len(write_trace) == 1  # the paused call and its resumption: one trace
    by_name = {s.name for s in received if s.trace_id in write_trace}
    assert by_name == {"signoff.run", "signoff.step", "signoff.decision", "signoff.approval",
                       "signoff.tool_call"}  # fmt: skip


def test_an_endpoint_that_is_down_fails_no_proxied_call(rig: Rig, home: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    send_spans_to(rig, home, f"http://127.0.0.1:{port}/v1/traces")
    answer = call(rig, "read_note", {})
    assert "did not run" not in answer and WAITS not in answer, answer
    with rig.store() as store:
        (status,) = store._conn.execute("SELECT status FROM runs").fetchone()
    assert status == "COMPLETED"


def test_a_hand_edit_not_accepted_sends_nothing(rig: Rig, home: Path) -> None:
    """An agent that writes config.toml cannot point the record at an endpoint of its own."""
    with receiving() as receiver:
        config = home / "config.toml"
        config.write_text(config.read_text() + f'\n[telemetry]\notlp = "{receiver.url}"\n')
        call(rig, "read_note", {})  # the proxy has exited when this returns
        assert receiver.spans == [] and receiver.requests == 0
        with rig.store() as store:
            assert stored_spans(store)  # the run was recorded, and is in no copy


@pytest.mark.guarantee("G-TRACE-1")
def test_no_span_of_a_proxied_call_carries_its_arguments_result_or_error(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """Real ``signoff proxy`` processes, then ``signoff export --otlp``: markers in a call's
    arguments (approved, rejected, refused), the reasons the operator gave, a result read back,
    a server's JSON-RPC error and a tool's failure that each repeat the arguments are in no
    text sent, nor in the bytes, in any spelling (tests/otlp_receiver.py ``spellings``). The
    proxy's goals are its own words ("TOOL for the host")."""
    secret = {name: secrets.token_hex(16) for name in (
        "approved-arguments", "approval-reason", "kept-note", "rejected-arguments",
        "rejection-reason", "refused-arguments", "failed-arguments",
    )}  # fmt: skip
    (tmp_path / "notes.txt").write_text(f"{secret['kept-note']}\n")
    rig.add_fake("broken", NOTES_TOOLS, on_call={"write_note": "error_echo", "read_note":
                                                 "failed_echo"})  # fmt: skip
    rig.pin("broken")
    rig.classify("broken", read_note="read_only", write_note="read_only")

    def decide(verb: str, reason: str) -> None:
        (waiting,) = rig.pending()
        rig.signoff(verb, waiting["id"], "--hash", waiting["hash"], "--reason", reason)

    async def calls() -> None:
        async with rig.client("notes", "broken") as host:
            approved = {"text": secret["approved-arguments"]}
            assert WAITS in text(await host.call_tool("notes__write_note", approved))
            decide("approve", secret["approval-reason"])
            assert WAITS not in text(await host.call_tool("notes__write_note", approved))
            read = text(await host.call_tool("notes__read_note", {}))
            assert secret["kept-note"] in read
            rejected = {"text": secret["rejected-arguments"]}
            assert WAITS in text(await host.call_tool("notes__write_note", rejected))
            decide("reject", secret["rejection-reason"])
            assert (await host.call_tool("notes__write_note", rejected)).is_error
            with pytest.raises(MCPError):
                await host.call_tool("broken__write_note", {"text": secret["refused-arguments"]})
            failed = await host.call_tool("broken__read_note", {"x": secret["failed-arguments"]})
            assert failed.is_error and secret["failed-arguments"] in text(failed)

    with receiving() as live, receiving() as exported:
        send_spans_to(rig, home, live.url)
        anyio.run(calls)
        with rig.store() as store:
            expected = stored_spans(store)
            with store.snapshot() as conn:
                record = "".join(p for (p,) in conn.execute("SELECT payload FROM events"))
                (rejected,) = conn.execute("SELECT id FROM runs WHERE status = 'CANCELLED'")
        # The rejection ended its run in the operator's process, which sends nothing: that
        # run's spans but its decision's are in the record and the export (decision 0061).
        live_ones = [s for s in expected if s.name == DECISION
                     or s.attributes["signoff.run.id"] != rejected[0]]  # fmt: skip
        received = live.wait_for(len(live_ones))
        rig.signoff("export", "--otlp", exported.url)
        assert sorted(s.span_id for s in received) == sorted(f"{s.span_id:016x}" for s in live_ones)
        assert len(exported.spans) == len(expected)
        assert carried(live, secret) == [] and carried(exported, secret) == []
    assert {name for name, value in secret.items() if value in record} == set(secret)
    assert {s.status_message for s in received if s.status == 2} >= {"failed"}
    assert {s.attributes.get(TOOL) for s in received if s.name == "signoff.run"} == {
        "write_note", "read_note"
    }  # fmt: skip
