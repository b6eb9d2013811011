"""The operator key: what makes an approval the operator's, and not a write to a file.

Rules:

1. Each database has its own key: 32 random bytes in the OS keyring (service ``signoff``, user
   ``operator-key:<database id>``), made by the first decision on that database (under a lock
   beside it, so two deciders make one key), never written to the database or beside it.
2. A decision (approve or reject) is authenticated with HMAC-SHA-256 under that key, over the
   RFC 8785 form of ``{"v", "database", "approval", "run", "step", "request_hash", "status",
   "by", "at", "reason"}``. The MAC and the key's id go into the ``approval.decided`` event, so
   the chain carries them.
3. A grant is executed only on exactly one ``approval.decided`` event of that approval in the
   chain, saying ``approved``, naming the approval's run, step and request hash, whose MAC
   verifies under this database's key, and on no ``step.tool_started`` or ``approval.closed``
   naming it (a grant runs once, whatever the tables say). Anything else raises
   ``DecisionUnauthenticated``; a key that cannot be read raises ``OperatorKeyUnavailable``
   (nothing runs, the request waits).
   The approvals table is a view for queries, never the authority for a grant.
4. Unauthenticated mode is the operator's explicit choice, an ``operator.unauthenticated``
   event of no run (``signoff decisions unauthenticated``), undone by ``operator.authenticated``;
   the latest of the two holds. In it a decision carries no MAC and a grant needs none, only
   on a machine where no keyring can keep a key at all (none answers, or the operator named
   none) and where the chain records no signed decision: the first signed decision appends
   ``operator.keyed``, and from it on an unsigned decision never runs. Where a keyring works,
   every decision is signed (the first one makes the key), so an unsigned one there is a write
   to the database, not the operator's, even on a database no decision was signed on yet (the
   mode event itself is unsigned: anybody who can write the database can append it). A
   keyring that fails or does not answer is never taken for "no key": the call waits.
5. A key is read from the keyring once per process and database, and kept in memory; each
   keyring call has a deadline (core/keyring_calls.py).
6. The keyring that holds the key is recorded in the chain: its name in the ``operator.keyed``
   event of the first signed decision, and in a ``keyring.used`` event of no run each time the
   operator confirms another one (``signoff decisions keyring accept``); the latest holds. A
   process whose keyring is not the recorded one signs no decision and executes no grant
   (``KeyringChanged``: the request waits), and the tray's witness raises it as an alarm
   (decision 0066). A key store that is not a keyring (``MemoryKeyStore``) records nothing.
7. A keyring that cannot be reached is never reported as holding no key: where no OS keyring
   answered (no session bus, no Secret Service on it) the read raises ``NoKeyringAnswers``, a
   locked one ``KeyringUnreachable``, each naming the cause ("cannot reach the OS keyring: no
   session bus"). Only rule 4 takes ``NoKeyringAnswers`` for "no key" (``key_or_none``): a
   machine with no keyring at all, in the mode the operator chose for it. A backend the
   operator named, the package's no-keyring one included, answers "no key" as before.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core import canonical, keyring_calls
from core.canonical import JSONValue
from core.errors import (
    DecisionUnauthenticated,
    GrantUsed,
    JSONRefused,
    KeyringChanged,
    KeyringUnreachable,
    LockTimeout,
    NoKeyringAnswers,
    OperatorKeyUnavailable,
)
from core.filelock import locked
from core.records import ApprovalView

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

    from core.store import Store

SERVICE = "signoff"
VERSION = "signoff.decision.v1"
MODE_KINDS = ("operator.unauthenticated", "operator.authenticated")
KEYED = "operator.keyed"  # {key, keyring}: the database's first signed decision follows
KEYRING_USED = "keyring.used"  # {keyring, by}: the operator confirmed another keyring (rule 6)
LOCK_SECONDS = 10.0


class KeyStore(Protocol):
    def load(self, database_id: str) -> bytes | None:
        """The key kept for this database, or None; raises ``OperatorKeyUnavailable``."""
        ...

    def save(self, database_id: str, key: bytes) -> None:
        """Keep ``key`` for this database; raises ``OperatorKeyUnavailable``."""
        ...

    def keyring(self) -> str | None:
        """The keyring the keys are kept in, as the chain records it; None for none (rule 6)."""
        ...

    def keeps_keys(self) -> bool:
        """Whether a key can be kept here at all (rule 4): False only where there is no
        keyring (none answers, or the operator named none)."""
        ...


def _user(database_id: str) -> str:
    return f"operator-key:{database_id}"


class MemoryKeyStore:
    """Keys in this process only: for tests, and for a library user's own keeping."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes] = {}

    def load(self, database_id: str) -> bytes | None:
        return self.keys.get(database_id)

    def save(self, database_id: str, key: bytes) -> None:
        self.keys[database_id] = key

    def keyring(self) -> str | None:
        return None

    def keeps_keys(self) -> bool:
        return True


