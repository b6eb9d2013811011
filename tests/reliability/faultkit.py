"""What the fault suites share: a small disk and ballast to fill it, processes found by their
command line, waits on conditions with deadlines, a host's side of ``signoff proxy``, a Secret
Service that can be stopped, and the tray app started as a person starts it.

Nothing here sleeps to wait for something: every wait polls a condition until a deadline and
fails naming what it waited for.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, TypeVar

from mcp.client.session import ClientSession

from core import wake
from tests import host
from tests.conftest import SIGNOFF, need, run_signoff
from tests.proxy.test_hostile import Fake
from tests.waiting import WAIT, read_ready_line, until, wait_for

T = TypeVar("T")
__all__ = ["WAIT", "until", "wait_for"]  # the waits, for the suites that import them from here


# --- a small disk --------------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (0700, ours), unmounted afterwards. Root only:
    ``need()`` skips a local run as another user, and fails in CI."""
    need(os.geteuid() == 0, "mounting a small tmpfs needs root (CI runs as root)")
    need(shutil.which("mount") is not None, "the mount command is missing")
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    need(mounted.returncode == 0, f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        done = subprocess.run(["umount", str(where)], capture_output=True, timeout=30, check=False)
        if done.returncode != 0:  # a process of the test still had a file open there
            subprocess.run(["umount", "-l", str(where)], timeout=30, check=False)


def fill(disk: Path, name: str = "ballast") -> Path:
    """A file that takes every free block of ``disk``; deleting it frees them again."""
    ballast = disk / name
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (b"\0" * (1 << 20), b"\0" * 4096, b"\0"):
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    assert shutil.disk_usage(disk).free == 0, shutil.disk_usage(disk)
    return ballast


# --- processes -----------------------------------------------------------------------------


def pids_of(marker: str) -> list[int]:
    """The live processes whose command line holds ``marker`` (a path unique to one test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # ended meanwhile
        if state != "Z" and any(marker.encode() in arg for arg in argv):
            found.append(int(entry.name))
    return sorted(found)


def gone(pid: int) -> bool:
    """The process has exited and was reaped, or is a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: gone(pid), f"process {pid} ending after SIGKILL")


def upstream_pid(fake: Fake) -> int:
    """The one running process of this fake server (its script path is unique to the test)."""
    pids = wait_for(lambda: pids_of(str(fake.path)), f"server {fake.name} running")
    assert len(pids) == 1, pids
    return pids[0]


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


# --- reading the record from outside -------------------------------------------------------


