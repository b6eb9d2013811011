"""Each pytest process's own desktop, so that tests running side by side (``pytest -n``) never
share one: a private HOME with its XDG folders, a SIGNOFF_HOME, an XDG_RUNTIME_DIR, a D-Bus
session bus with gnome-keyring's Secret Service unlocked on it, and an X display (Xvfb).

tests/conftest.py starts one in every process that runs tests (each xdist worker, or the one
pytest process) before any test is collected, and puts it in ``os.environ``: every test and
every process a test starts (``signoff``, a proxy, a mutation's own pytest run) finds these and
nothing of the machine's own desktop. A notification service is per test on this bus
(tests/app/notification_service.py), so it is private too. The daemons die with the process
that started them, even when it is killed (``PR_SET_PDEATHSIG``).

A part whose program is missing is left out, its variable unset, never the machine's own: the
tests that need it skip locally and fail in CI (``tests.conftest.need``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any

from tests.waiting import read_ready_line, wait_for

KEYRING_PASSWORD = b"signoff-tests"
SECRETS = "org.freedesktop.secrets"
SCREEN = "1280x800x24"
# What this module sets; anything of the machine's own desktop not set here is removed.
OWN = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
       "XDG_RUNTIME_DIR", "SIGNOFF_HOME", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY",
       "GNOME_KEYRING_CONTROL")  # fmt: skip
REMOVED = ("WAYLAND_DISPLAY", "XAUTHORITY", "SSH_AUTH_SOCK", "PYTHON_KEYRING_BACKEND")
# GNOME_KEYRING_CONTROL is removed and never set: a gnome-keyring-daemon a test starts on a bus
# of its own would find this one through it and hand it its password instead of starting.


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the process that started it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


class PrivateDesktop:
    """Started by ``start``, ended (its processes and its folder) by ``close``."""

    def __init__(self) -> None:
        # Short, under /tmp: a socket's path holds at most 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="signoff-desk-"))
        self.env: dict[str, str] = {}
        self._processes: list[subprocess.Popen[bytes]] = []
        self._log: IO[bytes] = (self.root / "daemons.log").open("ab")

    def start(self) -> dict[str, str]:
        """The variables of this desktop, also put in ``os.environ``."""
        home = self.root / "home"
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local/state"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "SIGNOFF_HOME": str(home / ".local/share/signoff"),
        }
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
                     "XDG_RUNTIME_DIR"):  # fmt: skip
            Path(env[name]).mkdir(mode=0o700, parents=True)
        for name in (*OWN, *REMOVED):
            os.environ.pop(name, None)
        os.environ.update(env)
        if shutil.which("Xvfb"):
            env["DISPLAY"] = self._start_display()
        if shutil.which("dbus-daemon"):
            env["DBUS_SESSION_BUS_ADDRESS"] = self._start_bus()
            os.environ["DBUS_SESSION_BUS_ADDRESS"] = env["DBUS_SESSION_BUS_ADDRESS"]
            if shutil.which("gnome-keyring-daemon"):
                self._start_secret_service()
        os.environ.update(env)
        self.env = env
        return env

    def close(self) -> None:
        for process in reversed(self._processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
        self._processes.clear()
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # the parts

    def _spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.setdefault("stdout", self._log)
        process = subprocess.Popen(
            argv,
            stdin=kwargs.pop("stdin", subprocess.DEVNULL),
            stderr=self._log,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # runs nothing but prctl
            **kwargs,
        )
        self._processes.append(process)
        return process

    def _start_display(self) -> str:
        read, write = os.pipe()
        try:
            self._spawn(
                ["Xvfb", "-displayfd", str(write), "-screen", "0", SCREEN, "-nolisten", "tcp",
                 "-noreset"],
                pass_fds=(write,),
            )  # fmt: skip
            os.close(write)
            write = -1
            number = read_ready_line(read, "this test process's Xvfb announcing its display")
        finally:
            os.close(read)
            if write != -1:
                os.close(write)
        return f":{number}"

    def _start_bus(self) -> str:
        bus = self._spawn(
            ["dbus-daemon", "--session", "--nofork", "--print-address=1"], stdout=subprocess.PIPE
        )
        assert bus.stdout is not None
        return read_ready_line(bus.stdout.fileno(), "this test process's D-Bus session bus")

    def _start_secret_service(self) -> None:
        # Not $XDG_RUNTIME_DIR/keyring, where a daemon a test starts would look for one running.
        control = self.root / "keyring-control"
        daemon = self._spawn(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets",
             f"--control-directory={control}"],
            stdin=subprocess.PIPE,
        )  # fmt: skip
        assert daemon.stdin is not None
        daemon.stdin.write(KEYRING_PASSWORD)  # --unlock: the new login keyring's password
        daemon.stdin.close()
        wait_for(
            lambda: daemon.poll() is not None or self._has_owner(SECRETS),
            "gnome-keyring's Secret Service on this test process's bus",
        )
        if daemon.poll() is not None:
            raise RuntimeError(f"gnome-keyring-daemon exited ({daemon.returncode}): {self.log()}")

    def _has_owner(self, name: str) -> bool:
        done = subprocess.run(
            ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
             "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", f"string:{name}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        return "boolean true" in done.stdout

    def log(self) -> str:
        self._log.flush()
        return (self.root / "daemons.log").read_text(errors="replace")[-2000:]
