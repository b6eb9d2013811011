"""The rules in force are the configuration Signoff recorded, not whatever config.toml says now.

config.toml is where the operator edits; the chain is where the configuration in force is
kept. An agent holding one approved write, another account, a restored backup or a hand edit
can change the file; none of them can record a configuration.

Rules:

1. Signoff records each configuration it writes (the CLI, the settings window) before writing
   it, and each file the operator accepts: a ``config.recorded`` event of no run carrying the
   file's text, its SHA-256 over the bytes, who, when and why, authenticated like a decision
   (core/operator_key.py rules 2 and 4): HMAC-SHA-256 under the database's operator key over
   ``{"v", "database", "seq", "sha256", "by", "at", "why"}``, ``seq`` being the event's own
   place in the chain (a signed record copied into another event does not verify); no MAC only
   in unauthenticated mode with no key, and such a record counts only while that holds.
2. The latest record is also kept in the OS keyring (``config-head:<database id>``: its
   ``seq`` and SHA-256), moved forward only. The configuration in force is the text of the
   latest record whose MAC verifies, at or after the kept one; the kept one must be in the
   chain and verify. Hiding records (an event renamed, rows deleted, the database cut back)
   would otherwise bring back an older, looser configuration, or none and so "first seen":
   that is ``ConfigUnrecorded``, and nothing runs until the operator accepts a file.
3. config.toml is where the operator edits: a file whose bytes differ from the configuration in
   force (a hand edit, an agent's write, an old copy put back, a file gone or unreadable)
   changes nothing. It is "changed outside Signoff" until the operator accepts it (``accept``,
   bound to the fingerprint of the file the operator was shown, recorded once it validates)
   or restores the recorded text (``restore``). Signoff changes a file that differs from its
   record only by ``restore``: an edit through it is refused (``ConfigChangedOutside``), so
   that it never records someone else's change along with its own. ``accept`` is also the way
   out when no record can be trusted.
4. A database with no record, and none kept in the keyring, takes the file up as it is and
   records it (``first seen``): a configuration written before this rule, or by hand before
   the first start.
5. The configuration Signoff uses (``paths.config_path()``) is governed by the database it uses
   (``paths.database_path()``); an ``Editor`` of another file records nothing. Edits are
   serialised by a lock beside the file, and a file changed since the editor read it is not
   overwritten.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import canonical, keyring_calls, operator_key, paths, private_files
from core.canonical import JSONValue
from core.errors import (
    ConfigChangedOutside,
    ConfigError,
    ConfigUnrecorded,
    JSONRefused,
    LockTimeout,
    OperatorKeyUnavailable,
    SignoffError,
)
from core.filelock import locked
from core.operator_key import OperatorKey
from core.proxy import config as configuration
from core.store import Store, utc_now

log = logging.getLogger("signoff.config")

KIND = "config.recorded"
VERSION = "signoff.config.v2"
LOCK_SECONDS = 10.0
FINGERPRINT = 16  # hex digits of a file's SHA-256 that ``accept`` must be given


@dataclass(frozen=True)
class Recorded:
    seq: int
    text: str
    sha256: str
    by: str
    at: str
    why: str


@dataclass(frozen=True)
class State:
    """The configuration in force and how the file stands against it."""

    path: Path
    recorded: Recorded | None  # None: nothing recorded and no file (the defaults)
    file: bytes | None  # the file's bytes; None when it is gone or cannot be read
    file_problem: str = ""  # why the file cannot be read
    passed_over: tuple[str, ...] = field(default=())  # records whose MAC does not verify

    @property
    def changed_outside(self) -> bool:
        if self.file_problem:
            return True
        if self.recorded is None:
            return self.file is not None
        return self.file is None or sha256(self.file) != self.recorded.sha256

    @property
    def file_text(self) -> str:
        """The file as text, for showing (bytes that are not UTF-8 replaced)."""
        return "" if self.file is None else self.file.decode("utf-8", errors="replace")

    def config(self) -> configuration.Config:
        if self.recorded is None:
            return configuration.Config()
        return configuration.load_text(self.path, self.recorded.text)

    def why(self) -> str:
        """What differs, in a sentence for the log, the tray and the CLI."""
        if not self.changed_outside:
            return ""
        what = (
            f"cannot be read ({self.file_problem})"
            if self.file_problem
            else "is gone"
            if self.file is None
            else "differs from the configuration Signoff recorded"
        )
        since = f" (recorded {self.recorded.at} by {self.recorded.by})" if self.recorded else ""
        return (
            f"{self.path} {what}{since}: the recorded rules stay in force. Run `signoff settings"
            " diff` to see the difference and take the file up, or `signoff settings restore` to"
            " put the recorded one back."
        )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fields(
    database_id: str, seq: int, digest: str, by: str, at: str, why: str
) -> dict[str, JSONValue]:
    return {"v": VERSION, "database": database_id, "seq": seq, "sha256": digest, "by": by,
            "at": at, "why": why}  # fmt: skip


def operator() -> str:
    return f"operator:{getpass.getuser()}"


# --- the record kept in the keyring (rule 2) --------------------------------------------------


@dataclass(frozen=True)
class Kept:
    seq: int
    sha256: str


def _kept_user(database_id: str) -> str:
    return f"config-head:{database_id}"


def _keyring() -> Any:
    backend = keyring_calls.backend()
    from keyring.backends import fail

    return None if isinstance(backend, fail.Keyring) else backend


def load_kept(database_id: str) -> Kept | None:
    """The record kept in the keyring; None when none is (or the machine has no keyring);
    ``OperatorKeyUnavailable`` when the keyring fails."""
    try:
        backend = _keyring()
        text = (
            None
            if backend is None
            else keyring_calls.call(
                lambda: backend.get_password(operator_key.SERVICE, _kept_user(database_id))
            )
        )
    except Exception as e:  # any backend failure: what is kept cannot be read
        raise OperatorKeyUnavailable(
            f"the recorded configuration's place cannot be read from the OS keyring:"
            f" {keyring_calls.describe(e)}"
        ) from None
    if text is None:
        return None
    try:
        value = json.loads(text)
        return Kept(int(value["seq"]), str(value["sha256"]))
    except (ValueError, KeyError, TypeError):
        raise ConfigUnrecorded("the OS keyring's entry for the recorded configuration is not"
                               " Signoff's") from None  # fmt: skip


def _keep(store: Store, record: Recorded, *, anyway: bool = False) -> None:
    """Move the kept record forward to ``record`` (never back, unless ``anyway``: the
    operator's accept, which is the way out of a database cut back); logged when it cannot
    be."""
    lock = store.path.with_name(store.path.name + ".lock")  # the operator key's lock too
    try:
        with locked(lock, LOCK_SECONDS):
            kept = load_kept(store.database_id)
            if kept is not None and kept.seq >= record.seq and not anyway:
                return
            backend = _keyring()
            if backend is None:
                return
            text = json.dumps({"seq": record.seq, "sha256": record.sha256})
            keyring_calls.call(
                lambda: backend.set_password(
                    operator_key.SERVICE, _kept_user(store.database_id), text
                )
            )
    except Exception as e:  # the record stands in the chain; the next reader keeps it
        log.warning("the recorded configuration is not kept in the keyring yet: %s", e)


# --- reading the record ------------------------------------------------------------------------


def latest(
    conn: sqlite3.Connection, database_id: str, keys: OperatorKey, kept: Kept | None
) -> tuple[Recorded | None, tuple[str, ...]]:
    """The configuration in force (rules 1 and 2), and the records passed over on the way.
    ``ConfigUnrecorded`` when it cannot be trusted."""
    rows = conn.execute(
        "SELECT seq, payload, at FROM events WHERE run_id IS NULL AND kind = ? ORDER BY seq DESC",
        (KIND,),
    ).fetchall()
    passed: list[str] = []
    for seq, text, at in rows:
        if kept is not None and seq < kept.seq:
            break
        problem = _problem(conn, database_id, keys, seq, text, at)
        if problem:
            passed.append(f"event {seq}: {problem}")
            continue
        payload = canonical.loads(text)
        assert isinstance(payload, dict)
        body, digest, by, why = (str(payload[k]) for k in ("text", "sha256", "by", "why"))
        found = Recorded(seq, body, digest, by, at, why)
        if kept is not None and not _holds_kept(conn, database_id, keys, kept):
            break
        return found, tuple(passed)
    if kept is not None:
        raise ConfigUnrecorded(
            f"the configuration recorded last (event {kept.seq}, as the OS keyring keeps it) is"
            " not in the database as it was recorded"
            + (f" ({'; '.join(passed)})" if passed else "")
            + ": the database was cut back or altered. No rules can be trusted until you"
            " take up a configuration: `signoff settings diff`, then `signoff settings accept`."
        )
    if passed:
        raise ConfigUnrecorded(
            "the database holds configurations none of which is authenticated by this"
            f" database's operator key ({'; '.join(passed)}): no rules can be trusted until"
            " you take up a configuration: `signoff settings diff`, then `signoff settings"
            " accept`."
        )
    return None, ()


def _holds_kept(conn: sqlite3.Connection, database_id: str, keys: OperatorKey, kept: Kept) -> bool:
    row = conn.execute(
        "SELECT payload, at FROM events WHERE seq = ? AND run_id IS NULL AND kind = ?",
        (kept.seq, KIND),
    ).fetchone()
    if row is None or _problem(conn, database_id, keys, kept.seq, row[0], row[1]):
        return False
    payload = canonical.loads(row[0])
    return isinstance(payload, dict) and payload.get("sha256") == kept.sha256


def generation(conn: sqlite3.Connection) -> int:
    """The latest record's place in the chain (0 for none): a new record changes it."""
    row = conn.execute(
        "SELECT max(seq) FROM events WHERE run_id IS NULL AND kind = ?", (KIND,)
    ).fetchone()
    return int(row[0] or 0)


def _problem(
    conn: sqlite3.Connection, database_id: str, keys: OperatorKey, seq: int, text: str, at: str
) -> str:
    """Why the record at ``seq`` is not the operator's, or ""."""
    try:
        payload = canonical.loads(text)
    except JSONRefused:
        return "not exact JSON"
    if not isinstance(payload, dict):
        return "malformed"
    body, digest, by, why = (payload.get(k) for k in ("text", "sha256", "by", "why"))
    if not (isinstance(body, str) and isinstance(digest, str) and isinstance(by, str)
            and isinstance(why, str)):  # fmt: skip
        return "malformed"
    if sha256(body.encode("utf-8")) != digest:
        return "its text does not hash to its SHA-256"
    sent = payload.get("mac")
    if sent is None:
        # As for decisions (core/operator_key.py rule 4): unsigned counts only in the mode the
        # operator chose, where the keyring answers it holds no key and nothing was signed.
        key = keys.key_or_none(database_id)
        if key is None and keys.unsigned_counts(conn):
            return ""
        return "it carries no MAC"
    key = keys.key(database_id)
    if key is None:
        raise OperatorKeyUnavailable(
            "the OS keyring holds no operator key for this database, so the recorded"
            " configuration cannot be checked"
        )
    expected = operator_key.mac(key, _fields(database_id, seq, digest, by, at, why))
    if payload.get("key") != operator_key.key_id(key) or not isinstance(sent, str):
        return "signed with another key"
    if not operator_key.mac_matches(sent, expected):
        return "its MAC does not verify"
    return ""


def _file(path: Path) -> tuple[bytes | None, str]:
    try:
        return configuration.read_bytes(path), ""
    except FileNotFoundError:
        return None, ""
    except SignoffError as e:  # ConfigError, UnsafePermissions: not a file to take up
        return None, f"{e} [{type(e).__name__}]"


def state(store: Store, path: Path, keys: OperatorKey | None = None) -> State:
    """The configuration in force and the file beside it; a database with nothing recorded
    records the file first (rule 4)."""
    keys = keys or operator_key.default()
    kept = load_kept(store.database_id)
    with store.snapshot() as conn:
        recorded, passed = latest(conn, store.database_id, keys, kept)
    data, problem = _file(path)
    if recorded is None and data is not None and not problem:
        configuration.load_text(path, configuration.decode(path, data))  # must validate
        recorded = record(store, data, why="first seen", keys=keys)
    elif recorded is not None and (kept is None or kept.seq < recorded.seq):
        _keep(store, recorded)
    return State(path, recorded, data, problem, passed)


def glance(store: Store, path: Path) -> str:
    """Whether the file is the latest recorded configuration, from the database and the file
    alone (no keyring call: for the tray's UI thread); "" when it is, else why not. What is in
    force is decided by ``state``; this only notices an edit."""
    with store.snapshot() as conn:
        row = conn.execute(
            "SELECT payload FROM events WHERE run_id IS NULL AND kind = ? ORDER BY seq DESC"
            " LIMIT 1",
            (KIND,),
        ).fetchone()
    data, problem = _file(path)
    if problem:
        return f"{path} cannot be read ({problem})"
    try:
        payload = canonical.loads(row[0]) if row is not None else None
    except JSONRefused:
        payload = None
    digest = payload.get("sha256") if isinstance(payload, dict) else None
    if digest is None:
        return "" if row is None else f"{path}: the recorded configuration cannot be read"
    if data is None:
        return f"{path} is gone: the recorded rules stay in force"
    if sha256(data) != digest:
        return (
            f"{path} differs from the configuration Signoff recorded: the recorded rules stay"
            " in force"
        )
    return ""


# --- recording -----------------------------------------------------------------------------


def record(
    store: Store,
    data: bytes,
    *,
    why: str,
    by: str | None = None,
    keys: OperatorKey | None = None,
    anyway: bool = False,
) -> Recorded:
    """Record ``data`` as the configuration in force (rule 1), and keep its place (rule 2)."""
    from core.transitions import record_config_change

    keys = keys or operator_key.default()
    text = data.decode("utf-8")
    try:  # before the transaction: no keyring call holds the write lock
        key = keys.key_for_signing(store)
    except OperatorKeyUnavailable as e:
        raise OperatorKeyUnavailable(
            f"{e}. A configuration is recorded with the operator key, as a decision is signed:"
            " unlock the keyring, or, on a machine with none, run `signoff decisions"
            " unauthenticated` first"
        ) from None
    by, at, digest = by or operator(), utc_now(), sha256(data)
    payload: dict[str, JSONValue] = {"text": text, "sha256": digest, "by": by, "why": why}
    with store.transaction("configuration recorded") as tx:
        seq = int(tx.conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]) + 1
        if key is not None:  # over its own place: a copy into another event does not verify
            payload["key"] = operator_key.key_id(key)
            payload["mac"] = operator_key.mac(
                key, _fields(store.database_id, seq, digest, by, at, why)
            )
        record_config_change(tx, KIND, payload, at=at)
    recorded = Recorded(seq, text, digest, by, at, why)
    _keep(store, recorded, anyway=anyway)
    return recorded


