"""Signoff's own files and folders: made owner-only, and refused when anyone else could have
made or changed them.

Rules:

1. Every folder Signoff makes is 0700, each level it makes (``mkdir(parents=True)`` makes the
   levels above with the umask's mode: the data folder came out 0755 when ``signoff servers
   add`` made it through the configuration's folder).
2. Every file Signoff writes is written whole or not at all (a new file 0600, then renamed over
   the old), never through a symbolic link.
3. A file or folder Signoff reads or trusts must be what it wrote: not a symbolic link, of the
   kind expected (a file, not a folder), the user's own, and not writable by group or others.
   Anything else raises ``UnsafePermissions`` naming the path and the fix: a state file that
   fails this is never taken as "no state" (a folder named ``alarm.json`` silenced the alarm).
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from pathlib import Path
from typing import BinaryIO, TextIO

from core.errors import UnsafePermissions

# Windows has no POSIX modes or owners to check; its per-user folders are the boundary there.
CHECKED = sys.platform != "win32"


def make_dir(path: Path, repair: bool = False) -> Path:
    """``path`` as a folder, each level made here 0700 (rule 1); an existing one is checked
    (rule 3), after being set to 0700 when ``repair`` and it is the user's own folder (a folder
    the person named for Signoff, made with a loose umask)."""
    if repair and CHECKED:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
                os.chmod(path, 0o700, follow_symlinks=False)
    missing = []
    level = path
    while not level.exists() and level != level.parent:
        missing.append(level)
        level = level.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass  # another process made it first; checked below like any existing one
        else:
            os.chmod(folder, 0o700)  # whatever the umask
    check(path, "folder", kind=stat.S_ISDIR)
    return path


def check(path: Path, what: str, kind: object = stat.S_ISREG, modes: bool = True) -> os.stat_result:
    """Rule 3 for ``path``, which must exist; its ``lstat``. ``modes=False``: not the mode bits
    (a socket's, which its maker's umask sets, guards nothing: its folder does)."""
    return _checked(os.lstat(path), path, what, kind, modes)


def _checked(
    st: os.stat_result, path: Path, what: str, kind: object, modes: bool = True
) -> os.stat_result:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePermissions(f"the {what} {path} is a symbolic link; refusing to follow it")
    if callable(kind) and not kind(st.st_mode):
        raise UnsafePermissions(
            f"{path} is not a {'folder' if kind is stat.S_ISDIR else 'file'} as Signoff's {what}"
            f" must be; move it away"
        )
    if not CHECKED:
        return st
    if st.st_uid != os.geteuid():
        raise UnsafePermissions(f"the {what} {path} belongs to another user (uid {st.st_uid})")
    if modes and st.st_mode & 0o022:
        raise UnsafePermissions(
            f"the {what} {path} can be written by group or others"
            f" (mode {stat.S_IMODE(st.st_mode):o}); run: chmod go-w {path}"
        )
    return st


def read_text(path: Path, what: str = "state file") -> str | None:
    """The file's text, or None when there is none; ``UnsafePermissions`` when it is not one
    Signoff wrote (rule 3); ``UnicodeDecodeError`` when it is not UTF-8."""
    data = read_bytes(path, what)
    return None if data is None else data.decode("utf-8")


def read_bytes(path: Path, what: str = "state file") -> bytes | None:
    """``read_text`` for the bytes as they are (no newline translation)."""
    try:
        # Non-blocking: a FIFO put in its place must not hang the reader; checked on the file
        # opened, not on the name (which could change between a look and an open).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: a symbolic link
        if os.path.islink(path):
            raise UnsafePermissions(
                f"the {what} {path} is a symbolic link; refusing to follow it"
            ) from None
        raise
    try:
        _checked(os.fstat(fd), path, what, stat.S_ISREG)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read()


def open_log(path: Path) -> TextIO:
    """``path`` opened to append text to, made 0600 if new (its folder by rule 1; never
    through a link): Signoff's logs name servers, tools and errors, the user's business alone."""
    return os.fdopen(_append(path), "a", encoding="utf-8", errors="backslashreplace")


def open_log_bytes(path: Path) -> BinaryIO:
    """``open_log`` for bytes (a server's own stderr)."""
    return os.fdopen(_append(path), "ab")


def _append(path: Path) -> int:
    make_dir(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device put in the log's place
        os.close(fd)
        raise UnsafePermissions(f"{path} is not a file as Signoff's log must be; move it away")
    return fd


def write_text(path: Path, text: str) -> None:
    """``text`` as the whole of ``path`` (rule 2), its folder made if need be (rule 1)."""
    make_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
