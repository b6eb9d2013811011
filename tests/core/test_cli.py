"""``signoff verify`` as a person runs it: the installed command, a real database, exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from core.heads import KeyringHeadStore
from core.store import Store
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
    conn.execute("UPDATE events SET payload = '{}' WHERE seq = 4")
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
        KeyringHeadStore(keyring_under_test.backend).save(  # type: ignore[arg-type]
            store.path, store.head()
        )
        conn = sqlite3.connect(store.path)
        conn.execute("DELETE FROM events WHERE seq > 6")
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
