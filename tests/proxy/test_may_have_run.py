"""A call that may have taken effect never runs again without the operator, across runs.

A matrix over the causes of an unknown outcome (the server died after acting, did not answer in
time, was told the host cancelled the call and sent no answer), the
operator's answer to the ``interrupted_side_effect`` that follows (approve, reject, expire,
none yet) and the tool's rule (allow, approve). Real subprocesses throughout: ``signoff proxy``
in front of tests/proxy/fake_server.py, whose notes file is the server's own log of every
``write_note`` it performed, called by the mcp SDK's client.

For each cell: the server's log shows one execution, plus at most one per approval of the
unknown outcome; the model is never told "did not run" for a call that reached the server; and
after the operator rejected it or nobody decided in time, the next identical call waits for
the operator as a ``duplicate``, even under an allow rule.

A call the server answered ran, however its answer reads (over the operator's limit, too large
to read at all, a result that is not an object, JSON Signoff cannot read exactly): its outcome is
recorded, the host is told it ran and why its answer is not whole, and the next identical call
waits as a ``duplicate``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.approvals import approve, reject
from core.records import PendingRequest, pending_requests
from core.store import Store
from core.sweep import sweep
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.guarantee("G-CRASH-1")]

CAUSES = ("die", "timeout", "cancelled")
ANSWERED = {  # the fake server's behaviour, and the words the host is told why
    "over-limit": ("oversize", "over the limit of 1048576 bytes"),
    "too-large": ("oversize", "UpstreamAnswerTooLarge"),
    "not-object": ("not_object", "without a result object"),
    "inexact": ("inexact", "UpstreamAnswerInexact"),
    "inexact-error": ("inexact_error", "UpstreamAnswerInexact"),
}
BEHAVIOUR = {"timeout": "write_then_hang", "cancelled": "cancellable"}  # else the cause's name
ANSWERS = ("approve", "reject", "expire", "none")
NEVER_RAN = re.compile(r"did not run|has not run|never ran|was refused", re.IGNORECASE)


def executions(notes: Path, marker: str) -> int:
    return notes.read_text().splitlines().count(marker) if notes.exists() else 0


def running(home: Path) -> bool:
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        return conn.execute("SELECT 1 FROM runs WHERE status = 'RUNNING'").fetchone() is not None


def waiting(home: Path, marker: str, kind: str) -> PendingRequest:
    """The one request of this marker and kind waiting for the operator (read in-process: the
    CLI's start-up would be most of this test's time)."""
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        every = pending_requests(conn)
    found = [p for p in every if json.loads(p.arguments) == {"text": marker} and p.kind == kind]
    assert len(found) == 1, (kind, marker, every)
    return found[0]


def decide(home: Path, request: PendingRequest, decision: str) -> None:
    """As ``signoff approve`` / ``reject`` do it, in-process."""
    act = approve if decision == "approve" else reject
    with Store.open(home / "signoff.db") as store:
        act(store, request.run_id, request.id, "operator:test", "it went through")


@pytest.mark.parametrize("rule", ["allow", "approve"])
@pytest.mark.parametrize("cause", CAUSES)
def test_an_unknown_outcome_runs_again_only_on_the_operators_approval(
    home: Path, tmp_path: Path, cause: str, rule: str
) -> None:
    notes = tmp_path / "notes.txt"
    rig = Rig(home)
    behaviour = BEHAVIOUR.get(cause, cause)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes), on_call={"write_note": behaviour},
                 delay=60)  # fmt: skip
    rig.signoff("settings", "cancel_grace_seconds", "1")
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", rule)
    if cause == "timeout":
        rig.signoff("settings", "call_timeout_seconds", "3")  # time to act, then hang
    told: list[str] = []

    async def call(host: Any, marker: str) -> str:
        if cause == "cancelled":  # the host gives up on it once the server acted, then asks again
            done, answered = executions(notes, marker), len(told)
            async with anyio.create_task_group() as tg:

                async def first() -> None:
                    told.append(text(await host.call_tool("write_note", {"text": marker})))

                tg.start_soon(first)
                await until(lambda: len(told) > answered or executions(notes, marker) > done,
                            "an answer, or the server acting")  # fmt: skip
                tg.cancel_scope.cancel()
            if len(told) > answered:
                return told[-1]  # answered at once (it waits for the operator): nothing ran
            await until(lambda: not running(home), "the cancelled call's outcome")
        answer = text(await host.call_tool("write_note", {"text": marker}))
        told.append(answer)
        return answer

    async def scenario() -> None:
        async with rig.client("notes", hold=0.2) as host:
            for answer in ANSWERS:
                marker = f"{cause}-{rule}-{answer}"
                if rule == "approve":  # an ordinary approval first: the call has not run yet
                    first = text(await host.call_tool("write_note", {"text": marker}))
                    assert executions(notes, marker) == 0 and "has not run" in first
                    decide(home, waiting(home, marker, "local_mutation"), "approve")
                await call(host, marker)
                assert executions(notes, marker) == 1
                unknown = waiting(home, marker, "interrupted_side_effect")
                assert "may or may not have taken effect" in told[-1], told[-1]

                if answer == "approve":
                    decide(home, unknown, "approve")
                    await call(host, marker)  # runs again, once: its outcome unknown again
                    assert executions(notes, marker) == 2
                    again = waiting(home, marker, "interrupted_side_effect")
                    assert again.id != unknown.id
                    await call(host, marker)  # not a third time without a third approval
                    assert executions(notes, marker) == 2
                    continue
                if answer == "none":
                    await call(host, marker)
                    assert executions(notes, marker) == 1
                    assert waiting(home, marker, "interrupted_side_effect") == unknown
                    continue
                if answer == "reject":
                    decide(home, unknown, "reject")
                else:  # nobody decided in time: the sweeper expires it
                    with Store.open(home / "signoff.db") as store:
                        assert sweep(store, pending_ttl=0.0)
                ruled = await call(host, marker)
                assert "may have taken effect" in ruled, ruled
                # The next identical call may repeat an effect: it waits as a duplicate.
                await call(host, marker)
                assert executions(notes, marker) == 1
                waiting(home, marker, "duplicate")

    anyio.run(scenario)
    for answer in told:
        assert not NEVER_RAN.search(answer), answer


@pytest.mark.parametrize("rule", ["allow", "approve"])
@pytest.mark.parametrize("answer", ANSWERED)
def test_a_call_the_server_answered_ran_however_its_answer_reads(
    home: Path, tmp_path: Path, answer: str, rule: str
) -> None:
    notes = tmp_path / "notes.txt"
    rig = Rig(home)
    behaviour, said = ANSWERED[answer]
    size = (17 << 20) if answer == "too-large" else (2 << 20)  # past the 16 MiB read, or not
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes), on_call={"write_note": behaviour},
                 oversize_bytes=size)  # fmt: skip
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", rule)
    marker = f"{answer}-{rule}"

    async def scenario() -> None:
        async with rig.client("notes", hold=0.2) as host:
            if rule == "approve":
                first = text(await host.call_tool("write_note", {"text": marker}))
                assert "has not run" in first
                decide(home, waiting(home, marker, "local_mutation"), "approve")
            ran = await host.call_tool("write_note", {"text": marker})
            assert ran.is_error and said in text(ran) and "ran" in text(ran), text(ran)
            assert not NEVER_RAN.search(text(ran)), text(ran)
            assert executions(notes, marker) == 1
            with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
                [(status,)] = conn.execute(
                    "SELECT status FROM runs WHERE tool = 'write_note' ORDER BY rowid DESC LIMIT 1"
                ).fetchall()
            assert status == "COMPLETED"
            # It may repeat an effect: the next identical call waits as a duplicate.
            again = text(await host.call_tool("write_note", {"text": marker}))
            assert "may already have taken effect" in again, again
            assert executions(notes, marker) == 1
            waiting(home, marker, "duplicate")

    anyio.run(scenario)
