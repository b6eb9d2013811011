"""Each host sees its own calls (G-PROXY-4): two hosts on one database, each with its own
`signoff proxy` process started by the mcp SDK's client, as two Claude Code windows or Cursor
beside Claude Code would.

A host is its clientInfo and the process that launched its proxy
(docs/decisions/0027-each-host-sees-its-own-calls.md). Here this test process launches the
proxies, so two hosts differ by their clientInfo, or, for two windows of one application, by a
launching process of their own (``own_launcher``). What one host asked is neither listed to the
other by ``signoff_status`` nor handed to it: the other's identical call is a new call, which
waits for the operator as a ``duplicate`` while the first may take or have taken effect. The
same host restarting its proxy still collects its own result.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.proxy import host_identity
from core.proxy.config import load as load_config
from core.proxy.server import Proxy
from core.store import Store
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import until

pytestmark = pytest.mark.guarantee("G-PROXY-4")

A = ("host-a", "1.0")
B = ("host-b", "1.0")
PENDING = "This call needs the operator's approval and has not run."
DUPLICATE = "An identical call may already have taken effect; this one waits for the operator"
NOTHING = "Nothing this host asked for waits for the operator."


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


def set_up(home: Path, notes: Path, **script: Any) -> Rig:
    """The fake notes server, pinned and classified: ``write_note`` a local mutation."""
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes), **script)
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    return rig


@pytest.fixture
def rig(home: Path, notes: Path) -> Rig:
    return set_up(home, notes)


def written(notes: Path, line: str) -> int:
    return notes.read_text().splitlines().count(line) if notes.exists() else 0


def approval_of(answer: str) -> str:
    found = re.search(r"pending as approval (\S+) \(", answer)
    assert found, answer
    return found.group(1)


def decide(rig: Rig, approval: str, verdict: str = "approve") -> dict[str, Any]:
    """``signoff approve|reject ID --hash HASH``, as the operator does it in a terminal."""
    [waiting] = [p for p in rig.pending() if p["id"] == approval]
    extra = ["--reason", "not for you"] if verdict == "reject" else []
    rig.signoff(verdict, approval, "--hash", waiting["hash"], *extra)
    return waiting


async def call(host: Any, line: str) -> str:
    return text(await host.call_tool("write_note", {"text": line}))


@pytest.mark.parametrize("other", ["another-application", "another-window-of-the-same-one"])
def test_a_host_neither_sees_nor_collects_another_hosts_request(
    rig: Rig, notes: Path, other: str
) -> None:
    same_app = other != "another-application"
    line = "token for a"

    async def scenario() -> None:
        async with (
            rig.client("notes", client=A) as a,
            rig.client("notes", client=A if same_app else B, own_launcher=same_app) as b,
        ):
            asked = await call(a, line)
            assert asked.startswith(PENDING), asked
            approval = approval_of(asked)
            mine = text(await a.call_tool("signoff_status", {}))
            assert approval in mine and line in mine, mine
            theirs = text(await b.call_tool("signoff_status", {}))
            assert theirs == NOTHING, theirs  # nor its arguments, nor its approval id

            decide(rig, approval)
            # B's identical call is B's own, new call: the approved one is A's, and may run
            # any moment, so B's waits for the operator as a duplicate. It runs nothing.
            stolen = await call(b, line)
            assert stolen.startswith(DUPLICATE) and "wrote" not in stolen, stolen
            assert written(notes, line) == 0
            duplicate = approval_of(stolen)
            assert duplicate != approval
            theirs = text(await b.call_tool("signoff_status", {}))
            assert duplicate in theirs and approval not in theirs, theirs
            assert duplicate not in text(await a.call_tool("signoff_status", {}))

            # A's re-call runs A's approved call, and A alone gets its result, once.
            assert await call(a, line) == f"wrote '{line}'"
            assert written(notes, line) == 1
            assert (await call(a, line)).startswith(DUPLICATE)  # not handed back twice
            # B's duplicate, rejected, gives B the operator's reason, never A's result.
            decide(rig, duplicate, "reject")
            refused = await call(b, line)
            assert "The operator rejected this call" in refused and "wrote" not in refused
            assert written(notes, line) == 1

    anyio.run(scenario)


def test_the_same_host_restarting_its_proxy_collects_its_own_result_and_no_other_host_does(
    rig: Rig, notes: Path
) -> None:
    line = "written by a"

    async def scenario() -> None:
        async with rig.client("notes", client=A) as a:
            approval = approval_of(await call(a, line))
        decide(rig, approval)  # while A's proxy is gone (the host restarts it)
        async with rig.client("notes", client=B) as b:
            stolen = await call(b, line)
            assert stolen.startswith(DUPLICATE) and "wrote" not in stolen, stolen
        async with rig.client("notes", client=A) as a:  # A's proxy again: the same host
            assert await call(a, line) == f"wrote '{line}'"
        assert written(notes, line) == 1

    anyio.run(scenario)


def test_another_hosts_identical_call_under_way_waits_as_a_duplicate_even_under_allow(
    home: Path, notes: Path
) -> None:
    """A's call runs on an allow rule and answers late; B's identical call meanwhile neither
    waits for A's outcome (it is A's) nor runs again: it asks the operator."""
    rig = set_up(home, notes, on_call={"write_note": "late"}, delay=3)
    rig.signoff("policy", "local_mutation", "allow")
    line = "allowed once"

    async def scenario() -> None:
        async with rig.client("notes", client=A) as a, rig.client("notes", client=B) as b:
            async with anyio.create_task_group() as tg:
                answers: dict[str, str] = {}

                async def first() -> None:
                    answers["a"] = await call(a, line)

                tg.start_soon(first)
                # The server acted; its answer is 2 s away.
                await until(
                    lambda: written(notes, line), "the server writing the first call's note"
                )
                answers["b"] = await call(b, line)
            assert answers["a"] == f"wrote '{line}'"
            assert answers["b"].startswith(DUPLICATE), answers["b"]
            assert written(notes, line) == 1

    anyio.run(scenario)


def test_two_hosts_making_the_same_call_at_once_run_it_once(rig: Rig, home: Path) -> None:
    """Two proxies of two hosts in one process (each with its own store and gate, as two
    processes have), under an allow rule: B looked the call up before A began and ran its run;
    B's begin, checked again under the write lock, sees A's run, and B's call waits as a
    duplicate instead of running a second time (G-CRASH-1 across hosts)."""
    rig.signoff("policy", "local_mutation", "allow")
    config = load_config(home / "config.toml")
    database = home / "signoff.db"
    launcher = host_identity.launcher()
    host_a = host_identity.identify({"name": "a", "version": "1"}, launcher)
    host_b = host_identity.identify({"name": "b", "version": "1"}, launcher)
    assert host_a.id != host_b.id
    args = {"text": "at once"}

    async def scenario() -> None:
        with Store.open(database) as one, Store.open(database) as two:
            first = Proxy(config, ["notes"], one, log_dir=home / "logs-a", hold_seconds=0.05)
            second = Proxy(config, ["notes"], two, log_dir=home / "logs-b", hold_seconds=0.05)
            await first.start()
            await second.start()
            try:
                a = asyncio.ensure_future(first.call("write_note", args, host=host_a))
                # B's lookups all happened before A began: each answers as then, once.
                recall: Any = second.recall
                for name in ("latest_of_any_host", "last_effect", "in_flight"):
                    real = getattr(recall, name)
                    stale = [None]
                    setattr(recall, name, lambda *k, s=stale, r=real: s.pop() if s else r(*k))
                assert text(await a) == "wrote 'at once'"
                b = text(await second.call("write_note", args, host=host_b))
                assert b.startswith(DUPLICATE), b
            finally:
                await first.close()
                await second.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    with Store.open(database) as store:
        started = store._conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()[0]
    assert started == 1


def test_a_run_made_before_hosts_were_recorded_is_collected_by_no_host(
    rig: Rig, home: Path, notes: Path
) -> None:
    """An approved call of a database older than hosts (its run has no host): no host's re-call
    collects it; the identical call waits as a duplicate, since the old one may yet run."""
    config = load_config(home / "config.toml")
    args = {"text": "from before"}

    async def scenario() -> None:
        with Store.open(home / "signoff.db") as store:
            proxy = Proxy(config, ["notes"], store, log_dir=home / "logs", hold_seconds=0.05)
            await proxy.start()
            try:
                asked = text(await proxy.call("write_note", args))
                [waiting] = rig.pending()
                decide(rig, approval_of(asked))
                with store.transaction() as tx:  # as migration 3 leaves an older run
                    tx.execute("UPDATE runs SET host = NULL WHERE id = ?", (waiting["run_id"],))
                again = text(await proxy.call("write_note", args))
                assert again.startswith(DUPLICATE), again
                assert text(await proxy.call("signoff_status", {})).count("ap-") == 1
            finally:
                await proxy.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert written(notes, "from before") == 0


def test_a_launching_process_is_its_pid_start_time_and_boot(tmp_path: Path) -> None:
    here = host_identity.launcher(os.getpid())
    assert here.exact and here == host_identity.launcher(os.getpid())  # read again: the same
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        try:
            other = host_identity.launcher(child.pid)
        finally:
            child.kill()
    assert other.exact and other.identity != here.identity
    # A command name with spaces and parentheses: the fields are read after the last ')'.
    proc = tmp_path / "proc"
    (proc / "sys/kernel/random").mkdir(parents=True)
    (proc / "sys/kernel/random/boot_id").write_text("boot-1\n")
    (proc / "77").mkdir()
    fields = ["S", "1", *[str(n) for n in range(5, 22)], "123456", "0"]
    (proc / "77" / "stat").write_text(f"77 (a) b (c)) {' '.join(fields)}\n")
    odd = host_identity.launcher(77, proc=proc)
    assert odd.identity == {"pid": 77, "started": 123456, "boot": "boot-1"}
    # No /proc to read: this proxy process alone, a new host at each start (fails closed).
    gone = [host_identity.launcher(77, proc=tmp_path / "none") for _ in range(2)]
    assert not gone[0].exact and gone[0].identity != gone[1].identity
    info = {"name": "host", "version": "1"}
    assert host_identity.identify(info, gone[0]).id != host_identity.identify(info, gone[1]).id
    assert "this proxy process only" in host_identity.identify(info, gone[0]).label