class KeyringKeyStore:
    """Keys in the OS keyring through the ``keyring`` package (or a given backend)."""

    def __init__(self, backend: KeyringBackend | None = None) -> None:
        self._backend = backend

    def _keyring(self) -> KeyringBackend:
        return keyring_calls.backend(self._backend)  # type: ignore[no-any-return]

    def keyring(self) -> str | None:
        return keyring_calls.name(self._keyring())

    def keeps_keys(self) -> bool:
        try:
            backend = self._keyring()
            self._reached(backend)
        except NoKeyringAnswers:
            return False
        return not _no_keyring(backend)

    def load(self, database_id: str) -> bytes | None:
        """The key, or None when none is kept, or when the operator named no keyring at all
        (keyring's own ``fail`` backend: nothing can be kept, so nothing is); a keyring that
        cannot be reached raises, naming why (rule 7)."""
        try:
            backend = self._keyring()
            self._reached(backend)
            if _no_keyring(backend):
                return None
            text = keyring_calls.call(lambda: backend.get_password(SERVICE, _user(database_id)))
        except OperatorKeyUnavailable:
            raise
        except Exception as e:  # any backend failure: the key cannot be read
            if keyring_calls.is_locked(e):
                raise KeyringUnreachable(
                    "cannot reach the OS keyring: the keyring is locked"
                    f" ({keyring_calls.describe(e)})"
                ) from None
            raise OperatorKeyUnavailable(
                f"the operator key cannot be read from the OS keyring: {keyring_calls.describe(e)}"
            ) from None
        if text is None:
            return None
        try:
            key = base64.b64decode(text, validate=True)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise OperatorKeyUnavailable("the operator key in the OS keyring is not a Signoff key")
        return key

    def save(self, database_id: str, key: bytes) -> None:
        text = base64.b64encode(key).decode()
        try:
            backend = self._keyring()
            self._reached(backend)
            keyring_calls.call(lambda: backend.set_password(SERVICE, _user(database_id), text))
        except OperatorKeyUnavailable:
            raise
        except Exception as e:
            raise OperatorKeyUnavailable(
                f"the operator key cannot be written to the OS keyring: {keyring_calls.describe(e)}"
            ) from None

    def _reached(self, backend: object) -> None:
        """``NoKeyringAnswers`` when no OS keyring answered the choice of a backend (rule 7): a
        backend given, or named by the operator, is theirs and is not judged here."""
        why = "" if self._backend is not None else keyring_calls.unreachable(backend)
        if why:
            raise NoKeyringAnswers(f"cannot reach the OS keyring: {why}")


def _no_keyring(backend: object) -> bool:
    from keyring.backends import fail

    return isinstance(backend, fail.Keyring)


def key_id(key: bytes) -> str:
    """A name for a key that reveals nothing of it."""
    return hashlib.sha256(b"signoff.operator-key.id\x00" + key).hexdigest()[:16]


@dataclass(frozen=True)
class Signature:
    """What an ``approval.decided`` event carries to prove who decided: both None when the
    operator chose unauthenticated mode."""

    key: str | None
    mac: str | None


