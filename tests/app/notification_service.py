"""A fake org.freedesktop.Notifications service on the session bus, for the tests and the bench.

It speaks the freedesktop notification protocol with dbus-fast (the library the app's client
also uses; tests/app/test_xvfb_*.py run the app against a real daemon, xfce4-notifyd, too):
``Notify``, ``GetCapabilities`` (``actions`` and ``body``, and ``body-markup`` when asked),
``GetServerInformation``, ``CloseNotification``, and the ``ActionInvoked`` and
``NotificationClosed`` signals. It runs on its own thread with its own asyncio loop, as a
notification daemon is its own process: the app under test talks to it only over the bus.

Every ``Notify`` is recorded (app name, summary, body, actions as (key, label) pairs, the
wall-clock and monotonic times of its arrival); ``invoke(id, key)`` does what a click on a
button does: ``ActionInvoked(id, key)``, then ``NotificationClosed(id, 2)`` as most servers
close a notification whose button was pressed.

    with NotificationService() as service:       # owns the name, or raises
        ...
        [shown] = service.snapshot()             # once the app's Notify arrived
        service.invoke(shown.id, shown.action("Approve"))
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any

from dbus_fast import BusType, DBusError, ErrorType, NameFlag, RequestNameReply
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusDict, DBusInt32, DBusSignature, DBusStr, DBusUInt32
from dbus_fast.service import ServiceInterface, dbus_method, dbus_signal

from tests.app.bus_thread import BusThread

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
SERVER_NAME = "Signoff test notifications"
CLOSED_DISMISSED = 2
CLOSED_BY_CALL = 3

DBusStrings = Annotated[list[str], DBusSignature("as")]
ServerInfo = Annotated[list[str], DBusSignature("ssss")]
IdAndKey = Annotated[list[Any], DBusSignature("us")]
IdAndReason = Annotated[list[int], DBusSignature("uu")]


def session_bus_available() -> bool:
    return bool(os.environ.get("DBUS_SESSION_BUS_ADDRESS"))


@dataclass(frozen=True)
class Shown:
    """One Notify call, as the service received it."""

    id: int
    app_name: str
    summary: str
    body: str
    actions: tuple[tuple[str, str], ...]  # (key, label)
    wall: float  # time.time() at arrival
    monotonic: float  # time.perf_counter() at arrival

    @property
    def labels(self) -> list[str]:
        return [label for _, label in self.actions]

    def action(self, label: str) -> str:
        """The key the client chose for the button with this label."""
        keys = [key for key, shown in self.actions if shown == label]
        if len(keys) != 1:
            raise AssertionError(f"no single action labelled {label!r} in {self.actions}")
        return keys[0]


class _Interface(ServiceInterface):
    def __init__(self, service: NotificationService) -> None:
        super().__init__(NAME)
        self.service = service

    @dbus_method()
    async def Notify(  # the protocol's names
        self,
        app_name: DBusStr,
        replaces_id: DBusUInt32,
        app_icon: DBusStr,
        summary: DBusStr,
        body: DBusStr,
        actions: DBusStrings,
        hints: DBusDict,
        expire_timeout: DBusInt32,
    ) -> DBusUInt32:
        if self.service.refuse:
            self.service.refuse -= 1
            raise DBusError(ErrorType.FAILED, "this notification service refuses this Notify")
        held = self.service.hold
        if held is not None:  # a slow daemon: the answer waits until the test releases it
            self.service.holding.set()
            await asyncio.to_thread(held.wait, 30)
        return self.service._record(app_name, summary, body, actions)

    @dbus_method()
    def GetCapabilities(self) -> DBusStrings:
        return ["actions", "body", *(["body-markup"] if self.service.markup else [])]

    @dbus_method()
    def GetServerInformation(self) -> ServerInfo:
        return [SERVER_NAME, "signoff-tests", "1.0", "1.2"]

    @dbus_method()
    # No return annotation: dbus-fast would read ``None`` as a signature.
    def CloseNotification(self, id: DBusUInt32):
        self.service.closed.append((id, CLOSED_BY_CALL))
        self.NotificationClosed(id, CLOSED_BY_CALL)

    @dbus_signal()
    def ActionInvoked(self, id: int, action_key: str) -> IdAndKey:
        return [id, action_key]

    @dbus_signal()
    def NotificationClosed(self, id: int, reason: int) -> IdAndReason:
        return [id, reason]


class NotificationService(BusThread):
    """Owns ``org.freedesktop.Notifications`` on the session bus while in its ``with``."""

    def __init__(self, *, refuse: int = 0, markup: bool = False) -> None:
        super().__init__("the fake notification service")
        self.refuse = refuse  # answer this many Notify calls with an error, as a broken daemon
        self.markup = markup  # advertise body-markup
        self.hold: threading.Event | None = None  # set: each Notify is answered only once set
        self.holding = threading.Event()  # a Notify is being held
        self.shown: list[Shown] = []
        self.closed: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._next_id = 1
        self._interface: _Interface | None = None

    # --- the test's side ----------------------------------------------------------------

    def snapshot(self) -> list[Shown]:
        with self._lock:
            return list(self.shown)

    def close(self, notification_id: int) -> None:
        """The person dismissed it: NotificationClosed(id, 2)."""

        def emit() -> None:
            assert self._interface is not None
            self._interface.NotificationClosed(notification_id, CLOSED_DISMISSED)

        self._call(emit)

    def invoke(self, notification_id: int, action_key: str) -> None:
        """A click on a button: ActionInvoked, then the notification closes (dismissed)."""

        def emit() -> None:
            assert self._interface is not None
            self._interface.ActionInvoked(notification_id, action_key)
            self._interface.NotificationClosed(notification_id, CLOSED_DISMISSED)

        self._call(emit)

    def _call(self, fn: Any) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the fake notification service is not running")
        loop.call_soon_threadsafe(fn)

    # --- the service's thread -----------------------------------------------------------

    def _record(self, app_name: str, summary: str, body: str, actions: list[str]) -> int:
        wall, monotonic = time.time(), time.perf_counter()
        pairs = tuple(zip(actions[0::2], actions[1::2], strict=True))
        with self._lock:
            notification_id = self._next_id
            self._next_id += 1
            self.shown.append(
                Shown(notification_id, app_name, summary, body, pairs, wall, monotonic)
            )
        return notification_id

    async def _serve(self) -> None:
        assert self._stop is not None
        bus = await MessageBus(bus_type=BusType.SESSION).connect()
        try:
            self._interface = _Interface(self)
            bus.export(PATH, self._interface)
            reply = await bus.request_name(NAME, NameFlag.DO_NOT_QUEUE)
            if reply != RequestNameReply.PRIMARY_OWNER:
                raise RuntimeError(f"{NAME} is already owned on this bus ({reply.name})")
            self._ready.set()
            await self._stop.wait()
            await bus.release_name(NAME)
        finally:
            bus.disconnect()
            await bus.wait_for_disconnect()
