"""A proxy started by a host that passes no session bus (the mcp SDK's client passes only HOME,
LOGNAME, PATH, SHELL, TERM and USER), on a session whose bus is not at the standard place: the
test command's dbus-run-session bus is at a random /tmp path, and XDG_RUNTIME_DIR points at an
empty folder. A real ``signoff proxy``, the real Secret Service holding the operator key, a real
tray app (offscreen) on the same home (decision 0069)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from PySide6.QtWidgets import QApplication

from app.tray import TrayApp
from core import session_bus
from core.heads import MemoryHeadStore
from tests.conftest import _secret_service_problem, need
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

pytestmark = pytest.mark.slow
STRIPPED = ("DBUS_SESSION_BUS_ADDRESS",)  # what the host does not pass


@pytest.fixture
def rig(home: Path, tmp_path: Path) -> Rig:
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS, notes=str(tmp_path / "notes.txt"))
    rig.pin("notes")  # recorded signed: the operator key is in the Secret Service now
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    empty = tmp_path / "runtime"
    empty.mkdir(mode=0o700)
    rig.env["XDG_RUNTIME_DIR"] = str(empty)  # no bus at the standard place
    return rig


@pytest.fixture
def tray(rig: Rig, home: Path, qtbot: object) -> Iterator[TrayApp]:
    with rig.store() as store:
        app = TrayApp(store, MemoryHeadStore(), home, native=False)
        app.start()  # leaves this session's bus address in home/run/session-bus
        yield app
        app.stop()


def written(tmp_path: Path) -> list[str]:
    notes = tmp_path / "notes.txt"
    return notes.read_text().splitlines() if notes.exists() else []


async def write_approved(rig: Rig) -> str:
    """``write_note`` through a stripped proxy: asked, approved by the operator, called again."""
    async with rig.client("notes", drop=STRIPPED) as host:
        first = text(await host.call_tool("write_note", {"text": "once"}))
        if not first.startswith("This call needs the operator's approval"):
            return first
        [waiting] = rig.pending()
        rig.signoff("approve", waiting["id"], "--hash", waiting["hash"])
        return text(await host.call_tool("write_note", {"text": "once"}))


async def until(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Qt's events handled (the tray's wake socket among them) until ``condition`` holds."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        QApplication.processEvents()
        await anyio.sleep(0.02)


@pytest.mark.guarantee("G-KEY-4")
def test_a_proxy_without_the_session_bus_finds_the_one_the_app_left_and_an_approved_call_runs(
    rig: Rig, tray: TrayApp, tmp_path: Path
) -> None:
    assert session_bus.left() == os.environ["DBUS_SESSION_BUS_ADDRESS"]
    said = anyio.run(write_approved, rig)
    assert written(tmp_path) == ["once"], said
    assert tray.unreachable == ()


@pytest.mark.guarantee("G-KEY-4")
def test_a_proxy_that_cannot_reach_the_keyring_names_why_and_the_tray_shows_it_and_its_host(
    rig: Rig, tray: TrayApp, tmp_path: Path
) -> None:
    """No address left (the app could not leave one): the call is refused naming the cause, not
    "no operator key"; the tray is an alarm naming the proxy and its host within seconds, and
    once the proxy that reaches the keyring is started instead, the alarm is gone."""
    session_bus.left_path().unlink()

    async def refused() -> None:
        async with rig.client("notes", drop=STRIPPED) as host:
            answer = await host.call_tool("write_note", {"text": "once"})
            said = text(answer)
            assert answer.is_error and "[NoKeyringAnswers]" in said, said
            assert "cannot reach the OS keyring: no session bus" in said, said
            await until(lambda: bool(tray.unreachable))
            [note] = tray.unreachable
            assert note.servers == ("notes",) and f"(process {os.getpid()})" in note.host
            _, alarm = tray.said[-1]
            assert alarm.startswith(f"signoff proxy notes started by {note.host} cannot reach"
                                    " the OS keyring: no session bus"), alarm  # fmt: skip
            assert "cannot reach the OS keyring" in tray.tray.toolTip()
            menu = [a.text() for a in tray.menu.actions()]
            assert any(t.startswith("Alarm: signoff proxy notes started by") for t in menu), menu

    anyio.run(refused)
    assert written(tmp_path) == []
    tray.leave_session_bus()  # the app, started again in this session
    said = anyio.run(write_approved, rig)
    assert written(tmp_path) == ["once"], said
    tray.sweep()
    assert tray.unreachable == ()
    assert "cannot reach" not in tray.tray.toolTip()


def plant(how: str, tmp_path: Path) -> Path | None:
    """A session bus file the app did not leave, naming a bus that answers; a folder to remove
    afterwards, when one was made outside ``tmp_path``."""
    real = os.environ["DBUS_SESSION_BUS_ADDRESS"]
    path = session_bus.left_path()
    path.unlink()
    if how == "open to others":
        path.write_text(real)
        path.chmod(0o644)
    elif how == "a link":
        elsewhere = tmp_path / "planted"
        elsewhere.write_text(real)
        elsewhere.chmod(0o600)
        path.symlink_to(elsewhere)
    else:  # a socket of another user's, in a folder of theirs
        if os.geteuid() != 0:
            pytest.skip("giving a socket to another user takes root")
        # A short folder of its own: a socket's path has at most 107 bytes, and the mutation
        # runs' temporary folders are long.
        theirs = Path(tempfile.mkdtemp(prefix="sb-", dir="/tmp"))
        theirs.chmod(0o755)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(theirs / "bus"))
        os.chown(theirs / "bus", 65534, 65534)
        listener.close()
        path.write_text(f"unix:path={theirs / 'bus'}")
        path.chmod(0o600)
        return theirs
    return None


@pytest.mark.guarantee("G-KEY-4")
@pytest.mark.parametrize("how", ["open to others", "a link", "another user's socket"])
def test_a_session_bus_file_the_app_did_not_leave_is_not_used(
    rig: Rig, tray: TrayApp, tmp_path: Path, how: str
) -> None:
    planted = plant(how, tmp_path)
    try:
        said = anyio.run(write_approved, rig)
    finally:
        if planted is not None:
            shutil.rmtree(planted, ignore_errors=True)
    assert "cannot reach the OS keyring: no session bus" in said, said
    assert written(tmp_path) == []


@pytest.mark.guarantee("G-KEY-4")
def test_a_left_bus_address_with_escapes_is_not_used(tmp_path: Path) -> None:
    """D-Bus decodes ``%XX`` in a path: the socket checked would not be the one connected to."""
    from core.errors import SessionBusRefused
    from core.session_bus import socket_of

    with pytest.raises(SessionBusRefused, match="escapes"):
        socket_of(f"unix:path={tmp_path}/bus%2e2")


@pytest.mark.guarantee("G-KEY-3")
def test_a_proxy_reaching_another_keyring_than_the_recorded_one_is_shown_in_the_tray(
    rig: Rig, tray: TrayApp, tmp_path: Path
) -> None:
    """The chain records the Secret Service (the first signed decision). A proxy whose host
    entry names another keyring (PYTHON_KEYRING_BACKEND) runs nothing approved, and the tray
    says which proxy, started by which host, and which keyring it reached."""
    said = anyio.run(write_approved, rig)
    assert written(tmp_path) == ["once"], said
    rig.env["PYTHON_KEYRING_BACKEND"] = "keyrings.alt.file.PlaintextKeyring"
    rig.env["XDG_DATA_HOME"] = str(tmp_path / "plaintext")

    async def shown() -> None:
        async with rig.client("notes") as host:
            again = await host.call_tool("write_note", {"text": "twice"})
            assert again.is_error or "approval" in text(again), text(again)
            await until(lambda: bool(tray.unreachable))
            [note] = tray.unreachable
            assert "reaches the keyring keyrings.alt.file.PlaintextKeyring" in note.words()
            assert "keyring.backends.SecretService.Keyring, the one the chain records" in (
                note.words()
            )

    anyio.run(shown)
    assert written(tmp_path) == ["once"]
