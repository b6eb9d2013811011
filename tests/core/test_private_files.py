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
from tests.conftest import need, run_signoff
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


# Each mode writable by the group alone, or by others alone: a check of one set of bits is
# caught by the other's cases (the "others" cases alone let a group-writable file through).
GROUP_ONLY_FILE, OTHERS_ONLY_FILE = (0o620, 0o660, 0o670), (0o602, 0o606, 0o607)
GROUP_ONLY_FOLDER, OTHERS_ONLY_FOLDER = (0o720, 0o730, 0o770), (0o702, 0o703, 0o707)
ANOTHER_USER = 65534  # nobody


@pytest.mark.guarantee("G-FILES-1")
@pytest.mark.parametrize("mode", GROUP_ONLY_FILE + OTHERS_ONLY_FILE, ids=oct)
def test_a_state_file_its_group_alone_or_others_alone_can_write_is_refused(
    mode: int, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    private_files.write_text(path, "[1]")
    path.chmod(0o644)  # read by all, written by its owner: Signoff's own
    assert private_files.read_text(path) == "[1]"
    path.chmod(mode)
    with pytest.raises(UnsafePermissions):
        private_files.read_text(path)
    with pytest.raises(UnsafePermissions):
        private_files.read_bytes(path, "configuration")


@pytest.mark.guarantee("G-FILES-1")
@pytest.mark.parametrize("mode", GROUP_ONLY_FOLDER + OTHERS_ONLY_FOLDER, ids=oct)
def test_a_folder_its_group_alone_or_others_alone_can_write_is_refused_and_nothing_written(
    mode: int, tmp_path: Path
) -> None:
    """A folder Signoff uses (made by it or found), and the app's run folder as it is checked
    before the instance socket in it is spoken to (app/main.py)."""
    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert private_files.make_dir(folder) == folder
    folder.chmod(mode)
    with pytest.raises(UnsafePermissions):
        private_files.make_dir(folder)
    with pytest.raises(UnsafePermissions):
        private_files.write_text(folder / "state.json", "{}")
    with pytest.raises(UnsafePermissions):
        private_files.open_log(folder / "app.log")
    with pytest.raises(UnsafePermissions):
        private_files.check(folder, "runtime folder", kind=stat.S_ISDIR)
    assert list(folder.iterdir()) == []


@pytest.mark.guarantee("G-FILES-1")
@pytest.mark.parametrize("mode", [GROUP_ONLY_FILE[0], OTHERS_ONLY_FILE[0]], ids=oct)
def test_an_alarm_file_its_group_alone_or_others_alone_can_write_raises_the_alarm(
    mode: int, store: Store, tmp_path: Path
) -> None:
    alarm = tmp_path / "alarm.json"
    private_files.write_text(alarm, '{"alarm": "", "seq": 0}')
    alarm.chmod(mode)
    assert "[AlarmFile]" in Witness(store, MemoryHeadStore(), alarm).state.alarm


@pytest.mark.guarantee("G-FILES-1")
def test_a_state_file_alarm_or_folder_of_another_user_is_refused_even_when_owner_only(
    store: Store, tmp_path: Path
) -> None:
    need(os.geteuid() == 0, "only root can give a file to another user")
    state, alarm, folder = tmp_path / "state.json", tmp_path / "alarm.json", tmp_path / "data"
    private_files.write_text(state, "[1]")
    private_files.write_text(alarm, '{"alarm": "", "seq": 0}')
    private_files.make_dir(folder)
    for path in (state, alarm, folder):
        os.chown(path, ANOTHER_USER, ANOTHER_USER)
        assert _mode(path) & 0o077 == 0  # the modes are right: only the owner is wrong
    with pytest.raises(UnsafePermissions):
        private_files.read_text(state)
    assert "[AlarmFile]" in Witness(store, MemoryHeadStore(), alarm).state.alarm
    with pytest.raises(UnsafePermissions):
        private_files.make_dir(folder)
    with pytest.raises(UnsafePermissions):
        private_files.check(folder, "runtime folder", kind=stat.S_ISDIR)
