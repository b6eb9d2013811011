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
6. Every socket in the runtime directory has a path that fits a Unix socket's address
   (``SOCKET_PATH_MAX`` bytes), whatever ``SIGNOFF_HOME`` or the runtime directory is: where
   the natural folder (``$SIGNOFF_HOME/run``, else the platform's runtime folder for Signoff)
   is too deep for its longest socket, the runtime directory is ``/run/user/UID/signoff/HASH``
   when ``/run/user/UID`` is the user's own private folder, else ``/tmp/signoff-UID/HASH``,
   HASH naming the natural folder's real path (decision 0074). Every process of one home
   computes the same folder, however the home is spelled and whatever else its environment
   holds; two homes never share one; and the folder and the one holding it must be the user's
   own folders, closed to others (core/private_files.py), or nothing is made or bound there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import stat
import sys
import warnings
from pathlib import Path

import platformdirs

from core import paths, private_files

PROXIES = "proxies"  # the folder of the holding proxies' sockets, in the runtime directory
SUFFIX = ".sock"
_NAME = re.compile(r"[0-9]+-[0-9a-f]{8}\.sock")  # PID-RANDOM.sock: core/proxy/wakeups.py
# The bytes of a socket's path, without its NUL: sun_path holds 104 on macOS and the BSDs, 108
# on Linux.
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" or "bsd" in sys.platform else 107
# The longest name a socket has in the runtime directory: a proxy's, of the largest process id
# a 32-bit pid can hold (rule 6).
LONGEST = f"{PROXIES}/{2**31 - 1}-{'f' * 8}{SUFFIX}"
# Where a runtime directory too deep for its sockets gives way (rule 6): the user's runtime
# folder as systemd-logind makes it, found whatever the environment says (a proxy a host starts
# has no XDG_RUNTIME_DIR: decision 0069), else /tmp/signoff-UID, where a folder of the user's
# own is made, 0700, and refused when it is not: a name another account takes first is not used.
USER_RUNTIME_ROOT = Path("/run/user")
FALLBACK_ROOT = Path("/tmp")  # noqa: S108  # made private and checked, as said above


def natural_runtime_dir() -> Path:
    """The runtime directory where it fits: ``$SIGNOFF_HOME/run``, else the platform's."""
    home = os.environ.get("SIGNOFF_HOME")
    if home:  # as core/paths.py reads it: `~/x` is one home, not a folder named "~"
        return Path(home).expanduser().resolve() / "run"
    with warnings.catch_warnings():  # no XDG_RUNTIME_DIR: platformdirs warns of its fallback
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(paths.APP_NAME))


def runtime_dir() -> Path:
    """The folder of the app's and the proxies' sockets (rules 1 and 6)."""
    return fitting_runtime_dir(natural_runtime_dir())


def fitting_runtime_dir(natural: Path) -> Path:
    """``natural``, or where its sockets go when their paths would not fit there (rule 6): a
    folder that depends on the natural one and the user alone, never on the environment."""
    if not hasattr(os, "geteuid") or _fits(natural):
        return natural  # Windows: no Unix socket is bound there
    # The folder it names, links followed: every spelling of one home is one home.
    digest = hashlib.sha256(os.fsencode(os.path.realpath(natural))).hexdigest()[:32]
    uid = os.geteuid()
    user = USER_RUNTIME_ROOT / str(uid)
    with contextlib.suppress(OSError):
        found = os.lstat(user)
        private = stat.S_ISDIR(found.st_mode) and not found.st_mode & 0o077
        if private and found.st_uid == uid and _fits(user / paths.APP_NAME / digest):
            return user / paths.APP_NAME / digest
    return FALLBACK_ROOT / f"{paths.APP_NAME}-{uid}" / digest


def socket_folders() -> tuple[Path, ...]:
    """Every folder Signoff's sockets may be in for this user (rule 6): the runtime directory
    in use, and the folders its fallbacks are made in, whatever the home. They are Signoff's
    own files (core/policy/own_files.py): a call that writes there can take the app's place."""
    found = [runtime_dir()]
    if hasattr(os, "geteuid"):
        uid = os.geteuid()
        found += [USER_RUNTIME_ROOT / str(uid) / paths.APP_NAME,
                  FALLBACK_ROOT / f"{paths.APP_NAME}-{uid}"]  # fmt: skip
    return tuple(found)


def _fits(folder: Path) -> bool:
    return len(os.fsencode(str(folder / LONGEST))) <= SOCKET_PATH_MAX


def make_runtime_dir() -> Path:
    """The runtime directory, made 0700 where missing and checked: the user's own folder,
    closed to others, and so is the one holding it when it is a fallback (rule 6);
    ``UnsafePermissions`` naming the folder otherwise."""
    natural = natural_runtime_dir()
    folder = fitting_runtime_dir(natural)
    if folder != natural:
        private_files.make_dir(folder.parent)
    return private_files.make_dir(folder)


def check_runtime_dir() -> Path:
    """``make_runtime_dir``'s checks, making nothing: ``UnsafePermissions`` or ``OSError``
    (missing) when the runtime directory or, for a fallback, the folder holding it fails."""
    natural = natural_runtime_dir()
    folder = fitting_runtime_dir(natural)
    if folder != natural:
        private_files.check(folder.parent, "folder", kind=stat.S_ISDIR)
    private_files.check(folder, "runtime folder", kind=stat.S_ISDIR)
    return folder


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