def decision_fields(
    database_id: str, approval: ApprovalView, *, status: str, by: str, at: str, reason: str
) -> dict[str, JSONValue]:
    return {
        "v": VERSION,
        "database": database_id,
        "approval": approval.id,
        "run": approval.run_id,
        "step": approval.step,
        "request_hash": approval.request_hash,
        "status": status,
        "by": by,
        "at": at,
        "reason": reason,
    }


def mac(key: bytes, fields: dict[str, JSONValue]) -> str:
    return hmac.new(key, canonical.dumps(fields), hashlib.sha256).hexdigest()


def mac_matches(sent: object, expected: str) -> bool:
    """Whether a record's MAC, as read from the database, is exactly ``expected``: the one
    comparison of every signed record (decisions, grants, recorded configurations), in
    constant time and over the UTF-8 bytes, so that a MAC written with characters beyond
    ASCII (which ``hmac.compare_digest`` will not compare as text: it raises ``TypeError``)
    is refused like any other wrong MAC, never an error of its own."""
    if not isinstance(sent, str):
        return False
    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), expected.encode())


def unsigned_mode(conn: sqlite3.Connection) -> bool:
    """Rule 4's chain half: the operator chose unauthenticated decisions, and nothing was
    signed since the database began."""
    return unauthenticated_mode(conn) and keyed_at(conn) is None


def unauthenticated_mode(conn: sqlite3.Connection) -> bool:
    """Whether the operator's latest choice, in the chain, is unauthenticated decisions."""
    row = conn.execute(
        "SELECT kind FROM events WHERE run_id IS NULL AND kind IN (?, ?) ORDER BY seq DESC LIMIT 1",
        MODE_KINDS,
    ).fetchone()
    return row is not None and row[0] == "operator.unauthenticated"


def recorded_keyring(conn: sqlite3.Connection) -> str | None:
    """The keyring the chain says holds this database's key (rule 6), or None."""
    row = conn.execute(
        "SELECT payload FROM events WHERE run_id IS NULL AND kind IN (?, ?)"
        " ORDER BY seq DESC LIMIT 1",
        (KEYED, KEYRING_USED),
    ).fetchone()
    if row is None:
        return None
    try:
        payload = canonical.loads(row[0])
    except JSONRefused:
        return None
    found = payload.get("keyring") if isinstance(payload, dict) else None
    return found if isinstance(found, str) else None


def keyring_problem(conn: sqlite3.Connection, keys: KeyStore) -> str:
    """Why this process's keyring is not the one the chain records ("" when it is, or when
    either records none): the text of ``KeyringChanged`` and of the witness's alarm."""
    recorded, used = recorded_keyring(conn), keys.keyring()
    if recorded is None or used is None or recorded == used:
        return ""
    return (
        f"the operator key is kept in {recorded} (recorded in the chain), but this process"
        f" reaches {used}: nothing approved runs and no decision is signed until the operator"
        " confirms the change with `signoff decisions keyring accept`"
    )


def keyed_at(conn: sqlite3.Connection) -> int | None:
    """The event that recorded this database's first signed decision, or None: from it on, no
    unsigned decision is ever accepted, whatever mode an event appended later names."""
    row = conn.execute(
        "SELECT seq FROM events WHERE run_id IS NULL AND kind = 'operator.keyed'"
        " ORDER BY seq LIMIT 1"
    ).fetchone()
    return None if row is None else int(row[0])


