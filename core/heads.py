"""Where a witnessed chain head is kept, out of reach of whoever can write the database.

Rules (docs/decisions/0065-the-anchor-follows-the-database.md):

1. A ``HeadStore`` keeps one head per database *id* (the random id made with the database and
   kept inside it): the sequence and hash of the last event anchored for that database. The
   head is looked up by the id, never by where the file lies, so a copy of the database put
   back anywhere (moved, reached through a symbolic link, copied to another folder) meets the
   head kept for it, and must hold it (core/anchor.py).
2. Beside it, one record per *place* a database was anchored at (its absolute path as named,
   and as resolved): the head of the database anchored there when that place was first
   anchored. It is what tells that another database now lies where one was anchored: a
   database the keyring does not know, or one it knows from elsewhere, opened at such a place
   is ``DatabaseUnconfirmed`` until the operator confirms it (``confirm``), and nothing
   approved runs meanwhile. A place record is written once per place and database, not per
   head, so an approved side effect still costs one keyring write.
3. A place record is also what the heads of Signoff before this decision were: ``db:<path>``,
   the head of the database at that path. Read for a database whose id holds no head yet, a
   place record of the same database is its kept head; so nothing anchored before the upgrade
   is forgotten.

``KeyringHeadStore`` keeps them in the OS keyring (service ``signoff``), each call with a
deadline (core/keyring_calls.py). A missing, failing or unanswering keyring backend, whatever it
raises, makes it raise ``HeadUnavailable``: the chain is then "not anchored", which callers
report as a state, never a crash. ``MemoryHeadStore`` is the in-process implementation for tests
and for callers with nowhere better to keep a head.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core import canonical, keyring_calls, paths
from core.chain import Head
from core.errors import DatabaseUnconfirmed, HeadUnavailable, JSONRefused

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

SERVICE = "signoff"


class HeadStore(Protocol):
    def load(self, database_id: str) -> Head | None:
        """The head kept for the database ``database_id``, or None when none is kept."""
        ...

    def save(self, head: Head) -> None:
        """Keep ``head`` for its database, replacing what was kept."""
        ...

    def placed(self, place: str) -> Head | None:
        """The head of the database anchored at ``place`` when the place was recorded."""
        ...

    def place(self, place: str, head: Head) -> None:
        """Record that ``head``'s database is the one anchored at ``place``."""
        ...


def places(database: Path) -> tuple[str, ...]:
    """Where the database at ``database`` lies (rule 2): its absolute path as named, and the
    path it resolves to when that is another (a folder on the way is a symbolic link). The
    home ``SIGNOFF_HOME`` names is resolved when read (core/paths.py), so for a database in it
    the path as the variable names it counts too: a link put on the way later is seen."""
    given = Path(database).absolute()
    found = [str(given), os.path.realpath(given)]
    named = paths.named_homes().get(Path(found[1]).parent)
    if named is not None:
        found.append(str(named / given.name))
    return tuple(dict.fromkeys(found))


def kept_head(heads: HeadStore, database: Path, database_id: str) -> tuple[Head | None, list[str]]:
    """The head kept for the database ``database_id`` lying at ``database`` (rules 1-3), or None
    when the keyring keeps none for it, and the places it lies at that hold no record yet;
    ``DatabaseUnconfirmed`` when another database was anchored where it lies, and
    ``HeadUnavailable`` when the keyring cannot be read."""
    kept = heads.load(database_id)
    unrecorded = []
    for place in places(database):
        there = heads.placed(place)
        if there is None:
            unrecorded.append(place)
        elif there.database_id != database_id:
            raise unconfirmed(place, database_id, there)
        elif kept is None or there.seq > kept.seq:  # rule 3: a head kept before the upgrade
            kept = there
    return kept, unrecorded


