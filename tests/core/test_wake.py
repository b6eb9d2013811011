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
    not_a_socket = proxies / "2-notasock.sock"
    not_a_socket.write_text("")
    other = proxies / "readme.txt"
    other.write_text("")
    with listener(proxies / "3-a.sock") as one, listener(proxies / "4-b.sock") as two:
        assert wake.wake("approved") is False  # no app; the proxies are woken all the same
        assert one.recv(64) == b"approved" and two.recv(64) == b"approved"
    assert not dead.exists()  # refused: nobody is bound to it, so it is removed
    assert not_a_socket.exists() and other.exists()  # only a dead socket is ever removed


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
    with listener(proxies / "1-a.sock") as proxy:

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
