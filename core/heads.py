"""Where a witnessed chain head is kept, out of reach of whoever can write the database.

A ``HeadStore`` keeps one head per database *location* (its absolute path): the database id,
sequence and hash of the last event a witness verified there. Keying by location, not by
database id, is what lets a replaced file be caught: the head kept for this path names the
database that was here (see docs/decisions/0003-keyring-head.md).

``KeyringHeadStore`` keeps heads in the OS keyring (service ``signoff``), each call with a
deadline (core/keyring_calls.py). A missing, failing or unanswering keyring backend, whatever it
raises, makes it raise ``HeadUnavailable``: the chain is then "not
anchored", which callers report as a state, never a crash. ``MemoryHeadStore`` is the
in-process implementation for tests and for callers with nowhere better to keep a head.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core import canonical, keyring_calls
from core.chain import Head
from core.errors import HeadUnavailable, JSONRefused

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

SERVICE = "signoff"


class HeadStore(Protocol):
    def load(self, location: Path) -> Head | None:
        """The head kept for the database at ``location``, or None when none is kept."""
        ...

    def save(self, location: Path, head: Head) -> None:
        """Keep ``head`` for the database at ``location``, replacing what was kept."""
        ...


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


def _key(location: Path) -> str:
    return f"db:{Path(location).absolute()}"


class MemoryHeadStore:
    def __init__(self) -> None:
        self._heads: dict[str, str] = {}

    def load(self, location: Path) -> Head | None:
        text = self._heads.get(_key(location))
        return None if text is None else decode_head(text)

    def save(self, location: Path, head: Head) -> None:
        self._heads[_key(location)] = encode_head(head)


class KeyringHeadStore:
    """Heads in the OS keyring through the ``keyring`` package (or a given backend)."""

    def __init__(self, backend: KeyringBackend | None = None) -> None:
        self._backend = backend

    def _keyring(self) -> KeyringBackend:
        return keyring_calls.backend(self._backend)  # type: ignore[no-any-return]

    # Any exception a backend raises is a keyring that cannot be used: keyring wraps only some
    # of its libraries' errors (secretstorage's SecretServiceNotAvailableException escapes
    # get_password when the daemon leaves the bus in the middle of the call).

    def load(self, location: Path) -> Head | None:
        try:
            text = keyring_calls.call(lambda: self._keyring().get_password(SERVICE, _key(location)))
        except Exception as e:
            raise HeadUnavailable(
                f"the OS keyring cannot be read: {keyring_calls.describe(e)}"
            ) from None
        return None if text is None else decode_head(text)

    def save(self, location: Path, head: Head) -> None:
        text = encode_head(head)
        try:
            keyring_calls.call(lambda: self._keyring().set_password(SERVICE, _key(location), text))
        except Exception as e:
            raise HeadUnavailable(
                f"the OS keyring cannot be written: {keyring_calls.describe(e)}"
            ) from None
