"""The two attacks the red team ran, end to end: a real ``signoff proxy`` in front of
tests/proxy/fake_server.py (its notes file is its own log of every write it performed), a real
MCP client as the host, ``signoff approve`` and ``signoff verify`` as the operator runs them,
and the real Secret Service holding the operator key and the kept head.

The attacker can write Signoff's files (here: the sqlite3 module on the database, and a copy
of it put back) but cannot read the keyring.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import NO_KEYRING_ENV, _secret_service_problem, need
from tests.forgery import event, forged_mac, last_seq, rewrite_event
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

pytestmark = pytest.mark.slow


@pytest.fixture
def rig(home: Path, tmp_path: Path) -> Rig:
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(tmp_path / "notes.txt"))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    return rig


def written(tmp_path: Path) -> list[str]:
    notes = tmp_path / "notes.txt"
    return notes.read_text().splitlines() if notes.exists() else []


def sql(database: Path, statement: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(database)
    conn.execute(statement, params)
    conn.commit()
    conn.close()


@pytest.mark.guarantee("G-KEY-1")
def test_an_approval_forged_in_the_database_is_not_executed_and_verify_names_it(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    database = home / "signoff.db"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            first = text(await host.call_tool("write_note", {"text": "forged"}))
            assert first.startswith("This call needs the operator's approval"), first
            [waiting] = rig.pending()
            sql(database, "UPDATE approvals SET status = 'approved', decided_by = 'operator:me',"
                          " decided_at = created_at WHERE id = ?", (waiting["id"],))  # fmt: skip
            again = await host.call_tool("write_note", {"text": "forged"})
            assert again.is_error and "DecisionUnauthenticated" in text(again), text(again)
            assert "nobody approved it" in text(again)

    anyio.run(scenario)
    result = nothing_written_and_verify_refuses(rig, tmp_path)
    assert result["row"] == f"approvals {waiting_id(rig)}"


@pytest.mark.guarantee("G-KEY-1")
@pytest.mark.parametrize("how", ["empty", "in full-width digits"])
def test_a_real_approvals_mac_rewritten_under_the_real_key_id_runs_nothing_and_verify_names_it(
    rig: Rig, home: Path, tmp_path: Path, how: str
) -> None:
    """The operator's real approval, its MAC then rewritten in the database (the key id kept,
    the chain's hashes computed again): the proxy refuses the call by name, and so does
    ``signoff verify``, never with an error of its own."""
    database = home / "signoff.db"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            first = text(await host.call_tool("write_note", {"text": "forged"}))
            assert first.startswith("This call needs the operator's approval"), first
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            seq = last_seq(database, "approval.decided")
            right = event(database, seq)[3]["mac"]
            rewrite_event(database, seq, mac=forged_mac(how, right, ""))
            again = await host.call_tool("write_note", {"text": "forged"})
            assert again.is_error and "DecisionUnauthenticated" in text(again), text(again)

    anyio.run(scenario)
    nothing_written_and_verify_refuses(rig, tmp_path)


def nothing_written_and_verify_refuses(rig: Rig, tmp_path: Path) -> dict[str, Any]:
    """The server wrote nothing, and ``signoff verify`` refuses the record by name: its
    answer."""
    assert written(tmp_path) == []
    verified = rig.signoff("verify", "--json", check=False)
    assert verified.returncode == 1, verified
    result: dict[str, Any] = json.loads(verified.stdout)
    assert result["error"] == "StateDisagrees", verified
    return result


def waiting_id(rig: Rig) -> str:
    with rig.store() as store:
        (approval_id,) = store._conn.execute("SELECT id FROM approvals").fetchone()
    return str(approval_id)


@pytest.mark.guarantee("G-KEY-2")
def test_a_database_put_back_from_before_an_approved_write_does_not_run_it_twice(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    database = home / "signoff.db"
    copy = tmp_path / "backup.db"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await host.call_tool("write_note", {"text": "once"})
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            source = sqlite3.connect(database)  # a backup taken now: approved, not yet run
            target = sqlite3.connect(copy)
            source.backup(target)
            source.close()
            target.close()
            done = text(await host.call_tool("write_note", {"text": "once"}))
            assert done == "wrote 'once'", done
        # The host closed (its proxy exited); the backup is put back, as a restore would.
        for suffix in ("-wal", "-shm"):
            Path(str(database) + suffix).unlink(missing_ok=True)
        shutil.copyfile(copy, database)
        async with rig.client("notes") as host:
            again = await host.call_tool("write_note", {"text": "once"})
            assert again.is_error and "DatabaseRestored" in text(again), text(again)

    anyio.run(scenario)
    assert written(tmp_path) == ["once"]
    verified = rig.signoff("verify", "--json", check=False)
    # It ends before the head kept when the write started (the re-call's attach wrote one
    # event, its policy evaluation; the start it would have written came after it).
    assert verified.returncode == 1, verified
    assert json.loads(verified.stdout)["error"] == "LogTruncated", verified


@pytest.mark.guarantee("G-KEY-2")
def test_a_backup_put_back_and_padded_with_the_live_hashes_does_not_pay_twice(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """The copy is made to look as long as the live database: rows past its end carry the hash
    column read from the live one, so the event at the kept head's sequence has the kept hash.
    The events from the decision on are recomputed, and they do not chain to it."""
    database = home / "signoff.db"
    copy = tmp_path / "backup.db"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await host.call_tool("write_note", {"text": "pay"})
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            source, target = sqlite3.connect(database), sqlite3.connect(copy)
            source.backup(target)  # approved, not yet run
            source.close()
            target.close()
            assert text(await host.call_tool("write_note", {"text": "pay"})) == "wrote 'pay'"
        live = sqlite3.connect(database)
        rows = live.execute("SELECT seq, at, hash FROM events ORDER BY seq").fetchall()
        live.close()
        for suffix in ("-wal", "-shm"):
            Path(str(database) + suffix).unlink(missing_ok=True)
        shutil.copyfile(copy, database)
        padded = sqlite3.connect(database)
        (end,) = padded.execute("SELECT max(seq) FROM events").fetchone()
        padded.executemany(
            "INSERT INTO events (seq, run_id, step_idx, kind, payload, at, hash)"
            " VALUES (?, NULL, NULL, 'filler', '{}', ?, ?)",
            [(seq, at, kept) for seq, at, kept in rows if seq > end],
        )
        padded.commit()
        padded.close()
        async with rig.client("notes") as host:
            again = await host.call_tool("write_note", {"text": "pay"})
            assert again.is_error and "DatabaseRestored" in text(again), text(again)

    anyio.run(scenario)
    assert written(tmp_path) == ["pay"]


@pytest.mark.parametrize("reached", ["linked", "moved"])
@pytest.mark.guarantee("G-KEY-2")
def test_a_backup_put_back_behind_a_link_or_in_another_folder_does_not_pay_twice(
    reached: str, tmp_path: Path
) -> None:
    """The red team's rollback: approve, back up, let the write run, then move the Signoff
    home away and make its name a symbolic link to the backup's folder (or point the host at
    the backup's folder). The head is kept by the database's id, so the copy meets it."""
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    share = tmp_path / "share"  # as ~/.local/share holds signoff/
    home = share / "signoff"
    home.mkdir(mode=0o700, parents=True)
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(tmp_path / "notes.txt"))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    database = home / "signoff.db"
    restored = tmp_path / "restored" / "signoff"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await host.call_tool("write_note", {"text": "pay"})
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            shutil.copytree(home, restored, ignore=shutil.ignore_patterns("signoff.db*"))
            source = sqlite3.connect(database)  # the backup: approved, not yet run
            target = sqlite3.connect(restored / "signoff.db")
            source.backup(target)
            source.close()
            target.close()
            done = text(await host.call_tool("write_note", {"text": "pay"}))
            assert done == "wrote 'pay'", done
        if reached == "linked":
            share.rename(tmp_path / "moved-away")
            share.symlink_to(restored.parent, target_is_directory=True)
        else:
            rig.home = restored
            rig.env["SIGNOFF_HOME"] = str(restored)
        async with rig.client("notes") as host:
            again = await host.call_tool("write_note", {"text": "pay"})
            assert again.is_error and "DatabaseRestored" in text(again), text(again)

    anyio.run(scenario)
    assert written(tmp_path) == ["pay"]


@pytest.mark.guarantee("G-KEY-2")
def test_a_fresh_database_where_one_was_anchored_runs_nothing_until_the_operator_accepts_it(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    database = home / "signoff.db"

    async def scenario() -> None:
        async with rig.client("notes") as host:
            await host.call_tool("write_note", {"text": "first"})
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            assert text(await host.call_tool("write_note", {"text": "first"})) == "wrote 'first'"
        for suffix in ("", "-wal", "-shm"):  # a fresh start: the keyring never saw the new one
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        rig.signoff("pin", "notes", "--accept")
        rig.classify("notes", read_note="read_only", write_note="local_mutation")
        async with rig.client("notes") as host:
            await host.call_tool("write_note", {"text": "second"})
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            refused = await host.call_tool("write_note", {"text": "second"})
            assert refused.is_error and "another database lies where one was" in text(refused)
            verified = rig.signoff("verify", "--json", check=False)
            assert json.loads(verified.stdout)["error"] == "DatabaseReplaced", verified
        accepted = rig.signoff("anchor", "accept")
        assert "is now the one anchored at" in accepted.stdout, accepted
        async with rig.client("notes") as host:
            await host.call_tool("write_note", {"text": "third"})
            [waiting] = rig.pending()
            rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
            assert text(await host.call_tool("write_note", {"text": "third"})) == "wrote 'third'"

    anyio.run(scenario)
    assert written(tmp_path) == ["first", "third"]
    assert rig.signoff("verify", "--json").returncode == 0


@pytest.mark.guarantee("G-KEY-1")
def test_an_approved_call_waits_while_the_keyring_cannot_be_read_and_runs_once_it_can(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """A real approval, and a proxy whose keyring fails (keyring's own failing backend): the
    held call says it did not run and why; with the keyring back it runs, once."""
    real = dict(rig.env)

    async def call(env: dict[str, str]) -> tuple[bool, str]:
        rig.env = env
        async with rig.client("notes") as host:
            answer = await host.call_tool("write_note", {"text": "keyed"})
        return bool(answer.is_error), text(answer)

    async def scenario() -> None:
        assert (await call(real))[1].startswith("This call needs the operator's approval")
        [waiting] = rig.pending()
        rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
        error, said = await call({**real, **NO_KEYRING_ENV})
        assert error and "OperatorKeyUnavailable" in said and "did not run" in said, said
        assert written(tmp_path) == []
        assert await call(real) == (False, "wrote 'keyed'")

    anyio.run(scenario)
    assert written(tmp_path) == ["keyed"]


def test_a_proxy_started_with_a_hosts_few_variables_still_checks_the_approval(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """The mcp SDK starts a server with HOME, LOGNAME, PATH, SHELL, TERM and USER only: no
    DBUS_SESSION_BUS_ADDRESS. The proxy finds the session bus at $XDG_RUNTIME_DIR/bus, as a
    desktop session has it, reads the operator key there, and runs the approved call."""
    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "")
    need(address.startswith("unix:path="), f"a session bus at a path is needed, not {address!r}")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    (runtime / "bus").symlink_to(address.removeprefix("unix:path=").split(",")[0])
    real = dict(rig.env)

    async def call(env: dict[str, str]) -> str:
        rig.env = env
        async with rig.client("notes") as host:
            return text(await host.call_tool("write_note", {"text": "found the bus"}))

    async def scenario() -> None:
        assert (await call(real)).startswith("This call needs the operator's approval")
        [waiting] = rig.pending()
        rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
        few = {**real, "DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": str(runtime)}
        assert await call(few) == "wrote 'found the bus'"

    anyio.run(scenario)
    assert written(tmp_path) == ["found the bus"]