def unconfirmed(place: str, database_id: str, there: Head) -> DatabaseUnconfirmed:
    return DatabaseUnconfirmed(
        f"another database lies where one was anchored: {place} is database {database_id},"
        f" but database {there.database_id} was anchored there (its event {there.seq} kept in"
        " the OS keyring). It was replaced, or another Signoff home moved to its place. Nothing"
        " approved runs until you confirm this database is yours: 'signoff anchor accept', or"
        " the tray's alarm menu.",
        anchored_seq=there.seq,
    )


def confirm(heads: HeadStore, database: Path, head: Head) -> tuple[str, ...]:
    """The operator's word that the database of ``head`` is the one at ``database`` (rule 2):
    each place it lies at records it; the places, for the operator to read."""
    found = places(database)
    if heads.load(head.database_id) is None:  # never moves a kept head back
        heads.save(head)
    for place in found:
        heads.place(place, head)
    return found


def encode_head(head: Head) -> str:
    return canonical.dumps_text({"database": head.database_id, "seq": head.seq, "hash": head.hash})


def decode_head(text: str) -> Head:
    """A head from its stored text; anything else is ``HeadUnavailable`` (not a usable anchor)."""
    try:
        value = canonical.loads(text)
    except JSONRefused as e:
        raise HeadUnavailable(f"the kept head is not readable: {e}") from None
    if (
        not isinstance(value, dict)
        or set(value) != {"database", "seq", "hash"}
        or not isinstance(value["database"], str)
        or not isinstance(value["hash"], str)
        or not isinstance(value["seq"], int)
        or isinstance(value["seq"], bool)
        or value["seq"] < 0
    ):
        raise HeadUnavailable("the kept head is not a Signoff head")
    return Head(value["database"], value["seq"], value["hash"])


def head_key(database_id: str) -> str:
    """The keyring user name of a database's head (rule 1)."""
    return f"head:{database_id}"


def place_key(place: str) -> str:
    """The keyring user name of a place's record (rule 2; the name heads had before, rule 3)."""
    return f"db:{place}"


class MemoryHeadStore:
    def __init__(self) -> None:
        self._heads: dict[str, str] = {}

    def load(self, database_id: str) -> Head | None:
        return self._read(head_key(database_id))

    def save(self, head: Head) -> None:
        self._heads[head_key(head.database_id)] = encode_head(head)

    def placed(self, place: str) -> Head | None:
        return self._read(place_key(place))

    def place(self, place: str, head: Head) -> None:
        self._heads[place_key(place)] = encode_head(head)

    def _read(self, user: str) -> Head | None:
        text = self._heads.get(user)
        return None if text is None else decode_head(text)


class KeyringHeadStore:
    """Heads in the OS keyring through the ``keyring`` package (or a given backend)."""

    def __init__(self, backend: KeyringBackend | None = None) -> None:
        self._backend = backend

    def _keyring(self) -> KeyringBackend:
        return keyring_calls.backend(self._backend)  # type: ignore[no-any-return]

    def load(self, database_id: str) -> Head | None:
        return self._read(head_key(database_id))

    def save(self, head: Head) -> None:
        self._write(head_key(head.database_id), head)

    def placed(self, place: str) -> Head | None:
        return self._read(place_key(place))

    def place(self, place: str, head: Head) -> None:
        self._write(place_key(place), head)

    # Any exception a backend raises is a keyring that cannot be used: keyring wraps only some
    # of its libraries' errors (secretstorage's SecretServiceNotAvailableException escapes
    # get_password when the daemon leaves the bus in the middle of the call).

    def _read(self, user: str) -> Head | None:
        try:
            text = keyring_calls.call(lambda: self._keyring().get_password(SERVICE, user))
        except Exception as e:
            raise HeadUnavailable(
                f"the OS keyring cannot be read: {keyring_calls.describe(e)}"
            ) from None
        return None if text is None else decode_head(text)

    def _write(self, user: str, head: Head) -> None:
        text = encode_head(head)
        try:
            keyring_calls.call(lambda: self._keyring().set_password(SERVICE, user, text))
        except Exception as e:
            raise HeadUnavailable(
                f"the OS keyring cannot be written: {keyring_calls.describe(e)}"
            ) from None
