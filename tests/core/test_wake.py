"""Waking whoever waits on the store (core/wake.py): the tray app and every holding proxy, by a
datagram that costs the sender nothing when nobody listens and never fails on a dead proxy."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from core import private_files, wake
from core.approvals import approve, reject
from core.decisions import Decision
from core.errors import UnsafePermissions
from core.store import Store
from tests.conftest import DEEP, ROOT
from tests.core.gatekit import Calls, FakeClock, make_gate, standard_tools

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")


def listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    return sock


def test_wake_reaches_a_listening_app_and_costs_nothing_without_one(home: Path) -> None:
    assert wake.wake("approval") is False  # no app: the send fails at once, quietly
    private_files.make_dir(wake.runtime_dir())
    with listener(wake.socket_path()) as app:
        assert wake.wake("approval") is True
        assert app.recv(64) == b"approval"


def test_wake_reaches_every_holding_proxy_and_removes_a_dead_ones_socket(home: Path) -> None:
    proxies = private_files.make_dir(wake.proxies_dir())
    dead = proxies / "1-deadbeef.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as gone:
        gone.bind(str(dead))  # closed without removing its file, as a killed proxy leaves it
    not_a_socket = proxies / "2-0000000f.sock"
    not_a_socket.write_text("")
    other = proxies / "readme.txt"
    other.write_text("")
    with listener(proxies / "3-0000000a.sock") as one, listener(proxies / "4-0000000b.sock") as two:
        assert wake.wake("approved") is False  # no app; the proxies are woken all the same
        assert one.recv(64) == b"approved" and two.recv(64) == b"approved"
    assert not dead.exists()  # refused: nobody is bound to it, so it is removed
    assert not_a_socket.exists() and other.exists()  # only a dead socket is ever removed


def test_wake_reads_no_folder_that_is_not_a_private_one_of_ours(home: Path, tmp_path: Path) -> None:
    """A symlink in the folder's place, or a folder others may write, is not read: a dead socket
    there is not the proxies' to remove (and none of theirs is there)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    dead = elsewhere / "1-deadbeef.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as gone:
        gone.bind(str(dead))
    proxies = wake.proxies_dir()
    private_files.make_dir(proxies.parent)
    proxies.symlink_to(elsewhere)
    wake.wake("approved")
    assert dead.exists()
    proxies.unlink()
    proxies.mkdir(mode=0o700)
    proxies.chmod(0o777)
    dead.rename(proxies / dead.name)
    wake.wake("approved")
    assert (proxies / dead.name).exists()


def test_a_home_where_the_sockets_fit_keeps_them_in_its_run_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with tempfile.TemporaryDirectory(prefix="so-", dir="/tmp") as short:
        home = Path(short) / "home"
        monkeypatch.setenv("SIGNOFF_HOME", str(home))
        assert wake.runtime_dir() == home / "run"
        assert wake.socket_path() == home / "run" / "wake.sock"
        assert wake.proxies_dir() == home / "run" / "proxies"


