"""Proxies that cannot reach the OS keyring, told to the tray (decision 0069).

A proxy has no window: one started where no OS keyring can be reached refuses every call, and
only the host's model would read why. The operator must see it in the tray, with which proxy and
which host.

Rules:

1. A proxy whose rules cannot be established because the OS keyring cannot be reached
   (``KeyringUnreachable``: no session bus, no Secret Service answering, a locked keyring), or
   that reaches another keyring than the one the chain records as holding the operator key
   (its approved calls wait, ``KeyringChanged``, decision 0066), writes
   ``<data dir>/unreachable/<pid>.json``: its servers, the process that launched it (the
   host: its command name and pid), why, and when; then wakes the app. The file is removed when
   the proxy ends; a proxy that reaches the keyring writes none.
2. The tray reads the folder on every refresh and sweep; a file whose proxy is no longer
   running is removed and not shown (a proxy killed before it removed its own); a file that
   is not Signoff's own (core/private_files.py rule 3) or not readable is not shown.
3. Best effort, as the servers' status (core/proxy/status.py rule 1): a note that cannot be
   written is logged, never raised; the call it is about is refused whatever the note says.
   A note forged by a process of the user's own account can raise a false alarm or hide one
   (by removing it), no more: the proxy refuses the calls either way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from core import private_files, wake
from core.errors import SignoffError, UnsafePermissions
from core.store import Store, utc_now

log = logging.getLogger("signoff.proxy")
FOLDER = "unreachable"
_NAME = re.compile(r"[0-9]+\.json")


@dataclass(frozen=True)
class Unreachable:
    """A running proxy that cannot reach the OS keyring."""

    pid: int
    servers: tuple[str, ...]
    host: str  # the launching process, as "COMMAND (process PID)"
    why: str  # "cannot reach the OS keyring: no session bus"
    at: str

    def words(self) -> str:
        names = " ".join(self.servers) or "(no server)"
        return f"signoff proxy {names} started by {self.host} {self.why}"


def another_keyring(store: Store) -> str:
    """Why this process's keyring is not the one the chain records, in the note's words
    ("reaches X, not Y, ..."); "" when it is, when either records none, or when it cannot say."""
    from core import operator_key

    try:
        with store.snapshot() as conn:
            recorded = operator_key.recorded_keyring(conn)
        used = operator_key.default().keys.keyring()
    except SignoffError:
        return ""
    if (
        recorded is None
        or used is None
        or recorded == used
        or used.startswith("keyring.backends.fail")
    ):
        return ""  # none at all is the other note's: it cannot be reached
    return (
        f"reaches the keyring {used}, not {recorded}, the one the chain records: its approved"
        " calls wait until the operator confirms it (signoff decisions keyring accept)"
    )


def note_path(data_dir: Path, pid: int | None = None) -> Path:
    return data_dir / FOLDER / f"{os.getpid() if pid is None else pid}.json"


def record(data_dir: Path, servers: list[str], why: str, launcher: int | None = None) -> None:
    """This proxy cannot reach the keyring (rule 1): noted, and the app woken."""
    ppid = os.getppid() if launcher is None else launcher
    note = {"pid": os.getpid(), "servers": servers, "host": f"{_command(ppid)} (process {ppid})",
            "why": why, "at": utc_now()}  # fmt: skip
    try:
        private_files.write_text(note_path(data_dir), json.dumps(note, ensure_ascii=False))
    except (OSError, UnsafePermissions) as e:
        log.warning("could not tell the tray this proxy cannot reach the keyring: %s", e)
        return
    wake.wake("keyring")


def clear(data_dir: Path) -> None:
    """This proxy's note, gone (it ends, or it reaches the keyring)."""
    with contextlib.suppress(OSError):
        note_path(data_dir).unlink(missing_ok=True)


def read(data_dir: Path) -> tuple[Unreachable, ...]:
    """The running proxies that cannot reach the keyring (rule 2), oldest first."""
    folder = data_dir / FOLDER
    try:
        names = sorted(p.name for p in folder.iterdir() if _NAME.fullmatch(p.name))
    except OSError:
        return ()
    found = []
    for name in names:
        path = folder / name
        try:
            text = private_files.read_text(path, "keyring note")
            value = json.loads(text or "")
            note = Unreachable(int(value["pid"]), tuple(str(s) for s in value["servers"]),
                               str(value["host"]), str(value["why"]), str(value["at"]))  # fmt: skip
        except (OSError, UnsafePermissions, ValueError, KeyError, TypeError) as e:
            log.warning("a note of a proxy's keyring at %s is not read: %s", path, e)
            continue
        if name != f"{note.pid}.json" or not _running(note.pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        found.append(note)
    return tuple(sorted(found, key=lambda n: n.at))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: not a proxy of ours
        return False
    return True


def _command(pid: int) -> str:
    """The launching process's command name, where the OS tells it (Linux)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "a host"
