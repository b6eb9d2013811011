"""Faults, through real processes where the process boundary is what is tested.

1. A full disk under ``signoff proxy`` (a small tmpfs as SIGNOFF_HOME, filled by a ballast
   file): before a call, and while the upstream runs it.
2. The upstream server killed between calls and during them, several times in a row.
3. The keyring failing, and its Secret Service daemon stopped, while the tray app runs.
4. The tray app killed with SIGKILL while a proxy holds a call for approval.
5. Clocks that disagree about a run's lease.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from keyring.backends import SecretService, fail
from PySide6.QtWidgets import QApplication

from app.tray import TrayApp
from core.decisions import Decision
from core.errors import LeaseLost, RunLeased
from core.gate import Gate, VerdictOutcome
from core.heads import KeyringHeadStore
from core.policy.policy import ConfigPolicy, Rule
from core.proxy.config import load as load_config
from core.proxy.server import Proxy, _call_key
from core.store import Store
from core.sweep import sweep
from core.tools import SideEffect
from core.transitions import CallLabel
from tests.app.pending import make_pending
from tests.builders import record_run
from tests.core.gatekit import Calls, check_consistency, counter_tool, make_gate
from tests.proxy.test_hostile import (
    READ,
    WRITE,
    executing,
    listing,
    pending,
    ready,
    set_config,
    signoff,
    text,
)
from tests.reliability.faultkit import (
    WAIT,
    App,
    SecretServiceDaemon,
    fill,
    kill,
    listens,
    parent_of,
    proxy_session,
    query,
    read_fifo,
    small_disk,
    until,
    upstream_pid,
    wait_for,
    wake_socket,
)

TIMEOUT = 60  # seconds for one proxy session, start to close
DISK = "4m"  # the small disk SIGNOFF_HOME lives on in section 1
HOLD = 3.0  # seconds a call needing approval is held in section 4: the app is killed within it
TTL = 30.0  # the lease's default TTL (GateConfig.lease_ttl); renewed every TTL/3
TOLERATED = 2 * TTL / 3  # docs/decisions/0009-run-lease.md, "Skew tolerated"


def verified(home: Path) -> None:
    """``signoff verify`` passes on the record as it is."""
    done = signoff(home, "verify")
    assert done.stdout.startswith("intact: "), done.stdout


def complete(home: Path) -> None:
    """Nothing half-written: the tables say what the events say (tests/core/gatekit.py)."""
    with Store.open(home / "signoff.db", readonly=True) as store:
        check_consistency(store)


def allow_writes(home: Path, server: str = "fake") -> None:
    """write_note runs without asking (config.toml edited, so no run-less policy event, which
    gatekit's consistency fold does not read)."""
    set_config(home, ("servers", server, "tools", "write_note"), "policy", "allow")


def run_in(body: Any) -> None:
    async def main() -> None:
        with anyio.fail_after(TIMEOUT):
            await body()

    anyio.run(main)


# --- 1. a full disk -------------------------------------------------------------------------------


@pytest.fixture
def disk_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """SIGNOFF_HOME (database, configuration, logs) on a tmpfs of its own.

    A real full disk rather than SQLite's ``max_page_count``: the page limit is a setting of one
    connection, which the test cannot reach inside ``signoff proxy`` (tests/core/test_store.py
    uses it in-process), and it counts database pages, so a commit that only rewrites pages
    (an outcome's UPDATE) still goes through. On a filled tmpfs every commit's WAL frames meet
    ENOSPC, in every process, as on a full disk."""
    with small_disk(tmp_path / "disk", DISK) as home:
        monkeypatch.setenv("SIGNOFF_HOME", str(home))
        yield home


@pytest.mark.slow
@pytest.mark.guarantee("G-STORE-4")
def test_a_full_disk_before_a_call_fails_it_by_name_and_the_same_proxy_recovers(
    disk_home: Path,
) -> None:
    home = disk_home
    fake = ready(home, "fake", listing(READ, WRITE))
    allow_writes(home)

    async def body() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host:
            first = await host.call_tool("write_note", {"text": "before"})
            assert not first.is_error, text(first)
            record = "SELECT (SELECT count(*) FROM runs), (SELECT max(seq) FROM events)"
            before = query(home, record)
            ballast = fill(home)

            for tool, arguments in (("write_note", {"text": "full"}), ("read_note", {})):
                refused = await host.call_tool(tool, arguments)
                assert refused.is_error, text(refused)
                assert "[StoreFull]" in text(refused)
            assert query(home, record) == before  # nothing of the refused calls was written
            complete(home)
            verified(home)

            ballast.unlink()
            again = await host.call_tool("write_note", {"text": "full"})
            assert not again.is_error, text(again)
            assert text(again) == "wrote 'full'"
            read = await host.call_tool("read_note", {})
            assert text(read) == "before\nfull\n"

    run_in(body)
    assert fake.notes.read_text() == "before\nfull\n"  # the refused call never ran
    assert pending(home) == []
    complete(home)
    verified(home)


@pytest.mark.slow
@pytest.mark.guarantee("G-STORE-4")
@pytest.mark.guarantee("G-CRASH-1")
def test_a_disk_filling_while_the_upstream_runs_a_call_leaves_it_to_the_operator(
    disk_home: Path, tmp_path: Path
) -> None:
    """The tool started and did its work, but its outcome cannot be recorded: the host is told
    by name; the record says "started"; the re-call, once space is freed, does not run it again
    but waits for the operator, and approving runs it once."""
    home = disk_home
    notes = tmp_path / "notes"  # off the small disk: a pipe now, a plain file later
    os.mkfifo(notes)
    ready(home, "fake", listing(READ, WRITE), notes=str(notes))
    allow_writes(home)

    async def body() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host, anyio.create_task_group() as tg:
            answers: list[Any] = []

            async def call() -> None:
                answers.append(await host.call_tool("write_note", {"text": "cut"}))

            tg.start_soon(call)
            # The upstream is in the call: blocked opening the pipe, its side effect.
            await until(lambda: executing(home, "fake") == {"write_note"}, "the call starting")
            ballast = fill(home)
            await anyio.to_thread.run_sync(read_fifo, notes, b"cut\n")  # it happens
            await until(lambda: answers, "the call's answer")
            [answer] = answers
            assert answer.is_error, text(answer)
            assert "[StoreFull]" in text(answer)
            assert "will not be repeated on its own" in text(answer)
            # Started, outcome not recorded: the record stops at the start, complete as far
            # as it goes.
            assert query(home, "SELECT status FROM steps") == [("executing",)]
            complete(home)
            verified(home)

            notes.unlink()
            notes.write_text("")  # a plain file: a repeat would show here
            ballast.unlink()
            again = await host.call_tool("write_note", {"text": "cut"})
            assert not again.is_error, text(again)
            assert text(again).startswith("This call was cut off and may or may not have")
            assert notes.read_text() == ""  # not run again on its own
            [waiting] = pending(home)
            assert (waiting["tool"], waiting["kind"]) == ("write_note", "interrupted_side_effect")
            assert waiting["id"] in text(again)

            signoff(home, "approve", waiting["id"], "--hash", waiting["hash"])
            done = await host.call_tool("write_note", {"text": "cut"})
            assert text(done) == "wrote 'cut'", text(done)
            assert notes.read_text() == "cut\n"  # once, after the approval

    run_in(body)
    assert pending(home) == []
    complete(home)
    verified(home)


# --- 2. the upstream server crashing --------------------------------------------------------------


@pytest.mark.guarantee("G-PROXY-2")
def test_an_upstream_killed_between_calls_restarts_with_its_pins_or_refuses_by_name(
    home: Path,
) -> None:
    fake = ready(home, "fake", listing(READ, WRITE))
    allow_writes(home)
    script = fake.path.read_text()

    async def body() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host:
            assert text(await host.call_tool("read_note", {})) == ""
            seen = [upstream_pid(fake)]
            for i in range(3):  # several crashes in a row, each between two calls
                kill(seen[-1])
                wrote = await host.call_tool("write_note", {"text": f"after crash {i}"})
                assert text(wrote) == f"wrote 'after crash {i}'", text(wrote)
                seen.append(upstream_pid(fake))
            assert len(set(seen)) == 4  # each call after a crash met a new process

            # Restarted with a reworded tool: that tool is refused, by name; the other runs.
            fake.update(listing=listing(READ, {**WRITE, "description": "Append, then mail"}))
            kill(seen[-1])
            changed = await host.call_tool("write_note", {"text": "reworded"})
            assert changed.is_error
            assert "write_note changed since it was pinned" in text(changed)
            assert text(await host.call_tool("read_note", {})).count("after crash") == 3

            # A server that cannot start again: the call is refused, by name, the proxy stays.
            fake.path.write_text("not a script")
            kill(upstream_pid(fake))
            down = await host.call_tool("read_note", {})
            assert down.is_error
            assert "is not running and did not restart" in text(down)
            fake.path.write_text(script)  # repaired: the next call starts it again
            back = await host.call_tool("read_note", {})
            assert text(back).count("after crash") == 3, text(back)
            # A tool once seen changed stays withdrawn until the host starts the proxy again.
            withdrawn = await host.call_tool("write_note", {"text": "repaired"})
            assert withdrawn.is_error and "changed since it was pinned" in text(withdrawn)

    run_in(body)
    lines = fake.notes.read_text().splitlines()
    assert lines == ["after crash 0", "after crash 1", "after crash 2"]
    assert pending(home) == []
    complete(home)
    verified(home)


@pytest.mark.guarantee("G-PROXY-2")
def test_a_restart_with_a_changed_listing_takes_every_changed_tool_away(home: Path) -> None:
    """Only write_note is called after the restart; read_note, which now says it is
    destructive (its pin covers name, description and schema; its class was read_only), stops
    being offered too, though nobody called it."""
    fake = ready(home, "fake", listing(READ, WRITE))
    allow_writes(home)

    async def body() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host:
            assert text(await host.call_tool("read_note", {})) == ""
            destructive = {**READ, "annotations": {"destructiveHint": True}}
            fake.update(listing=listing(destructive, WRITE))
            kill(upstream_pid(fake))
            wrote = await host.call_tool("write_note", {"text": "after the restart"})
            assert text(wrote) == "wrote 'after the restart'", text(wrote)  # unchanged
            gone = await host.call_tool("read_note", {})
            assert gone.is_error and "annotation conflict" in text(gone), text(gone)

    run_in(body)
    assert fake.notes.read_text() == "after the restart\n"


@pytest.mark.guarantee("G-PROXY-2")
def test_a_server_dead_before_the_proxy_noticed_is_restarted_not_cut_off(home: Path) -> None:
    """The window a host can hit: the server died between calls, and the proxy has not read
    its end yet (here its event loop is held until the process is gone). The request cannot
    be written, so it was never made: the server is started again and the call runs."""
    fake = ready(home, "fake", listing(READ, WRITE))
    allow_writes(home)

    async def body() -> None:
        with Store.open(home / "signoff.db") as store:
            config = load_config(home / "config.toml")
            proxy = Proxy(config, ["fake"], store, log_dir=home / "logs", hold_seconds=0.2)
            await proxy.start()
            try:
                assert text(await proxy.call("read_note", {})) == ""
                dead = upstream_pid(fake)
                kill(dead)  # blocks this loop: the proxy's reader cannot see the end
                assert proxy.upstreams["fake"].alive  # not noticed
                wrote = await proxy.call("write_note", {"text": "after"})
                assert text(wrote) == "wrote 'after'", text(wrote)
                assert upstream_pid(fake) != dead
            finally:
                await proxy.close()

    run_in(body)
    assert fake.notes.read_text() == "after\n"
    assert pending(home) == []
    complete(home)


@pytest.mark.slow
@pytest.mark.guarantee("G-PROXY-2")
@pytest.mark.guarantee("G-CRASH-1")
def test_crashes_during_calls_in_a_row_leave_each_mutation_to_the_operator_once(
    home: Path,
) -> None:
    fake = ready(home, "fake", listing(READ, WRITE),
                 on_call={"read_note": "die", "write_note": "die"})  # fmt: skip
    allow_writes(home)

    async def body() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host:
            for call, arguments in (("read_note", {}), ("write_note", {"text": "a"}),
                                    ("write_note", {"text": "b"}), ("read_note", {})):  # fmt: skip
                result = await host.call_tool(call, arguments)
                if call == "read_note":  # read-only: an error, nothing waits
                    assert result.is_error
                    assert "server fake exited (code 3)" in text(result)
                else:
                    assert not result.is_error, text(result)
                    assert text(result).startswith("This call was cut off and may or may not")
            assert fake.notes.read_text() == "a\nb\n"  # each took effect before its crash
            waiting = {p["arguments"]["text"]: p for p in pending(home)}
            assert sorted(waiting) == ["a", "b"]
            assert {p["kind"] for p in waiting.values()} == {"interrupted_side_effect"}
            # The read-only calls cut off ended; they wait for nobody.
            assert query(home, "SELECT status, count(*) FROM runs WHERE tool = 'read_note'"
                         " GROUP BY status") == [("FAILED", 2)]  # fmt: skip

            fake.update(on_call={})  # the next start behaves
            for arguments in ({"text": "a"}, {"text": "b"}):  # re-calls: never on their own
                again = await host.call_tool("write_note", arguments)
                assert f"pending as approval {waiting[arguments['text']]['id']}" in text(again)
            assert fake.notes.read_text() == "a\nb\n"

            signoff(home, "approve", waiting["a"]["id"], "--hash", waiting["a"]["hash"])
            signoff(home, "reject", waiting["b"]["id"], "--reason", "it did happen")
            ran = await host.call_tool("write_note", {"text": "a"})
            assert text(ran) == "wrote 'a'", text(ran)
            refused = await host.call_tool("write_note", {"text": "b"})
            assert refused.is_error
            # Rejecting an unknown outcome is "do not repeat": never "it did not run".
            assert "may have taken effect" in text(refused), text(refused)
            assert "did not run" not in text(refused)
            # Approving ran it once: calling again is a duplicate, for the operator again.
            repeat = await host.call_tool("write_note", {"text": "a"})
            assert "An identical call may already have taken effect" in text(repeat), text(repeat)
            assert text(await host.call_tool("read_note", {})) == "a\nb\na\n"

    run_in(body)
    assert fake.notes.read_text() == "a\nb\na\n"
    assert [p["kind"] for p in pending(home)] == ["duplicate"]
    complete(home)
    verified(home)


@pytest.mark.slow
@pytest.mark.guarantee("G-CRASH-1")
def test_a_proxy_killed_during_a_call_never_runs_it_again_on_its_own(home: Path) -> None:
    """The host starts the proxy again and calls again: the call that was under way is not
    started twice; once its lease expired (here: the tray app's sweeper, its clock 31 s on),
    it waits for the operator, and approving runs it once."""
    fake = ready(home, "fake", listing(READ, WRITE), on_call={"write_note": "hang"})
    allow_writes(home)

    async def first_host() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host, anyio.create_task_group() as tg:
            tg.start_soon(host.call_tool, "write_note", {"text": "x"})
            await until(lambda: executing(home, "fake") == {"write_note"}, "the call starting")
            server = upstream_pid(fake)
            kill(parent_of(server))  # the proxy, mid-call
            kill(server)  # its orphan (a hanging server outlives its proxy)
            tg.cancel_scope.cancel()  # this host's call has no answer coming

    run_in(first_host)
    fake.update(on_call={})  # a repeat would now take effect, and show

    async def second_host() -> None:
        async with proxy_session(home, "fake", hold=0.2) as host:
            again = await host.call_tool("write_note", {"text": "x"})
            assert not again.is_error, text(again)
            assert "it is not started twice" in text(again)
            assert not fake.notes.exists() or fake.notes.read_text() == ""
            with Store.open(home / "signoff.db") as store:  # what the app does every 15 s
                swept = sweep(store, wall_clock=lambda: time.time() + 31)
            assert len(swept) == 1 and "outcome unknown" in swept[0], swept
            [waiting] = pending(home)
            assert waiting["kind"] == "interrupted_side_effect"
            held = await host.call_tool("write_note", {"text": "x"})
            assert f"pending as approval {waiting['id']}" in text(held)
            signoff(home, "approve", waiting["id"], "--hash", waiting["hash"])
            ran = await host.call_tool("write_note", {"text": "x"})
            assert text(ran) == "wrote 'x'", text(ran)

    run_in(second_host)
    assert fake.notes.read_text() == "x\n"
    complete(home)
    verified(home)


@pytest.mark.guarantee("G-CRASH-1")
def test_a_call_cut_off_before_its_tool_started_is_started_anew(home: Path) -> None:
    """Another proxy began the same call and died before the upstream was called (its step
    still deciding, its lease expired): nothing took effect, so the old run is closed and the
    call runs, once."""
    fake = ready(home, "fake", listing(READ, WRITE))
    allow_writes(home)

    async def body() -> None:
        with Store.open(home / "signoff.db") as store:
            config = load_config(home / "config.toml")
            proxy = Proxy(config, ["fake"], store, log_dir=home / "logs", hold_seconds=0.2)
            await proxy.start()
            try:
                gate = proxy._require_gate()
                exposed = proxy.exposed["write_note"]
                key = _call_key(exposed, proxy._spec_hash(exposed), {"text": "anew"})
                dead = Gate(dataclasses.replace(
                    gate.config, wall_clock=lambda: time.time() - 2 * TTL))  # fmt: skip
                # A proxy of the same host (a host's proxies share its calls, decision 0027).
                label = CallLabel("fake", "write_note", key, proxy.host.id)
                session = dead.begin("call-dead", "goal", call=label)
                assert session.step() is not None
                session._die()
                ran = await proxy.call("write_note", {"text": "anew"})
                assert text(ran) == "wrote 'anew'", text(ran)
            finally:
                await proxy.close()

    run_in(body)
    assert fake.notes.read_text() == "anew\n"
    runs = query(home, "SELECT id, status FROM runs ORDER BY created_at, rowid")
    assert runs[0] == ("call-dead", "FAILED") and [r[1] for r in runs[1:]] == ["COMPLETED"]
    assert query(home, "SELECT status FROM steps WHERE run_id = 'call-dead' ORDER BY idx") == [
        ("interrupted",),
        ("failed",),
    ]
    assert pending(home) == []
    complete(home)


# --- 3. the keyring failing while the app runs ----------------------------------------------------


def menu_says(tray: TrayApp, words: str) -> bool:
    return any(words in action.text() for action in tray.menu.actions())


def anchored(tray: TrayApp, heads: KeyringHeadStore, store: Store) -> bool:
    """The tray says anchored, and the head kept in the keyring is the store's head."""
    witness = tray.model.witness
    return (
        witness.anchored
        and "chain anchored in the keyring" in tray.tray.toolTip()
        and menu_says(tray, "anchored in the keyring")
        and heads.load(store.database_id) == store.head()
    )


def not_anchored(tray: TrayApp) -> bool:
    witness = tray.model.witness
    return (
        not witness.anchored
        and not witness.alarm
        and "chain not anchored" in tray.tray.toolTip()
        and menu_says(tray, "not anchored")
    )


# jaraco/keyring#380: the Secret Service backend leaves its D-Bus connection open when it fails
# to reach the daemon (get_preferred_collection); the socket is closed when collected.
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_the_secret_service_stopping_and_coming_back_while_the_app_runs(
    store: Store, home: Path, tmp_path: Path, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gnome-keyring's daemon stopped between keyring calls and in the middle of one, then
    started again: "not anchored" each time, never a crash or an alarm, and the head is kept
    again when it is back, without waiting for the record to change."""
    with SecretServiceDaemon(tmp_path / "secret-service") as secrets:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", secrets.address)
        secrets.start()

        class StopsMidway(SecretService.Keyring):
            """The real backend; ``midway`` stops the daemon once it found the collection."""

            midway = False

            def get_preferred_collection(self) -> Any:
                collection = super().get_preferred_collection()
                if self.midway:
                    StopsMidway.midway = False
                    secrets.stop()
                return collection

        heads = KeyringHeadStore(StopsMidway())
        tray = TrayApp(store, heads, home, native=False)
        tray.start()
        tray._sweeper.setInterval(50)  # the tick that retries the keyring: 15 s in use
        try:
            record_run(store, "before")
            qtbot.waitUntil(lambda: anchored(tray, heads, store), timeout=10_000)

            secrets.stop()  # between two calls
            make_pending(store, run_id="while-stopped")
            qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=10_000)
            qtbot.waitUntil(lambda: not_anchored(tray), timeout=10_000)
            assert tray.model.witness.head == store.head()  # still verified, only not kept

            secrets.start()  # nothing changes in the record: the app notices on its own
            qtbot.waitUntil(lambda: anchored(tray, heads, store), timeout=10_000)

            StopsMidway.midway = True  # in the middle of the next keyring call
            record_run(store, "while-stopping")
            qtbot.waitUntil(lambda: not_anchored(tray), timeout=10_000)
            assert not StopsMidway.midway and not secrets.serving()

            secrets.start()
            qtbot.waitUntil(lambda: anchored(tray, heads, store), timeout=10_000)
            assert tray.model.state == "pending"
        finally:
            tray.stop()
            gc.collect()  # the backend's leaked connections, while their warning is ignored


def test_a_keyring_that_keeps_failing_is_asked_less_and_less_often(
    store: Store, home: Path, qtbot: Any
) -> None:
    """Each try may be a password prompt (a locked keyring unlocks by asking): while it keeps
    failing, the app tries again after 1, 2, 4, 8 sweeps, then every 16 (4 minutes). A change
    of the record does not try it (a locked keyring would prompt at every change)."""
    asked_at: list[int] = []
    sweeps = [0]

    class Failing(fail.Keyring):
        def get_password(self, service: str, username: str) -> str | None:
            asked_at.append(sweeps[0])
            return super().get_password(service, username)

    def settled() -> None:  # the witness's work done on its thread, and its answer taken in
        tray.witness.drain()
        QApplication.processEvents()

    tray = TrayApp(store, KeyringHeadStore(Failing()), home, native=False)
    tray.start()
    tray._sweeper.stop()  # the sweeps are the test's
    try:
        settled()
        record_run(store, "r")
        tray.refresh()
        settled()
        assert asked_at == [0]  # the start asked; the change did not
        asked_at.clear()
        for sweeps[0] in range(1, 64):
            tray.sweep()
            settled()
        # The first sweep after the failure tried; then after 2, 4, 8, 16, 16 more sweeps.
        assert asked_at == [1, 3, 7, 15, 31, 47, 63]
        assert not_anchored(tray)
    finally:
        tray.stop()


# --- 4. the app killed while a proxy holds a call -------------------------------------------------


@pytest.mark.slow
@pytest.mark.guarantee("G-PROXY-1")
def test_the_app_killed_while_a_proxy_holds_a_call(home: Path, tmp_path: Path) -> None:
    app = App(home, tmp_path)
    # Configured, decided and proxied with the app's keyring, as one user's commands, app and
    # hosts share one: the configuration is recorded with the operator key kept there.
    fake = ready(home, "fake", listing(READ, WRITE), env=app.keyring_env)  # write_note: approve
    app.start()
    try:

        async def held() -> None:
            async with proxy_session(home, "fake", hold=HOLD, env=app.keyring_env) as host:
                answers: list[Any] = []

                async def call() -> None:
                    answers.append(await host.call_tool("write_note", {"text": "held"}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    [(approval,)] = await until(
                        lambda: query(home, "SELECT id FROM approvals WHERE status = 'pending'"),
                        "the call's approval",
                    )
                    # The notified-once file is written just before the notification is sent
                    # and logged: killed between the two, the app would have notified nothing.
                    await until(
                        lambda: approval in app.notified() and "notifying approval" in app.log(),
                        "the app notifying it",
                    )
                    assert not answers  # still held
                    app.kill()
                    await until(lambda: answers, "the held call's answer", timeout=HOLD + WAIT)
                [answer] = answers
                assert not answer.is_error, text(answer)
                assert "needs the operator's approval and has not run" in text(answer)
                assert approval in text(answer)

        run_in(held)
        assert app.log().count("notifying approval") == 1

        assert wake_socket(home).exists() and not listens(wake_socket(home))  # left behind
        app.start()  # over what the killed one left: its sockets, its notified-once file
        again = app.signoff()  # the single-instance socket is the new app's
        assert again.returncode == 0 and "already running" in again.stdout, again
        [waiting] = pending(home)
        decided = app.signoff("approve", waiting["id"], "--hash", waiting["hash"])
        assert decided.returncode == 0, decided.stderr
        # The new app reads the store: the decided approval leaves its notified-once file.
        wait_for(lambda: waiting["id"] not in app.notified(), "the app seeing the decision")

        async def collect() -> None:  # the proxy checks the decision with the app's keyring
            async with proxy_session(home, "fake", hold=HOLD, env=app.keyring_env) as host:
                done = await host.call_tool("write_note", {"text": "held"})
                assert text(done) == "wrote 'held'", text(done)

        run_in(collect)
        assert fake.notes.read_text() == "held\n"  # executed once
        assert app.log().count("notifying approval") == 1  # not notified again after the restart
        assert "Traceback" not in app.printed()
        assert app.process is not None and app.process.poll() is None  # still running
        verify = app.signoff("verify")
        assert verify.returncode == 0 and "anchored in the keyring" in verify.stdout, verify
    finally:
        app.stop()
    complete(home)


# --- 5. clocks that disagree ----------------------------------------------------------------------


def _leased_run(store: Store, wall: Callable[[], float]) -> tuple[Any, Any]:
    """A run begun by one gate (one process), its step allowed and about to start the tool."""
    tool = counter_tool("write", SideEffect.LOCAL_MUTATION, Calls())
    policy = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.ALLOW})
    gate = make_gate(store, [tool], policy=policy, wall_clock=wall, lease_ttl=TTL)
    session = gate.begin("r", "goal", call=CallLabel("srv", "write", "k" * 64))  # a proxy's
    step = session.step()  # the holder's last write: it renewed the lease
    assert step is not None
    return session, step


def _lease_and_log(path: Path) -> tuple[Any, ...]:
    with Store.open(path) as reader:
        return (
            *reader._conn.execute("SELECT lease_owner, lease_expires_at FROM runs").fetchone(),
            reader.head(),
        )


@pytest.mark.parametrize(
    "skew",
    [-(TTL + 5), -TTL / 2, 0.0, TTL / 3, TOLERATED - 0.5],
    ids=["behind-35s", "behind-15s", "same", "ahead-10s", "ahead-19.5s"],
)
def test_a_clock_within_the_tolerated_skew_never_takes_a_live_lease(
    home: Path, skew: float
) -> None:
    """Two processes on one database (two stores, two gates; the tray app's sweeper too),
    each with its own wall clock. The holder last renewed TTL/3 ago, the longest a live holder
    goes without renewing: a reader whose clock is behind by any amount, or ahead by less than
    2·TTL/3, sees the lease live, is refused and changes nothing."""
    true = [1_000_000.0]
    path = home / "signoff.db"
    with Store.open(path) as holder_store, Store.open(path) as other_store:
        session, step = _leased_run(holder_store, lambda: true[0])
        true[0] += TTL / 3
        before = _lease_and_log(path)

        other = make_gate(other_store, [], wall_clock=lambda: true[0] + skew, lease_ttl=TTL)
        with pytest.raises(RunLeased):
            other.attach("r")
        assert sweep(other_store, wall_clock=lambda: true[0] + skew) == []
        assert _lease_and_log(path) == before

        # The holder goes on: its lease is still its own.
        verdict = step.propose(Decision.tool_call("write", {"n": 1}))
        assert verdict.outcome == VerdictOutcome.ALLOWED
        session.close()


@pytest.mark.parametrize("taker", ["gate", "sweeper"])
def test_a_clock_ahead_by_more_than_the_tolerance_takes_the_lease(home: Path, taker: str) -> None:
    """The bound is where the decision record puts it: just past 2·TTL/3 ahead, the same
    lease looks expired and is taken over; the holder's next write finds it lost."""
    true = [1_000_000.0]
    path = home / "signoff.db"
    with Store.open(path) as holder_store, Store.open(path) as other_store:
        _, step = _leased_run(holder_store, lambda: true[0])
        true[0] += TTL / 3
        ahead = lambda: true[0] + TOLERATED + 0.5  # noqa: E731
        if taker == "gate":
            taken, _ = make_gate(other_store, [], wall_clock=ahead, lease_ttl=TTL).attach("r")
            taken.close()
        else:
            [line] = sweep(other_store, wall_clock=ahead)
            assert "ended as interrupted" in line
        with pytest.raises(LeaseLost):
            step.propose(Decision.tool_call("write", {"n": 1}))
