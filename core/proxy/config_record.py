"""The rules in force are the configuration Signoff recorded, not whatever config.toml says now.

config.toml is where the operator edits; the chain is where the configuration in force is
kept. An agent holding one approved write, another account, a restored backup or a hand edit
can change the file; none of them can record a configuration.

Rules:

1. Signoff records each configuration it writes (the CLI, the settings window) before writing
   it, and each file the operator accepts: a ``config.recorded`` event of no run carrying the
   file's text, its SHA-256 over the bytes, who, when and why, authenticated like a decision
   (core/operator_key.py rules 2 and 4): HMAC-SHA-256 under the database's operator key over
   ``{"v", "database", "sha256", "by", "at", "why"}``; no MAC only in unauthenticated mode
   with no key, and such a record counts only while that holds.
2. The configuration in force is the text of the latest record whose MAC verifies; a record
   that does not is passed over and named. A file whose bytes differ from it (a hand edit, an
   agent's write, an old copy put back, a file gone or unreadable) changes nothing: it is
   "changed outside Signoff" until the operator accepts it (``accept``: recorded once it
   validates) or restores the recorded text (``restore``). Signoff changes a file that differs
   from its record only by ``restore``: an edit through it is refused (``ConfigChangedOutside``),
   so that it never records someone else's change along with its own.
3. A database with no record at all takes the file up as it is and records it (``first
   seen``): a configuration written before this rule, or by hand before the first start. A
   database whose records all fail to verify has nothing it can trust: ``ConfigUnrecorded``.
4. The configuration Signoff uses (``paths.config_path()``) is governed by the database it uses
   (``paths.database_path()``); an ``Editor`` of another file records nothing.
5. Edits are serialised by a lock beside the file, and a file changed since the editor read it
   is not overwritten.
6. A record is anchored like an approved side effect (core/anchor.py): the chain's head that
   holds it is kept in the keyring, and the records are read only from a database that still
   holds the kept head. A database cut back to before a record, or a copy restored from then,
   would otherwise bring back the rules of an older record (or none, so "first seen"):
   ``DatabaseRestored``. A keyring that cannot keep or read the head is logged, not fatal: the
   records are signed all the same, and the tray's witness keeps the head when it can.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from core import canonical, operator_key, paths, private_files
from core.anchor import Anchor
from core.canonical import JSONValue
from core.errors import (
    ConfigChangedOutside,
    ConfigError,
    ConfigUnrecorded,
    JSONRefused,
    LockTimeout,
    NotAnchored,
    OperatorKeyUnavailable,
    SignoffError,
)
from core.filelock import locked
from core.operator_key import OperatorKey, keyed_at, unauthenticated_mode
from core.proxy import config as configuration
from core.store import Store, utc_now

log = logging.getLogger("signoff.config")

KIND = "config.recorded"
VERSION = "signoff.config.v1"
LOCK_SECONDS = 10.0


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
        """The file as text, for showing (bytes that are not UTF-8 replaced and said)."""
        if self.file is None:
            return ""
        return self.file.decode("utf-8", errors="replace")

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
            " accept` to take the file up, or `signoff settings restore` to put the recorded one"
            " back."
        )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fields(database_id: str, digest: str, by: str, at: str, why: str) -> dict[str, JSONValue]:
    return {"v": VERSION, "database": database_id, "sha256": digest, "by": by, "at": at,
            "why": why}  # fmt: skip


def operator() -> str:
    return f"operator:{getpass.getuser()}"


# --- reading the record ------------------------------------------------------------------------


def latest(conn: sqlite3.Connection, database_id: str, keys: OperatorKey) -> tuple[
    Recorded | None, tuple[str, ...]
]:  # fmt: skip
    """The latest record whose MAC verifies (rule 2), and what was passed over on the way.
    ``ConfigUnrecorded`` when there are records and none verifies (rule 3)."""
    rows = conn.execute(
        "SELECT seq, payload, at FROM events WHERE run_id IS NULL AND kind = ? ORDER BY seq DESC",
        (KIND,),
    ).fetchall()
    passed: list[str] = []
    for seq, text, at in rows:
        problem = _problem(conn, database_id, keys, seq, text, at)
        if problem:
            passed.append(f"event {seq}: {problem}")
            continue
        payload = canonical.loads(text)
        assert isinstance(payload, dict)
        body, digest, by, why = (str(payload[k]) for k in ("text", "sha256", "by", "why"))
        return Recorded(seq, body, digest, by, at, why), tuple(passed)
    if passed:
        raise ConfigUnrecorded(
            "the database holds configurations none of which is authenticated by this"
            f" database's operator key ({'; '.join(passed)}): no rules can be trusted."
        )
    return None, ()


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
    if not all(isinstance(v, str) for v in (body, digest, by, why)):
        return "malformed"
    assert isinstance(body, str) and isinstance(digest, str)
    assert isinstance(by, str) and isinstance(why, str)
    if sha256(body.encode("utf-8")) != digest:
        return "its text does not hash to its SHA-256"
    sent = payload.get("mac")
    if sent is None:
        # As for decisions (core/operator_key.py rule 4): unsigned counts only in the mode the
        # operator chose, where the keyring answers it holds no key and nothing was signed.
        key = keys.key(database_id)
        if key is None and keyed_at(conn) is None and unauthenticated_mode(conn):
            return ""
        return "it carries no MAC"
    key = keys.key(database_id)
    if key is None:
        raise OperatorKeyUnavailable(
            "the OS keyring holds no operator key for this database, so the recorded"
            " configuration cannot be checked"
        )
    expected = operator_key.mac(key, _fields(database_id, digest, by, at, why))
    if payload.get("key") != operator_key.key_id(key) or not isinstance(sent, str):
        return "signed with another key"
    if not hmac.compare_digest(sent, expected):
        return "its MAC does not verify"
    return ""


def _file(path: Path) -> tuple[bytes | None, str]:
    try:
        return configuration.read_bytes(path), ""
    except FileNotFoundError:
        return None, ""
    except SignoffError as e:  # ConfigError, UnsafePermissions: not a file to take up
        return None, f"{e} [{type(e).__name__}]"


_anchor: Anchor | None = None
_anchor_guard = threading.Lock()


def _default_anchor() -> Anchor:
    """One per process, so the kept head is read from the keyring once."""
    global _anchor
    with _anchor_guard:
        if _anchor is None:
            from core.heads import KeyringHeadStore

            _anchor = Anchor(KeyringHeadStore())
        return _anchor


def _check_anchor(store: Store, anchor: Anchor) -> None:
    """Rule 6: ``DatabaseRestored`` when the database no longer holds the kept head."""
    try:
        anchor.check(store)
    except NotAnchored as e:
        log.warning("the configuration's record is read without the kept head: %s", e)


def state(
    store: Store, path: Path, keys: OperatorKey | None = None, *, anchored: bool = True
) -> State:
    """The configuration in force and the file beside it; a database with nothing recorded
    records the file first (rule 3). ``DatabaseRestored`` from a database cut back (rule 6);
    ``anchored=False`` leaves that to the caller (the tray, whose witness checks the head on a
    thread of its own)."""
    keys = keys or operator_key.default()
    if anchored:
        _check_anchor(store, _default_anchor())
    with store.snapshot() as conn:
        recorded, passed = latest(conn, store.database_id, keys)
    data, problem = _file(path)
    if recorded is None and data is not None and not problem:
        configuration.load_text(path, configuration.decode(path, data))  # must validate
        recorded = record(store, data, why="first seen", keys=keys)
    return State(path, recorded, data, problem, passed)


def unverified(store: Store, path: Path) -> configuration.Config:
    """The configuration to start servers from when the one in force cannot be established
    (a keyring that fails, a database cut back): the latest record's text as it stands, else
    the file. Nothing may run on it: the caller refuses every call until ``state`` answers."""
    with store.snapshot() as conn:
        row = conn.execute(
            "SELECT payload FROM events WHERE run_id IS NULL AND kind = ? ORDER BY seq DESC"
            " LIMIT 1",
            (KIND,),
        ).fetchone()
    if row is not None:
        try:
            payload = canonical.loads(row[0])
            if isinstance(payload, dict) and isinstance(payload.get("text"), str):
                return configuration.load_text(path, str(payload["text"]))
        except (JSONRefused, ConfigError):
            pass
    return configuration.load(path)


# --- recording -----------------------------------------------------------------------------


def record(
    store: Store, data: bytes, *, why: str, by: str | None = None, keys: OperatorKey | None = None
) -> Recorded:
    """Record ``data`` as the configuration in force (rule 1)."""
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
    if key is not None:
        payload["key"] = operator_key.key_id(key)
        payload["mac"] = operator_key.mac(key, _fields(store.database_id, digest, by, at, why))
    anchor = _default_anchor()
    _check_anchor(store, anchor)
    with store.transaction("configuration recorded") as tx:
        record_config_change(tx, KIND, payload, at=at)
        seq = tx.conn.execute("SELECT max(seq) FROM events").fetchone()[0]
    try:
        anchor.advance(store, store.head())
    except NotAnchored as e:
        log.warning("the recorded configuration's head is not kept yet: %s", e)
    return Recorded(int(seq), text, digest, by, at, why)


def governs(path: Path) -> bool:
    """Whether ``path`` is the configuration the database records (rule 4)."""
    return path.absolute() == paths.config_path().absolute()


@contextmanager
def _editing(path: Path) -> Iterator[None]:
    try:
        with locked(path.with_name(path.name + ".lock"), LOCK_SECONDS):
            yield
    except LockTimeout as e:
        raise ConfigError(f"{path}: another change is being saved: {e}") from None


def save(path: Path, read: bytes | None, text: str) -> None:
    """Write ``text`` as the configuration, recorded first when the database governs it; the
    file must still be ``read``, what the editor read (rule 5), and, governed, be the recorded
    configuration (rule 2)."""
    private_files.make_dir(path.parent)
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


def accept(store: Store, path: Path, *, by: str | None = None) -> Recorded:
    """Take the file up as it is now: recorded, once it validates (rule 2)."""
    with _editing(path):
        data, problem = _file(path)
        if problem:
            raise ConfigError(problem)
        if data is None:
            raise ConfigError(f"{path}: there is no file to accept")
        configuration.load_text(path, configuration.decode(path, data))
        recorded = record(store, data, why="accepted", by=by)
        # Written again (the same bytes, a new file): running proxies see it changed and
        # take up the record.
        private_files.write_text(path, configuration.decode(path, data))
    return recorded


def restore(store: Store, path: Path) -> Recorded:
    """Put the recorded configuration back in the file (rule 2)."""
    with _editing(path):
        current = state(store, path)
        if current.recorded is None:
            raise ConfigUnrecorded(f"{path}: Signoff has recorded no configuration to restore")
        private_files.write_text(path, current.recorded.text)
        return current.recorded
