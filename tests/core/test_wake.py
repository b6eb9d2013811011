"""Waking whoever waits on the store (core/wake.py): the tray app and every holding proxy, by a
datagram that costs the sender nothing when nobody listens and never fails on a dead proxy."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from core import private_files, wake
from core.approvals import approve, reject
from core.decisions import Decision
from core.store import Store
from tests.core.gatekit import Calls, FakeClock, make_gate, standard_tools

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")


def listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    return sock


def test_wake_reaches_a_listening_app_and_costs_nothing_without_one(home: Path) -> None:
    assert wake.socket_path() == home / "run" / "wake.sock"
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