class OperatorKey:
    """Signs the operator's decisions and checks grants, with keys from ``keys``."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self._cache: dict[str, bytes] = {}
        self._guard = threading.Lock()

    def cached(self, database_id: str) -> bool:
        """Whether this database's key is in memory (using it then calls no keyring)."""
        with self._guard:
            return database_id in self._cache

    def key(self, database_id: str) -> bytes | None:
        """This database's key (read once, then kept), or None when the keyring holds none."""
        with self._guard:
            cached = self._cache.get(database_id)
        if cached is not None:
            return cached
        key = self.keys.load(database_id)
        if key is not None:
            with self._guard:
                self._cache[database_id] = key
        return key

    def keeps_keys(self) -> bool:
        """Whether the keyring can keep a key at all (rule 4); raises what it raises."""
        return self.keys.keeps_keys()

    def unsigned_counts(self, conn: sqlite3.Connection) -> bool:
        """Whether an unsigned decision, grant or recorded configuration is the operator's
        (rule 4): only in the mode they chose, on a database nothing was signed on, where no
        keyring can keep a key at all."""
        return unsigned_mode(conn) and not self.keeps_keys()

    def key_or_none(self, database_id: str) -> bytes | None:
        """``key``, with no OS keyring answering at all taken for "no key": for rule 4 alone (a
        machine with no keyring, in the mode the operator chose), never to report a key
        missing."""
        try:
            return self.key(database_id)
        except NoKeyringAnswers:
            return None

    def key_for_deciding(self, store: Store) -> bytes:
        """This database's key, made now (once, under a lock) when none exists yet."""
        key = self.key(store.database_id)
        if key is not None:
            return key
        try:
            with locked(_lock_path(store.path), LOCK_SECONDS):
                key = self.keys.load(store.database_id)
                if key is None:
                    self.keys.save(store.database_id, secrets.token_bytes(32))
                    key = self.keys.load(store.database_id)  # what the keyring kept
        except (LockTimeout, OSError) as e:
            raise OperatorKeyUnavailable(f"the operator key cannot be made: {e}") from None
        if key is None:
            raise OperatorKeyUnavailable("the OS keyring did not keep the new operator key")
        with self._guard:
            self._cache[store.database_id] = key
        return key

    def key_for_signing(self, store: Store) -> bytes | None:
        """The key a decision on this database is signed with: None only in unauthenticated
        mode without a usable key (rule 4). Read before the decision's transaction, so that no
        keyring call ever waits inside the database's write lock."""
        with store.snapshot() as conn:
            unauthenticated = unauthenticated_mode(conn)
            changed = keyring_problem(conn, self.keys)
        if changed:
            raise KeyringChanged(changed)
        if not unauthenticated:
            return self.key_for_deciding(store)
        try:  # a keyring that works signs even so: the database is then keyed for good
            return self.key_for_deciding(store)
        except OperatorKeyUnavailable:
            return None

    def check_grant(
        self, conn: sqlite3.Connection, database_id: str, approval: ApprovalView
    ) -> str:
        """Raise unless the chain holds the authenticated decision approving exactly this
        approval's request (rule 3); return the decision's time, as authenticated."""
        rows = conn.execute(
            "SELECT seq, kind, payload, at FROM events WHERE run_id = ? AND step_idx = ?"
            " AND kind IN ('approval.decided', 'step.tool_started', 'approval.closed')",
            (approval.run_id, approval.step),
        ).fetchall()
        mine: list[tuple[int, dict[str, JSONValue], str]] = []
        where = f"approval {approval.id} (run {approval.run_id}, step {approval.step})"
        for seq, kind, text, at in rows:
            try:
                payload = canonical.loads(text)
            except JSONRefused:
                continue
            if not isinstance(payload, dict) or payload.get("approval") != approval.id:
                continue
            if kind != "approval.decided":
                # Used (its tool started) or closed, in the chain: whatever the tables say
                # now, this grant is spent. A replay of it runs nothing.
                raise GrantUsed(
                    f"{where} was already {'used' if kind == 'step.tool_started' else 'closed'}"
                    f" (event {seq}): a grant runs once. Nothing runs."
                )
            mine.append((seq, payload, at))
        if len(mine) != 1:
            raise DecisionUnauthenticated(
                f"{where} is recorded as approved, but the chain holds {len(mine)} decisions of"
                " it, not one: nobody approved it. Nothing runs."
            )
        seq, payload, at = mine[0]
        if payload.get("status") != "approved":
            raise DecisionUnauthenticated(
                f"{where} is recorded as approved, but its decision (event {seq}) says"
                f" {payload.get('status')!r}. Nothing runs."
            )
        if payload.get("request_hash") != approval.request_hash:
            raise DecisionUnauthenticated(
                f"{where}: its decision (event {seq}) approved another request than the one"
                " recorded now. Nothing runs."
            )
        sent = payload.get("mac")
        if sent is None:
            # A keyring that fails (locked, not answering) is never taken for "no keyring":
            # the call waits. Only one that answers "no key here", or a machine where no
            # keyring answers at all (rule 7), leaves the operator's mode.
            key = self.key_or_none(database_id)
            keyed = keyed_at(conn)
            if self.unsigned_counts(conn):
                return at
            why = (
                "the keyring holds an operator key for this database"
                if key is not None
                else "a keyring can keep an operator key here, so a decision is signed"
                if keyed is None and unauthenticated_mode(conn)
                else f"this database has signed decisions since event {keyed}"
                if keyed is not None
                else "the operator did not choose unauthenticated decisions"
            )
            raise DecisionUnauthenticated(
                f"{where}: its decision (event {seq}) carries no MAC, and {why}. Nothing runs."
            )
        changed = keyring_problem(conn, self.keys)
        if changed:
            raise KeyringChanged(f"{where}: {changed}. Nothing runs.")
        key = self.key(database_id)
        if key is None:
            raise OperatorKeyUnavailable(
                f"{where}: the OS keyring holds no operator key for this database, so its"
                " decision cannot be checked. Nothing runs."
            )
        by, reason = payload.get("by"), payload.get("reason")
        if not isinstance(by, str) or not isinstance(reason, str) or not isinstance(sent, str):
            raise DecisionUnauthenticated(f"{where}: its decision (event {seq}) is malformed.")
        fields = decision_fields(database_id, approval, status="approved", by=by, at=at,
                                 reason=reason)  # fmt: skip
        if payload.get("key") != key_id(key) or not mac_matches(sent, mac(key, fields)):
            raise DecisionUnauthenticated(
                f"{where}: its decision (event {seq}) is not authenticated by this database's"
                " operator key: nobody approved it. Nothing runs."
            )
        return at