def governs(path: Path) -> bool:
    """Whether ``path`` is the configuration the database records (rule 5)."""
    return path.absolute() == paths.config_path().absolute()


@contextmanager
def _editing(path: Path) -> Iterator[None]:
    try:
        private_files.make_dir(path.parent)
        with locked(path.with_name(path.name + ".lock"), LOCK_SECONDS):
            yield
    except LockTimeout as e:
        raise ConfigError(f"{path}: another change is being saved: {e}") from None
    except OSError as e:  # a folder where the lock or the file belongs, a full disk
        raise ConfigError(f"{path}: cannot be changed: {e.strerror or e}") from None


def save(path: Path, read: bytes | None, text: str) -> None:
    """Write ``text`` as the configuration, recorded first when the database governs it; the
    file must still be ``read``, what the editor read, and, governed, be the configuration in
    force (rule 3)."""
    with _editing(path):
        now, problem = _file(path)
        if problem:
            raise ConfigError(problem)
        if now != read:
            raise ConfigChangedOutside(f"{path} changed while this change was made; try again")
        if governs(path):
            with Store.open(paths.database_path()) as store:
                current = state(store, path)
                if current.changed_outside:
                    raise ConfigChangedOutside(current.why())
                record(store, text.encode("utf-8"), why="saved")
        private_files.write_text(path, text)


