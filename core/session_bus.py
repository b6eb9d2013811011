"""The desktop session's bus, left by the app for a proxy started without it (decision 0069).

An MCP host starts ``signoff proxy`` with a few variables of its own (the mcp SDK passes only
HOME, LOGNAME, PATH, SHELL, TERM and USER): no ``DBUS_SESSION_BUS_ADDRESS``. Where the session's
bus is not at its standard place (``$XDG_RUNTIME_DIR/bus``, ``/run/user/UID/bus``: a session
started with dbus-launch or dbus-run-session), the proxy would find no Secret Service, and so no
operator key. The tray app runs inside the desktop session and has the address.

Rules:

1. The app leaves its ``DBUS_SESSION_BUS_ADDRESS`` in ``session-bus`` in its run folder
   (core/wake.py ``runtime_dir``) each time it starts, written as Signoff writes its own files
   (0600, whole, never through a link: core/private_files.py), and only an address that rule 3
   would take.
2. A process with no ``DBUS_SESSION_BUS_ADDRESS`` and no bus at the standard place reads it
   (core/keyring_calls.py ``find_session_bus``); a missing file is no bus.
3. An address is taken only when every one of these holds, else it is refused with
   ``SessionBusRefused`` naming why (and the process has no bus, as before):
   - the file is a regular file, not a link, the user's own, readable and writable by the user
     alone, in a run folder that is the user's own folder with no access for anyone else;
   - its text is one ``unix:path=/ABSOLUTE`` address, with at most a ``guid`` (no other
     transport, no abstract socket, no second address: none of those can be checked);
   - the socket at that path is a socket, not a link, the user's own, and every folder above it
     is root's or the user's, not a link, and writable by others only with the sticky bit (so
     no other user can put a socket of theirs at that path after the check).
   Another user can therefore never steer the proxy to a bus of theirs. A process of the
   user's own account can (it can write the file and listen on a socket): that attacker can
   run code as the user and is out of reach anyway (docs/security-model.md).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from core import private_files, wake
from core.errors import SessionBusRefused, UnsafePermissions

FILE = "session-bus"
_ADDRESS = re.compile(r"unix:path=(/[^,;=]+)(?:,guid=[0-9a-fA-F]+)?")


def left_path() -> Path:
    """Where the app leaves the address (rule 1)."""
    return wake.runtime_dir() / FILE


def leave(address: str | None = None) -> None:
    """Leave ``address`` (this process's ``DBUS_SESSION_BUS_ADDRESS`` when not given) for the
    proxies (rule 1); ``SessionBusRefused`` when it is not one rule 3 would take, and then a
    file left before is removed (it named a bus of an earlier session)."""
    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "") if address is None else address
    path = left_path()
    try:
        socket_of(address)
    except SessionBusRefused:
        if path.is_file() and not path.is_symlink():
            path.unlink()
        raise
    wake.make_runtime_dir()
    private_files.write_text(path, address + "\n")


def left() -> str | None:
    """The address the app left, or None when it left none; ``SessionBusRefused`` when the file
    or its address fails rule 3."""
    path = left_path()
    try:
        folder = private_files.check(path.parent, "run folder", kind=stat.S_ISDIR)
        text = private_files.read_text(path, "session bus file")
    except FileNotFoundError:
        return None
    except (UnsafePermissions, UnicodeDecodeError, OSError) as e:
        raise SessionBusRefused(f"the session bus file is not used: {e}") from None
    if text is None:
        return None
    for where, st in ((path.parent, folder), (path, os.lstat(path))):
        if private_files.CHECKED and stat.S_IMODE(st.st_mode) & 0o077:
            raise SessionBusRefused(
                f"{where} is open to others (mode {stat.S_IMODE(st.st_mode):o}): the session"
                " bus file is not used"
            )
    address = text.strip()
    socket_of(address)
    return address


def socket_of(address: str) -> Path:
    """The socket a bus address names, when rule 3 takes it; else ``SessionBusRefused``."""
    found = _ADDRESS.fullmatch(address)
    if found is None:
        raise SessionBusRefused(
            f"the session bus address {address!r} is not one unix:path= socket; it is not used"
        )
    socket = Path(found.group(1))
    if "%" in str(socket):  # D-Bus decodes escapes: the path checked would not be the one used
        raise SessionBusRefused(f"the session bus path {socket} holds escapes; it is not used")
    if ".." in socket.parts or str(socket) != os.path.normpath(socket):
        raise SessionBusRefused(f"the session bus path {socket} is not a plain path")
    try:
        st = os.lstat(socket)
    except OSError as e:
        raise SessionBusRefused(f"no session bus at {socket}: {e.strerror}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise SessionBusRefused(f"{socket} is not a socket; it is not used as the session bus")
    if private_files.CHECKED and st.st_uid != os.geteuid():
        raise SessionBusRefused(
            f"the session bus socket {socket} belongs to another user (uid {st.st_uid})"
        )
    for folder in socket.parents:
        _safe_folder(folder, socket)
    return socket


def _safe_folder(folder: Path, socket: Path) -> None:
    """A folder above the socket that no other user can change (rule 3)."""
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):  # a link: followed, its target could change
        raise SessionBusRefused(f"{folder}, above the session bus {socket}, is not a folder")
    if not private_files.CHECKED:
        return
    if st.st_uid not in (0, os.geteuid()):
        raise SessionBusRefused(
            f"{folder}, above the session bus {socket}, belongs to another user (uid {st.st_uid})"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise SessionBusRefused(
            f"{folder}, above the session bus {socket}, can be changed by others"
        )