def signature(
    key: bytes | None, database_id: str, approval: ApprovalView,
    *, status: str, by: str, at: str, reason: str,
) -> Signature:  # fmt: skip
    """The signature of a decision; none without a key (unauthenticated mode)."""
    if key is None:
        return Signature(None, None)
    fields = decision_fields(database_id, approval, status=status, by=by, at=at, reason=reason)
    return Signature(key_id(key), mac(key, fields))


def choose_mode(store: Store, *, unauthenticated: bool, by: str, reason: str = "") -> bool:
    """Record the operator's choice of (un)authenticated decisions in the chain (rule 4);
    False when it was already the mode."""
    from core.store import utc_now
    from core.transitions import record_config_change

    with store.transaction("decisions mode") as tx:
        if unauthenticated_mode(tx.conn) == unauthenticated:
            return False
        kind = MODE_KINDS[0] if unauthenticated else MODE_KINDS[1]
        payload: dict[str, JSONValue] = {"by": by}
        if unauthenticated:
            payload["reason"] = reason
        record_config_change(tx, kind, payload, at=utc_now())
    return True


def accept_keyring(store: Store, keys: KeyStore, *, by: str) -> str | None:
    """Record the keyring ``keys`` are kept in as the one holding the key from now on (rule 6):
    the keyring named, or None when it was the recorded one already (nothing appended)."""
    from core.store import utc_now
    from core.transitions import record_config_change

    used = keys.keyring()
    if used is None:
        return None
    with store.transaction("keyring accepted") as tx:
        if recorded_keyring(tx.conn) == used:
            return None
        record_config_change(tx, KEYRING_USED, {"keyring": used, "by": by}, at=utc_now())
    return used


def _lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


_default: OperatorKey | None = None
_default_guard = threading.Lock()


def default() -> OperatorKey:
    """The process's operator key over the OS keyring (one, so a key is read once)."""
    global _default
    with _default_guard:
        if _default is None:
            _default = OperatorKey(KeyringKeyStore())
        return _default
