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
   call Signoff makes into the Secret Service, from any of its processes, is made under one lock
   per user (a file in the user's cache directory). A call waits for it blocked in the kernel
   (no polling); its caller's deadline (core/keyring_calls.py) bounds the wait, and a write
   whose caller gave up meanwhile is not made: it would land after its caller answered, and
   outside the lock it belonged under (the kept head's, the operator key's).

Each operation is retried whole, for at most ``PATIENCE`` seconds; every other failure is the
caller's (core/keyring_calls.py bounds the whole call by its deadline).
"""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import secretstorage
from keyring.backends import SecretService
from keyring.errors import InitError, KeyringLocked
from secretstorage.exceptions import ItemNotFoundException, SecretStorageException

from core import keyring_calls, private_files
from core.filelock import locked

T = TypeVar("T")

PATIENCE = 2.0  # seconds: a reload of the keyring file takes milliseconds


def _lock() -> Path:
    """One file per user, wherever the process was started from: in the user's own home as the
    password database names it, not as the environment does (an MCP host starts a proxy with
    few variables; a tray with its own XDG_CACHE_HOME would otherwise lock another file)."""
    home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    return private_files.make_dir(home / ".cache" / "signoff") / "secret-service.lock"


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
        if hasattr(self, "preferred_collection"):
            return super().get_preferred_collection()

        def default() -> Any:
            bus = secretstorage.dbus_init()
            try:
                return secretstorage.Collection(bus)
            except BaseException:
                bus.close()
                raise

        try:
            collection = _steadily(default)
        except ItemNotFoundException:
            return super().get_preferred_collection()  # none at all: the package's own way
        except SecretStorageException as e:
            raise InitError(f"Failed to open the default collection: {e}.") from e
        if collection.is_locked():
            collection.unlock()
            if collection.is_locked():  # the person dismissed the unlock prompt
                collection.connection.close()
                raise KeyringLocked("Failed to unlock the collection!")
        return collection

    def get_password(self, service: str, username: str) -> str | None:
        with locked(_lock(), None):
            return _steadily(lambda: self._read(service, username))

    def _read(self, service: str, username: str) -> str | None:
        collection = self.get_preferred_collection()
        with closing(collection.connection):
            for item in collection.search_items(self._query(service, username)):
                self.unlock(item)
                return str(item.get_secret().decode("utf-8"))
        return None

    def set_password(self, service: str, username: str, password: str) -> None:
        with locked(_lock(), None):
            if keyring_calls.given_up():  # waited past its caller's deadline: never write late
                raise keyring_calls.KeyringTimeout("the write waited too long; not made")
            _steadily(lambda: super(Keyring, self).set_password(service, username, password))

    def delete_password(self, service: str, username: str) -> None:
        with locked(_lock(), None):
            if keyring_calls.given_up():
                raise keyring_calls.KeyringTimeout("the deletion waited too long; not made")
            _steadily(lambda: super(Keyring, self).delete_password(service, username))


def steady(backend: Any) -> Any:
    """``backend``, or this module's steady form of it when it is the ``keyring`` package's
    own Secret Service backend."""
    if type(backend) is SecretService.Keyring:
        return Keyring()
    return backend
