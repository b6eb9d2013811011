"""Signoff's own files and folders (core/private_files.py): owner-only when made, refused when
not what Signoff made, and the state files an agent could replace never silence the alarm."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from core import private_files
from core.errors import UnsafePermissions
from core.heads import MemoryHeadStore
from core.store import Store
from core.witness import Witness
from tests.builders import record_runs
from tests.conftest import run_signoff
from tests.core.test_store import _umask
from tests.proxy.rig import FAKE_SERVER, NOTES_TOOLS


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.guarantee("G-FILES-1")
def test_every_level_of_a_folder_made_is_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    with _umask(0):
        private_files.make_dir(deep)
        private_files.write_text(deep / "state.json", "{}")
    assert [_mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", deep)] == [0o700] * 3
    assert _mode(deep / "state.json") == 0o600
    assert [p.name for p in deep.iterdir()] == ["state.json"]  # no temporary left behind


@pytest.mark.guarantee("G-FILES-1")
def test_the_documented_first_run_makes_the_data_folder_owner_only(tmp_path: Path) -> None:
    """``signoff servers add`` then ``signoff pin``, in a home that does not exist yet, with a
    umask of 0: every folder and file Signoff made is the user's alone (the data folder came
    out 0755 when the configuration's folder made it)."""
    home = tmp_path / "not-yet" / "home"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"listing": json.dumps(NOTES_TOOLS)}))
    server = [sys.executable, str(FAKE_SERVER), str(script)]
    with _umask(0):
        run_signoff("servers", "add", "notes", "--", *server, home=home, ok=True)
        run_signoff("pin", "notes", "--accept", home=home, ok=True)
    made = [tmp_path / "not-yet", *sorted(home.rglob("*")), home]
    loose = {
        str(p.relative_to(tmp_path)): oct(_mode(p))
        for p in made
        if _mode(p) & 0o077 and not p.name.endswith((".db-shm", ".db-wal"))
    }
    assert loose == {}
    assert (home / "config.toml").exists()


@pytest.mark.guarantee("G-FILES-1")
@pytest.mark.parametrize("case", ["folder", "symlink", "group-writable", "garbage"])
def test_an_alarm_file_that_is_not_signoffs_raises_the_alarm(
    case: str, store: Store, tmp_path: Path
) -> None:
    """An agent that can write the data folder (a ``create_directory`` is enough) made a folder
    named alarm.json: the alarm was read as none and could not be kept (the tray stayed green),
    and the app would not start. Now each such file is an alarm, never silence."""
    alarm = tmp_path / "alarm.json"
    if case == "folder":
        alarm.mkdir()
    elif case == "symlink":
        (tmp_path / "elsewhere.json").write_text("{}")
        alarm.symlink_to(tmp_path / "elsewhere.json")
    elif case == "group-writable":
        alarm.write_text('{"alarm": "x", "seq": 1}')
        alarm.chmod(0o666)
    else:
        alarm.write_text("not json")
    witness = Witness(store, MemoryHeadStore(), alarm)
    assert "[AlarmFile]" in witness.state.alarm
    record_runs(store, 1)
    assert witness.check_all().alarm  # the alarm stays until acknowledged
    if case == "folder":
        # An edit found while the folder is there is raised all the same, saying it is not kept.
        conn = sqlite3.connect(store.path)
        conn.execute("UPDATE events SET payload = '{}' WHERE seq = 1")
        conn.commit()
        conn.close()
        witness.state = Witness.remembered(tmp_path / "none.json")
        state = witness.check_all()
        assert "not kept for the next start" in state.alarm
        assert "cannot be removed" in witness.acknowledge().alarm


@pytest.mark.guarantee("G-FILES-1")
def test_a_state_file_read_refuses_what_signoff_did_not_write(tmp_path: Path) -> None:
    assert private_files.read_text(tmp_path / "missing.json") is None
    real = tmp_path / "real.json"
    private_files.write_text(real, "[1]")
    assert private_files.read_text(real) == "[1]"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    loose = tmp_path / "loose.json"
    loose.write_text("[2]")
    loose.chmod(0o622)
    fifo = tmp_path / "fifo.json"  # would hang a reader that opened it blocking
    os.mkfifo(fifo, 0o600)
    for path in (link, folder, loose, fifo):
        with pytest.raises(UnsafePermissions):
            private_files.read_text(path)
