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

4. One D-Bus connection and one Secret Service session per process, kept between calls (issue
   "Speed"): the package's own backend opens a connection, and an encrypted session (a
   Diffie-Hellman exchange, about 9 ms of the daemon's and our time), for every read and every
   write. A call that fails on the kept connection closes it; the call is made once more on a
   new one when the kept one was an earlier call's (the daemon may have restarted since, which
   leaves a connection that answers but a session it no longer knows). A person's dismissal of
   an unlock prompt is not asked again.

Each operation is retried whole, for at most ``PATIENCE`` seconds; every other failure is the
caller's (core/keyring_calls.py bounds the whole call by its deadline).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

import secretstorage
import secretstorage.util
from keyring.backends import SecretService
from keyring.errors import InitError, KeyringLocked, PasswordDeleteError
from secretstorage.exceptions import (
    ItemNotFoundException,
    PromptDismissedException,
    SecretStorageException,
)

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


class _Kept:
    """The process's one connection to the Secret Service and its session (rule 4)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # its users also hold the lock of every keyring call
        self.pid = 0
        self.bus: Any = None
        self.session: Any = None

    def take(self) -> tuple[Any, bool]:
        """The kept connection and whether an earlier call made it, else a new one."""
        if self.bus is not None and self.pid == os.getpid():
            return self.bus, True
        self.bus, self.session, self.pid = secretstorage.dbus_init(), None, os.getpid()
        return self.bus, False

    def drop(self) -> None:
        bus, self.bus, self.session = self.bus, None, None
        if bus is not None and self.pid == os.getpid():  # a parent's socket is not ours to close
            with suppress(Exception):
                bus.close()


_kept = _Kept()


class Keyring(SecretService.Keyring):
    """``keyring``'s Secret Service backend, reading and writing steadily (rules 1 to 4)."""

    def get_preferred_collection(self) -> Any:
        """The collection, unlocked, on the process's kept connection (rule 4): the caller
        holds ``_kept.lock`` and leaves the connection open."""
        bus, _ = _kept.take()
        collection = self._collection(bus)
        if _kept.session is None:  # every read and write of ours needs one
            _kept.session = secretstorage.util.open_session(bus)
        collection.session = _kept.session
        if collection.is_locked():
            collection.unlock()
            if collection.is_locked():  # the person dismissed the unlock prompt
                raise KeyringLocked("Failed to unlock the collection!")
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

    def _on_kept(self, use: Callable[[Any], T]) -> T:
        """``use(collection)`` on the kept connection, once more on a new one when a kept one
        fails (rule 4)."""
        with _kept.lock:
            while True:
                _, reused = _kept.take()
                try:
                    return use(self.get_preferred_collection())
                except PasswordDeleteError:
                    raise  # an answer (nothing to delete), not a failure of the connection
                except BaseException as e:
                    _kept.drop()
                    if not reused or isinstance(e, KeyringLocked | PromptDismissedException):
                        raise

    def get_password(self, service: str, username: str) -> str | None:
        return one_at_a_time(
            lambda: _steadily(lambda: self._on_kept(partial(self._read, service, username))),
            writes=False,
            per_bus=True,
        )

    def _read(self, service: str, username: str, collection: Any) -> str | None:
        for item in collection.search_items(self._query(service, username)):
            self.unlock(item)
            return str(item.get_secret().decode("utf-8"))
        return None

    def set_password(self, service: str, username: str, password: str) -> None:
        attributes = self._query(service, username, application=self.appid)
        label = f"Password for '{username}' on '{service}'"  # as the package labels its own

        def write(collection: Any) -> None:
            collection.create_item(label, attributes, password, replace=True)

        one_at_a_time(lambda: _steadily(lambda: self._on_kept(write)), writes=True, per_bus=True)

    def delete_password(self, service: str, username: str) -> None:
        def delete(collection: Any) -> None:
            for item in collection.search_items(self._query(service, username)):
                item.delete()
                return
            raise PasswordDeleteError("No such password!")

        one_at_a_time(lambda: _steadily(lambda: self._on_kept(delete)), writes=True, per_bus=True)


def steady(backend: Any) -> Any:
    """``backend``, or this module's steady form of it when it is the ``keyring`` package's
    own Secret Service backend."""
    if type(backend) is SecretService.Keyring:
        return Keyring()
    return backend
