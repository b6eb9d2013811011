"""The rules in force are the configuration Signoff recorded (core/proxy/config_record.py): a
config.toml changed by anyone else (another account, an agent's write, a restored copy, a hand
edit) changes nothing until the operator accepts it, through a real ``signoff proxy``, the real
Secret Service holding the operator key, and the fake server's own log of what it performed."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from core.canonical import JSONValue
from core.store import Store, utc_now
from core.transitions import record_config_change
from tests.conftest import _secret_service_problem, need, run_signoff
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

pytestmark = [pytest.mark.slow, pytest.mark.guarantee("G-CONFIG-2")]

ALLOW_WRITES = '\n[policy]\nlocal_mutation = "allow"\n'
WAITS = "This call needs the operator's approval"


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


def write(rig: Rig, text_: str) -> str:
    async def call() -> str:
        async with rig.client("notes") as host:
            return text(await host.call_tool("write_note", {"text": text_}))

    return anyio.run(call)


def test_a_hand_edit_is_not_taken_up_until_the_operator_accepts_it(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    config = home / "config.toml"
    recorded = config.read_bytes()
    config.write_bytes(recorded + ALLOW_WRITES.encode())  # an agent's write, or a hand edit

    assert write(rig, "edited").startswith(WAITS)  # a proxy started now: the recorded rules
    assert written(tmp_path) == []

    shown = rig.signoff("settings", check=False)  # the rules in force, and a warning
    assert "policy.local_mutation = approve" in shown.stdout
    assert shown.returncode != 0 and "ConfigChangedOutside" in shown.stderr

    diff = rig.signoff("settings", "diff", check=False)
    assert diff.returncode == 1
    assert "differs from the configuration Signoff recorded" in diff.stdout
    assert '+local_mutation = "allow"' in diff.stdout

    # An edit through Signoff is refused: it would record the other change with its own.
    refused = rig.signoff("policy", "read_only", "deny", check=False)
    assert refused.returncode != 0 and "ConfigChangedOutside" in refused.stderr
    assert config.read_bytes() == recorded + ALLOW_WRITES.encode()

    rig.signoff("settings", "restore")
    assert config.read_bytes() == recorded

    config.write_bytes(recorded + ALLOW_WRITES.encode())
    accepted = rig.signoff("settings", "accept")
    assert "accepted" in accepted.stdout
    assert not write(rig, "accepted").startswith(WAITS)
    assert written(tmp_path) == ["accepted"]
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        whys = [
            row[0]
            for row in conn.execute(
                "SELECT json_extract(payload, '$.why') FROM events WHERE kind = 'config.recorded'"
                " ORDER BY seq"
            )
        ]
    assert whys[-1] == "accepted" and "saved" in whys


def test_a_running_proxy_keeps_the_recorded_rules_when_the_file_changes_under_it(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    config = home / "config.toml"
    recorded = config.read_bytes()

    async def scenario() -> list[str]:
        async with rig.client("notes") as host:
            said = [text(await host.call_tool("write_note", {"text": "one"}))]
            config.write_bytes(recorded + ALLOW_WRITES.encode())
            said.append(text(await host.call_tool("write_note", {"text": "two"})))
            os.chmod(config, 0o666)  # noqa: S103  # world-writable: another account's edit
            said.append(text(await host.call_tool("write_note", {"text": "three"})))
            await anyio.to_thread.run_sync(lambda: rig.signoff("settings", "restore"))
            rig.signoff("policy", "local_mutation", "allow")  # the operator's own change
            said.append(text(await host.call_tool("write_note", {"text": "four"})))
            return said

    said = anyio.run(scenario)
    assert [s.startswith(WAITS) for s in said] == [True, True, True, False], said
    assert written(tmp_path) == ["four"]


def test_a_record_forged_in_the_database_is_passed_over(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """The attacker can write the database and the file, but cannot read the keyring."""
    config = home / "config.toml"
    edited = config.read_text() + ALLOW_WRITES
    with Store.open(home / "signoff.db") as store, store.transaction("forged") as tx:
        import hashlib

        payload: dict[str, JSONValue] = {
            "text": edited, "sha256": hashlib.sha256(edited.encode()).hexdigest(),
            "by": "operator:root", "why": "saved", "key": "0" * 16, "mac": "0" * 64,
        }  # fmt: skip
        record_config_change(tx, "config.recorded", payload, at=utc_now())
        unsigned = {k: v for k, v in payload.items() if k not in ("key", "mac")}
        record_config_change(tx, "config.recorded", unsigned, at=utc_now())
    config.write_text(edited)

    assert write(rig, "forged").startswith(WAITS)
    assert written(tmp_path) == []
    diff = rig.signoff("settings", "diff", check=False)
    assert diff.returncode == 1 and '+local_mutation = "allow"' in diff.stdout


def test_a_configuration_that_is_not_the_users_own_is_refused_by_name(home: Path) -> None:
    config = home / "config.toml"
    config.write_text("hold_seconds = 1\n")
    os.chmod(config, 0o666)  # noqa: S103  # the attack under test
    shown = run_signoff("settings", home=home)
    assert shown.returncode != 0 and "UnsafePermissions" in shown.stderr
    assert "chmod go-w" in shown.stderr
    os.chmod(config, 0o600)
    link = home / "elsewhere.toml"
    config.rename(link)
    config.symlink_to(link)
    shown = run_signoff("settings", home=home)
    assert shown.returncode != 0 and "symbolic link" in shown.stderr


def test_a_database_cut_back_to_before_the_latest_record_brings_back_no_older_rules(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """Every record is anchored: cutting the chain back to an older, looser configuration (or to
    none, for "first seen") is a restored database, and nothing runs."""
    import sqlite3

    config = home / "config.toml"
    rig.signoff("policy", "local_mutation", "allow")
    loose = config.read_bytes()
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        cut = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
    rig.signoff("policy", "local_mutation", "approve")  # the operator tightens the rule
    conn = sqlite3.connect(home / "signoff.db")
    conn.execute("DELETE FROM events WHERE seq > ?", (cut,))
    conn.commit()
    conn.close()
    config.write_bytes(loose)

    try:
        said = write(rig, "after the cut")
    except Exception:  # the proxy refused to start: the host sees it end
        said = ""
    assert not said or said.startswith(WAITS), said
    assert written(tmp_path) == []
    assert "DatabaseRestored" in (home / "host-stderr.log").read_text()