def fingerprint(data: bytes) -> str:
    return sha256(data)[:FINGERPRINT]


def accept(store: Store, path: Path, shown: str, *, by: str | None = None) -> Recorded:
    """Take the file up as the operator was shown it (``shown``: its fingerprint, or more of
    its SHA-256): recorded once it validates (rule 3). Needs no trusted record: it is also the
    way out when none can be trusted."""
    with _editing(path):
        data, problem = _file(path)
        if problem:
            raise ConfigError(problem)
        if data is None:
            raise ConfigError(f"{path}: there is no file to accept")
        shown = shown.strip().lower()
        if len(shown) < FINGERPRINT or not sha256(data).startswith(shown):
            raise ConfigChangedOutside(
                f"{path} is not the file you were shown (fingerprint {shown or 'none'}; the file"
                f" now: {fingerprint(data)}): look at it again before taking it up"
            )
        configuration.load_text(path, configuration.decode(path, data))
        recorded = record(store, data, why="accepted", by=by, anyway=True)
        # Written again (the same bytes, a new file): running proxies see it changed and
        # take up the record.
        private_files.write_text(path, configuration.decode(path, data))
    return recorded


def restore(store: Store, path: Path) -> Recorded:
    """Put the recorded configuration back in the file (rule 3)."""
    with _editing(path):
        current = state(store, path)
        if current.recorded is None:
            raise ConfigUnrecorded(f"{path}: Signoff has recorded no configuration to restore")
        private_files.write_text(path, current.recorded.text)
        return current.recorded
