"""``signoff verify`` as a person runs it: the installed command, a real database, exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from core.heads import KeyringHeadStore
from core.store import Store
from tests.app.pending import make_pending
from tests.builders import record_runs
from tests.conftest import NO_KEYRING_ENV, KeyringUnderTest, run_signoff


def _database(home: Path, runs: int = 2) -> Store:
    store = Store.open(home / "signoff.db")
    record_runs(store, runs)
    return store


def test_an_intact_database_exits_0_with_a_one_line_summary(home: Path) -> None:
    _database(home).close()
    done = run_signoff("verify", "--no-keyring", home=home)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("intact: 12 events")


def test_a_broken_chain_exits_1_naming_the_first_bad_event(home: Path) -> None:
    _database(home).close()
    conn = sqlite3.connect(home / "signoff.db")
    conn.execute("UPDATE events SET payload = '{\"edited\":true}' WHERE seq = 4")
    conn.commit()
    conn.close()
    done = run_signoff("verify", "--no-keyring", home=home)
    assert done.returncode == 1
    assert "event 4" in done.stderr
    assert "EventAltered" in done.stderr
    assert done.stdout == ""


def test_no_database_exits_2_and_creates_nothing(home: Path) -> None:
    done = run_signoff("verify", "--json", home=home)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"] == "DatabaseMissing"
    assert list(home.iterdir()) == []


def test_an_unsafe_database_exits_2(home: Path) -> None:
    _database(home).close()
    (home / "signoff.db").chmod(0o666)
    done = run_signoff("verify", "--json", "--no-keyring", home=home)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"] == "UnsafePermissions"


def test_a_missing_keyring_backend_is_reported_not_anchored(home: Path) -> None:
    _database(home).close()
    done = run_signoff("verify", "--json", home=home, env=NO_KEYRING_ENV)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["ok"], result["anchor"], result["events"]) == (True, "keyring unavailable", 12)


def test_no_keyring_skips_the_comparison_even_when_a_head_is_kept(
    home: Path, keyring_under_test: KeyringUnderTest
) -> None:
    with _database(home) as store:
        KeyringHeadStore(keyring_under_test.backend).save(store.head())  # type: ignore[arg-type]
        conn = sqlite3.connect(store.path)  # the second run gone, its rows and its events
        conn.execute("DELETE FROM events WHERE seq > 6")
        conn.execute("DELETE FROM steps WHERE run_id = 'run-2'")
        conn.execute("DELETE FROM runs WHERE id = 'run-2'")
        conn.commit()
        conn.close()
    kept = run_signoff("verify", "--json", home=home, env=keyring_under_test.env)
    assert (kept.returncode, json.loads(kept.stdout)["error"]) == (1, "LogTruncated")
    skipped = run_signoff("verify", "--json", "--no-keyring", home=home, env=keyring_under_test.env)
    assert skipped.returncode == 0
    assert json.loads(skipped.stdout)["anchor"] == "not checked"


def test_no_head_kept_yet_is_said_plainly(home: Path, keyring_under_test: KeyringUnderTest) -> None:
    _database(home).close()
    done = run_signoff("verify", home=home, env=keyring_under_test.env)
    assert done.returncode == 0, done.stderr
    assert "not anchored (no head kept)" in done.stdout


def test_signoff_help_shows_the_commands(home: Path) -> None:
    done = run_signoff("--help", home=home)
    assert done.returncode == 0
    assert "verify" in done.stdout


def test_a_bad_command_is_a_usage_error(home: Path) -> None:
    done = run_signoff("verfy", home=home)
    assert done.returncode == 2


def _decision_state(store: Store, approval_id: str) -> tuple[str, str, int]:
    """The approval's status, its run's status and the number of events."""
    return store._conn.execute(
        "SELECT a.status, r.status, (SELECT COUNT(*) FROM events) FROM approvals a"
        " JOIN runs r ON r.id = a.run_id WHERE a.id = ?",
        (approval_id,),
    ).fetchone()


@pytest.mark.guarantee("G-GATE-1")
def test_a_decision_given_any_hash_but_the_request_hash_is_refused_and_decides_nothing(
    store: Store, home: Path
) -> None:
    approval = make_pending(store)
    (call_hash,) = store._conn.execute(
        "SELECT request_hash FROM steps WHERE run_id = ?", (approval.run_id,)
    ).fetchone()
    before = _decision_state(store, approval.id)
    assert before[:2] == ("pending", "WAITING_FOR_APPROVAL")
    # Another request's hash, and the step's call hash: the hash that is not approved.
    for verb, wrong in (("approve", "0" * 64), ("approve", call_hash), ("reject", call_hash)):
        done = run_signoff(verb, approval.id, "--hash", wrong, home=home)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert "[ApprovalMismatch]" in done.stderr
        assert _decision_state(store, approval.id) == before
    done = run_signoff("approve", approval.id, "--hash", approval.request_hash, home=home)
    assert done.returncode == 0, done.stderr
    assert _decision_state(store, approval.id)[0] == "approved"
