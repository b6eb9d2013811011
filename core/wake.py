"""Waking whoever waits on the store: a datagram on a local socket, fire and forget.

Rules:

1. The tray app listens on ``wake.sock`` in the user's runtime directory (``$SIGNOFF_HOME/run``
   when set), a directory only the user can enter. A proxy holding a call listens on a socket
   of its own in ``proxies/`` there (core/proxy/wakeups.py), for as long as it holds one.
2. ``wake`` sends one datagram to the app and to every proxy socket. It is sent after the
   commit it tells of (an approval decided: core/approvals.py; an approval asked for, a run
   ended: the proxy), never before, so whoever reads the store on it sees that commit.
3. A datagram carries nothing but a word and is never trusted: the one woken reads the store,
   which stays the truth. A forged or lost datagram costs a read, or a wait until the reader's
   own backstop poll.
4. Sending never delays the sender: a socket nobody listens on fails at once and is ignored; a
   proxy socket that refuses (its process died without removing it) is removed; a full queue
   is ignored (its listener has a datagram to read already).
5. Without Unix datagram sockets (Windows) nothing is sent: the app and the proxies poll.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import warnings
from pathlib import Path

import platformdirs

from core import paths

PROXIES = "proxies"  # the folder of the holding proxies' sockets, in the runtime directory
SUFFIX = ".sock"
_NAME = re.compile(r"[0-9]+-[0-9a-f]{8}\.sock")  # PID-RANDOM.sock: core/proxy/wakeups.py


def runtime_dir() -> Path:
    home = os.environ.get("SIGNOFF_HOME")
    if home:
        return Path(home) / "run"
    with warnings.catch_warnings():  # no XDG_RUNTIME_DIR: platformdirs warns of its fallback
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(paths.APP_NAME))


def socket_path() -> Path:
    """The tray app's socket."""
    return runtime_dir() / "wake.sock"


def proxies_dir() -> Path:
    """The folder of the sockets of the proxies holding a call (rule 1)."""
    return runtime_dir() / PROXIES


def wake(reason: str = "changed") -> bool:
    """Tell the app and every holding proxy to read the store (rule 2); True when the app took
    the datagram."""
    if not hasattr(socket, "AF_UNIX"):
        return False  # Windows: the app and the proxies poll the store instead
    word = reason.encode()[:64]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        try:
            sock.sendto(word, str(socket_path()))
            heard = True
        except OSError:
            heard = False
        for path in _proxy_sockets():
            try:
                sock.sendto(word, path)
            except ConnectionRefusedError:
                _remove_stale(path)
            except OSError:  # removed meanwhile, or its queue is full: it will read anyway
                pass
    return heard


def _proxy_sockets() -> list[str]:
    """The proxies' sockets, from a folder that is a real one of ours, private (a symlink, or a
    folder another user could write, is not read: a dead socket there is not ours to remove),
    by the names the proxies give them."""
    folder = proxies_dir()
    try:
        found = os.lstat(folder)
        if not stat.S_ISDIR(found.st_mode) or stat.S_IMODE(found.st_mode) & 0o077:
            return []
        if hasattr(os, "getuid") and found.st_uid != os.getuid():
            return []
        with os.scandir(folder) as entries:
            return [e.path for e in entries if _NAME.fullmatch(e.name)]
    except OSError:  # no proxy ever held a call here
        return []


def _remove_stale(path: str) -> None:
    """A socket nobody is bound to: its proxy died holding a call (rule 4). Only a socket is
    removed, and a second sender finding it gone is not an error."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
