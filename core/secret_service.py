# mypy: disallow-untyped-calls=False
# (the keyring package's backends carry no type hints; this module only extends one)
"""The Secret Service (gnome-keyring, KWallet) as Signoff uses it, steady under several writers.

The ``keyring`` package's Secret Service backend assumes nobody else writes while it reads.
Signoff's processes do (each proxy anchors the head, the tray witnesses it), and gnome-keyring
(checked with 42.1) then answers "object does not exist" for a moment in two places:

1. The item a search just found, when another process replaced it (``CreateItem`` with
   replace): the read fails with ``ItemNotFoundException``. It is a newer value being written,
   not a missing one: read again.
2. The ``default`` alias itself, while the daemon reloads the keyring file another write just
   changed. The ``keyring`` package then *creates a new collection* (``get_default_collection``),
   which prompts the person for a new keyring's password; with no display to prompt on, the
   daemon was seen to exit, taking the unlocked keyring with it. Here a missing alias is asked
   for again for a while before anything is created (a desktop with truly no default keyring
   still gets the package's usual prompt, once the alias has stayed missing).

3. Calls made at the same time crash it: one process replacing an item 300 times while three
   others read it made the daemon exit in about one run of three (checked with 42.1, with and
   without rule 2's retries), and with every call made under one lock, in none of ten. So every
   call Signoff makes into the Secret Service, from any of its processes, is made under the one
   lock per user that every keyring call of Signoff's is made under (core/keyring_calls.py).

Each operation is retried whole, for at most ``PATIENCE`` seconds; every other failure is the
caller's (core/keyring_calls.py bounds the whole call by its deadline).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing
from typing import Any, TypeVar

import secretstorage
from keyring.backends import SecretService
from keyring.errors import InitError, KeyringLocked
from secretstorage.exceptions import ItemNotFoundException, SecretStorageException

from core.keyring_calls import one_at_a_time

T = TypeVar("T")

PATIENCE = 2.0  # seconds: a reload of the keyring file takes milliseconds


def _steadily(operation: Callable[[], T]) -> T:
    """``operation()``, again after a short pause while it meets an object that vanished."""
    deadline = time.monotonic() + PATIENCE
    pause = 0.005
    while True:
        try:
            return operation()
        except ItemNotFoundException:
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class Keyring(SecretService.Keyring):
    """``keyring``'s Secret Service backend, reading and writing steadily (rules 1 to 3)."""

    def get_preferred_collection(self) -> Any:
        """The collection, unlocked, on a D-Bus connection of its own that the caller closes;
        closed here on every failure (the package's own leaves it open when it raises)."""
        bus = secretstorage.dbus_init()
        try:
            collection = self._collection(bus)
            if collection.is_locked():
                collection.unlock()
                if collection.is_locked():  # the person dismissed the unlock prompt
                    raise KeyringLocked("Failed to unlock the collection!")
        except BaseException:
            bus.close()
            raise
        return collection

    def _collection(self, bus: Any) -> Any:
        try:
            if hasattr(self, "preferred_collection"):
                return secretstorage.Collection(bus, self.preferred_collection)
            try:
                return _steadily(lambda: secretstorage.Collection(bus))
            except ItemNotFoundException:
                # No default collection at all: the package's own way, which makes one (the
                # person is asked for its password).
                return secretstorage.get_default_collection(bus)
        except SecretStorageException as e:
            raise InitError(f"Failed to open the default collection: {e}.") from e

    def get_password(self, service: str, username: str) -> str | None:
        return one_at_a_time(lambda: _steadily(lambda: self._read(service, username)), writes=False)

    def _read(self, service: str, username: str) -> str | None:
        collection = self.get_preferred_collection()
        with closing(collection.connection):
            for item in collection.search_items(self._query(service, username)):
                self.unlock(item)
                return str(item.get_secret().decode("utf-8"))
        return None

    def set_password(self, service: str, username: str, password: str) -> None:
        write = super().set_password
        one_at_a_time(lambda: _steadily(lambda: write(service, username, password)), writes=True)

    def delete_password(self, service: str, username: str) -> None:
        delete = super().delete_password
        one_at_a_time(lambda: _steadily(lambda: delete(service, username)), writes=True)


def steady(backend: Any) -> Any:
    """``backend``, or this module's steady form of it when it is the ``keyring`` package's
    own Secret Service backend."""
    if type(backend) is SecretService.Keyring:
        return Keyring()
    return backend
