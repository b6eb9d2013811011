"""A client of the freedesktop notification service (``org.freedesktop.Notifications``) over
the session bus, with dbus-fast: what Signoff needs and desktop-notifier does not give.

- ``capabilities``: whether the daemon parses ``body-markup`` decides how a body is written
  (escaped, or as it is); desktop-notifier neither reads it nor escapes.
- ``close``: a notification whose request was decided elsewhere is taken off the screen.
- Signals are taken only from the connection that owns the service's name: another program on
  the session bus cannot press a button by sending ``ActionInvoked`` itself. When the name
  changes hands (the daemon restarted), the new owner is followed, its capabilities asked
  again, and ``on_restart`` is called: the old daemon's notifications went with it.
- The first call asks for the capabilities, which starts a daemon the bus activates on demand,
  before asking who owns the name.
- One connection, opened on first use; a failure raises ``NotificationFailed`` and drops the
  connection, so the next send starts afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

log = logging.getLogger("signoff.app")
NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
_BUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
URGENCY_NORMAL, URGENCY_CRITICAL = 1, 2


class NotificationFailed(Exception):
    """The notification service did not take a call (absent, refused, or the bus went away)."""


class Freedesktop:
    """``on_action(nid, key)`` and ``on_closed(nid)`` are called on the event loop."""

    def __init__(
        self,
        app_name: str,
        icon: str,
        on_action: Callable[[int, str], None],
        on_closed: Callable[[int], None],
        on_restart: Callable[[], None] = lambda: None,
    ) -> None:
        self.app_name, self.icon = app_name, icon
        self.on_action, self.on_closed, self.on_restart = on_action, on_closed, on_restart
        self.bus: MessageBus | None = None
        self.owner = ""  # the unique name of the service's connection: its signals only
        self._capabilities: frozenset[str] | None = None

    async def capabilities(self) -> frozenset[str]:
        await self._connect()
        if self._capabilities is None:
            [caps] = await self._call("GetCapabilities")
            self._capabilities = frozenset(str(c) for c in caps)
        return self._capabilities

    async def notify(
        self,
        summary: str,
        body: str,
        actions: list[tuple[str, str]],
        replaces: int = 0,
        *,
        urgency: int = URGENCY_CRITICAL,
        expires: int = 0,
        icon: str | None = None,
    ) -> int:
        """Show a notification; ``expires`` 0 keeps it until acted on, -1 lets the service
        choose (the specification's ``expire_timeout``); ``icon`` (a URI) in place of the
        app's own."""
        flat = [part for pair in actions for part in pair]
        hints = {
            "urgency": Variant("y", urgency),
            "desktop-entry": Variant("s", "dev.signoff.Signoff"),
        }
        # By default critical and no expiry: an approval is notified once, so it stays until
        # acted on.
        [nid] = await self._call(
            "Notify", "susssasa{sv}i",
            [self.app_name, replaces, icon or self.icon, summary, body, flat, hints, expires],
        )  # fmt: skip
        return int(nid)

    async def close(self, nid: int) -> None:
        await self._call("CloseNotification", "u", [nid])

    def disconnect(self) -> None:
        bus, self.bus = self.bus, None
        self._capabilities = None
        if bus is not None:
            bus.disconnect()

    # --- the bus ----------------------------------------------------------------------------

    async def _connect(self) -> MessageBus:
        if self.bus is not None and self.bus.connected:
            return self.bus
        try:
            bus = await MessageBus().connect()
        except Exception as e:  # no session bus, or it refused us
            raise NotificationFailed(f"no session bus: {e}") from e
        self.bus = bus
        try:
            match = f"type='signal',interface='{NAME}',path='{PATH}'"
            await self._raw(bus, *_BUS, "AddMatch", "s", [match])
            owner = f"type='signal',sender='{_BUS[0]}',member='NameOwnerChanged',arg0='{NAME}'"
            await self._raw(bus, *_BUS, "AddMatch", "s", [owner])
            [caps] = await self._raw(bus, NAME, PATH, NAME, "GetCapabilities", "", [])
            self._capabilities = frozenset(str(c) for c in caps)
            [self.owner] = await self._raw(bus, *_BUS, "GetNameOwner", "s", [NAME])
        except NotificationFailed:
            self.disconnect()
            raise
        bus.add_message_handler(self._signal)
        return bus

    async def _call(self, member: str, signature: str = "", body: list[Any] | None = None) -> Any:
        bus = await self._connect()
        try:
            return await self._raw(bus, NAME, PATH, NAME, member, signature, body or [])
        except NotificationFailed:
            self.disconnect()
            raise

    @staticmethod
    async def _raw(
        bus: MessageBus, dest: str, path: str, iface: str, member: str, sig: str, body: list[Any]
    ) -> Any:
        message = Message(destination=dest, path=path, interface=iface, member=member,
                          signature=sig, body=body)  # fmt: skip
        try:
            reply = await bus.call(message)
        except Exception as e:  # the connection broke
            raise NotificationFailed(f"{member}: {e}") from e
        if reply is None or reply.message_type == MessageType.ERROR:
            detail = reply.body if reply is not None else "no reply"
            raise NotificationFailed(f"{member}: {getattr(reply, 'error_name', '')} {detail}")
        return reply.body

    def _signal(self, message: Message) -> bool:
        if message.message_type != MessageType.SIGNAL:
            return False
        if message.member == "NameOwnerChanged" and message.sender == _BUS[0]:
            name, _, new_owner = message.body
            if name == NAME and new_owner != self.owner:
                self.owner, self._capabilities = new_owner, None
                self.on_restart()
            return False
        if message.interface != NAME:
            return False
        if message.sender != self.owner:
            log.warning("ignored %s from %s: not the notification service", message.member,
                        message.sender)  # fmt: skip
            return False
        if message.member == "ActionInvoked" and message.signature == "us":
            self.on_action(int(message.body[0]), str(message.body[1]))
        elif message.member == "NotificationClosed" and message.signature == "uu":
            self.on_closed(int(message.body[0]))
        return False