def _wake_from_another_process(home: Path, word: str) -> bool:
    """``wake.wake(word)`` run by another process on ``home``, as a proxy a host starts runs it
    (with no ``XDG_RUNTIME_DIR``: decision 0069): whether the app took the datagram."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", f"from core import wake; print(wake.wake({word!r}))"],
        env={**env, "SIGNOFF_HOME": str(home), "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip() == "True"


@pytest.mark.guarantee("G-FILES-3")
def test_a_home_too_deep_for_a_socket_is_woken_through_a_folder_where_every_socket_fits(
    deep_home: Path,
) -> None:
    """With a home that deep, the app's ``bind`` failed ("AF_UNIX path too long") and it would
    not start; a proxy's socket had no place either. Another process (a proxy, ``signoff
    approve``) finds the same folder, and its wake reaches the app and the holding proxy."""
    home = deep_home
    assert len(os.fsencode(str(home / "run" / "wake.sock"))) > wake.SOCKET_PATH_MAX
    folder = wake.make_runtime_dir()
    longest = folder / wake.LONGEST  # a proxy's socket, of the largest process id
    assert len(os.fsencode(str(longest))) <= wake.SOCKET_PATH_MAX, f"{longest} cannot be bound"
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    private_files.make_dir(wake.proxies_dir())
    with listener(wake.socket_path()) as app, listener(longest) as proxy:
        assert _wake_from_another_process(home, "asked") is True
        assert app.recv(64) == b"asked" and proxy.recv(64) == b"asked"


@pytest.mark.guarantee("G-FILES-3")
def test_two_homes_too_deep_for_a_socket_never_share_a_folder_and_one_home_is_one_folder(
    deep_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two homes that differ only past where a path is cut, and one home named through a
    link: the link's is the home's own folder, the other home's is not."""
    other = tmp_path / "other" / DEEP
    other.mkdir(mode=0o700, parents=True)
    (tmp_path / "link").symlink_to(tmp_path)
    folders = []
    for home in (deep_home, other, tmp_path / "link" / DEEP):
        monkeypatch.setenv("SIGNOFF_HOME", str(home))
        folders.append(wake.runtime_dir())
    assert folders[0] != folders[1]
    assert folders[2] == folders[0]
    monkeypatch.setenv("SIGNOFF_HOME", str(deep_home))
    wake.make_runtime_dir()
    with listener(wake.socket_path()) as app:  # the other home's wake is not heard here
        assert _wake_from_another_process(other, "asked") is False
        assert _wake_from_another_process(tmp_path / "link" / DEEP, "mine") is True
        assert app.recv(64) == b"mine"


@pytest.fixture
def fallback_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deep home whose runtime folder is the last fallback, ``signoff-UID/HASH`` under a
    root of the test's own, not the real /tmp (and no /run/user/UID)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    home = home / DEEP
    home.mkdir(mode=0o700)
    monkeypatch.setenv("SIGNOFF_HOME", str(home))
    monkeypatch.setattr(wake, "USER_RUNTIME_ROOT", tmp_path / "no-run-user")
    monkeypatch.setattr(wake, "FALLBACK_ROOT", tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    return home


@pytest.mark.guarantee("G-FILES-3")
@pytest.mark.parametrize("who", ["another-users", "group-writable"])
@pytest.mark.parametrize("which", ["folder", "holder"])
def test_a_fallback_folder_not_the_users_own_private_one_is_refused_by_name(
    fallback_home: Path, tmp_path: Path, which: str, who: str
) -> None:
    """A name under /tmp is one another account can make first: a folder of theirs there, or
    one their group may write, is never used (they could put their own socket in it)."""
    folder = wake.runtime_dir()
    assert folder.parent == tmp_path / "tmp" / f"signoff-{os.geteuid()}"
    wake.make_runtime_dir()
    for made in (folder, folder.parent):
        assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    target = folder if which == "folder" else folder.parent
    if who == "group-writable":
        target.chmod(0o770)
    else:
        os.chown(target, 65534, 65534)  # another account's (the tests run as root in CI)
    for attempt in (wake.make_runtime_dir, wake.check_runtime_dir):
        with pytest.raises(UnsafePermissions) as refused:
            attempt()
        assert str(target) in str(refused.value)  # by name


@pytest.mark.parametrize(("decide", "status"), [(approve, "approved"), (reject, "rejected")])
def test_a_decision_wakes_the_holding_proxies_once_it_is_committed(
    gate_store: Store, home: Path, decide: Any, status: str
) -> None:
    gate = make_gate(gate_store, standard_tools(Calls()), clock=FakeClock())
    verdict = gate.begin("r", "goal").step().propose(Decision.tool_call("push", {"n": 7}))
    assert verdict.approval is not None
    proxies = private_files.make_dir(wake.proxies_dir())
    seen: list[str] = []
    ready = threading.Event()
    with listener(proxies / "1-0000000a.sock") as proxy:

        def read_on_wake() -> None:  # as a holding proxy does, on its own connection
            with Store.open(home / "signoff.db") as other:
                ready.set()
                seen.append(proxy.recv(64).decode())
                with other.snapshot() as conn:
                    seen.append(conn.execute("SELECT status FROM approvals").fetchone()[0])

        reader = threading.Thread(target=read_on_wake)
        reader.start()
        assert ready.wait(30), "the reader never opened the store"
        decide(gate_store, "r", verdict.approval.id, "operator")
        reader.join()
    assert seen == [status, status]  # woken by the decision, and after its commit