def query(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the database read-only, as another process would (works on a full disk too)."""
    uri = f"file:{home / 'signoff.db'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        return conn.execute(sql, params).fetchall()


def read_fifo(path: Path, expected: bytes, timeout: float = WAIT) -> bytes:
    """Open a named pipe for reading and read until ``expected`` came through.

    A writer blocked opening it (the fake server's side effect) goes on once this opens it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    try:
        deadline = time.monotonic() + timeout
        while expected not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{path}: {expected!r} did not come within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                data += os.read(fd, 65536)
    finally:
        os.close(fd)
    return data


# --- the host's side -----------------------------------------------------------------------


@asynccontextmanager
async def proxy_session(
    home: Path, *names: str, hold: float, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """``signoff proxy NAMES --hold HOLD`` started by the mcp SDK's client, as a host does;
    ``env``: more variables (the keyring of the app its decisions come from)."""
    async with host.proxy_session(home, *names, hold=hold, env=env) as session:
        yield session


# --- a Secret Service that can be stopped --------------------------------------------------

PRIVATE_BUS = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
SECRETS = "org.freedesktop.secrets"


class SecretServiceDaemon:
    """gnome-keyring's Secret Service on a D-Bus session bus of its own, its keyrings in
    ``root``. The bus has no service directories, so a stopped daemon stays stopped (the
    session bus would start another one on the next call); started again, it unlocks the
    same login keyring, with what was kept in it."""

    PASSWORD = b"signoff-fault-tests"

    def __init__(self, root: Path) -> None:
        for tool in ("dbus-daemon", "dbus-send", "gnome-keyring-daemon"):
            need(shutil.which(tool) is not None, f"{tool} is not installed (make test installs it)")
        self.root = root
        (root / "data").mkdir(mode=0o700, parents=True, exist_ok=True)
        (root / "bus.conf").write_text(PRIVATE_BUS)
        self._log = (root / "daemons.log").open("ab")
        self._bus = subprocess.Popen(
            ["dbus-daemon", f"--config-file={root / 'bus.conf'}", "--nofork",
             "--print-address=1"],
            stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert self._bus.stdout is not None
        self.address = read_ready_line(self._bus.stdout.fileno(), "dbus-daemon's address")
        self._daemon: subprocess.Popen[bytes] | None = None
        self._starts = 0

    def start(self) -> None:
        # A runtime folder per start: a stopped daemon may leave its control socket behind,
        # and the next one, finding the name taken, would exit at once.
        self._starts += 1
        runtime = self.root / f"runtime-{self._starts}"
        runtime.mkdir(mode=0o700)
        env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": self.address,
               "XDG_DATA_HOME": str(self.root / "data"),
               "XDG_RUNTIME_DIR": str(runtime)}  # fmt: skip
        daemon = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
            stdin=subprocess.PIPE, stdout=self._log, stderr=self._log, env=env,
        )  # fmt: skip
        assert daemon.stdin is not None
        daemon.stdin.write(self.PASSWORD)  # --unlock reads the login keyring's password
        daemon.stdin.close()
        self._daemon = daemon
        wait_for(lambda: self.serving() or daemon.poll() is not None, "the Secret Service")
        if daemon.poll() is not None:
            self._log.flush()
            said = (self.root / "daemons.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"gnome-keyring-daemon exited ({daemon.returncode}):\n{said}")

    def stop(self) -> None:
        """As when the daemon goes away: it is ended, and its name leaves the bus."""
        daemon, self._daemon = self._daemon, None
        if daemon is not None:
            daemon.terminate()
            daemon.wait(WAIT)
        wait_for(lambda: not self.serving(), "the Secret Service leaving the bus")

    def serving(self) -> bool:
        done = subprocess.run(
            ["dbus-send", f"--bus={self.address}", "--print-reply",
             "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus.NameHasOwner", f"string:{SECRETS}"],
            capture_output=True, text=True, timeout=WAIT, check=False,
        )  # fmt: skip
        return "boolean true" in done.stdout

    def close(self) -> None:
        for process in (self._daemon, self._bus):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(WAIT)
        if self._bus.stdout is not None:
            self._bus.stdout.close()
        self._log.close()

    def __enter__(self) -> SecretServiceDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the tray app, as a person starts it ---------------------------------------------------


class App:
    """The installed ``signoff`` with no arguments (offscreen), its output in a log file; its
    keyring is keyrings.alt's file backend in the test's directory."""

    def __init__(self, home: Path, root: Path) -> None:
        self.home = home
        self.output = root / "app-output.log"
        (root / "keyring").mkdir(mode=0o700, exist_ok=True)
        # No session bus: no notification daemon is started for it; the app falls back to
        # its popup.
        environ = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        self.keyring_env = {"PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
                            "XDG_DATA_HOME": str(root / "keyring")}  # fmt: skip
        self.env = {**environ, "SIGNOFF_HOME": str(home), "QT_QPA_PLATFORM": "offscreen",
                    **self.keyring_env}  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.output.open("ab") as out:
            self.process = subprocess.Popen([str(SIGNOFF)], env=self.env, stdout=out,
                                            stderr=out, stdin=subprocess.DEVNULL)  # fmt: skip
        process = self.process

        def listening() -> bool:
            assert process.poll() is None, f"the app exited: {self.log()}"
            return listens(wake_socket(self.home))

        wait_for(listening, "the app listening on its wake-up socket")

    def kill(self) -> None:
        assert self.process is not None
        kill(self.process.pid)
        self.process.wait(WAIT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(WAIT)

    def log(self) -> str:
        """What the app printed, then its log (where desktop-notifier logs its failed sends,
        with their tracebacks, when no notification service answers)."""
        logged = self.home / "logs" / "app.log"
        return self.printed() + (logged.read_text(errors="replace") if logged.exists() else "")

    def printed(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def notified(self) -> list[str]:
        path = self.home / "notified.json"
        return json.loads(path.read_text()) if path.exists() else []

    def signoff(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_signoff(*args, env=self.env, timeout=WAIT)


def wake_socket(home: Path) -> Path:
    """The app's wake socket for ``home``, where its path fits (core/wake.py rule 6)."""
    return wake.fitting_runtime_dir(home / "run") / "wake.sock"


def listens(path: Path) -> bool:
    """A process is bound to this datagram socket (a file left by a dead one refuses)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        try:
            probe.sendto(b"probe", str(path))
        except OSError:
            return False
    return True
