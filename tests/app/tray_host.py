"""A stand-in StatusNotifierItem host on a D-Bus bus, for the tray label tests.

It does what a panel's tray (Plasma, GNOME's AppIndicator extension, xfce4-panel) does, with
dbus-fast (not Qt, so the client is not the code under test): it owns
``org.kde.StatusNotifierWatcher`` (unless ``watch`` is false), records every
``RegisterStatusNotifierItem``, and reads a registered item's menu the way a host draws it:
the item's ``Menu`` property, then ``com.canonical.dbusmenu.GetLayout`` on that path. It runs on
its own thread with its own asyncio loop, as a panel is its own process.

    with TrayHost(address) as host:
        item = host.wait_for_item(20)             # the bus name the item registered with
        labels = host.menu_labels(item)           # each entry's dbusmenu "label", as sent

With ``watch=False`` beside a real panel (which owns the watcher), it reads what the panel
reads: ``watched_items`` asks the panel's watcher, ``item_properties`` and ``menu`` read the
item as the panel does, ``click`` sends the dbusmenu ``Event`` a panel sends on a click.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from dbus_fast import (
    DBusError,
    Message,
    MessageType,
    NameFlag,
    PropertyAccess,
    RequestNameReply,
    Variant,
)
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusBool, DBusInt32, DBusSignature, DBusStr
from dbus_fast.service import ServiceInterface, dbus_method, dbus_property, dbus_signal

from tests.app.bus_thread import BusThread

WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
ITEM_PATH = "/StatusNotifierItem"
ITEM_INTERFACE = "org.kde.StatusNotifierItem"
DBusStrings = Annotated[list[str], DBusSignature("as")]
T = TypeVar("T")


@dataclass(frozen=True)
class MenuEntry:
    """One entry of a dbusmenu, as a host receives it."""

    id: int
    label: str  # as sent: dbusmenu's "_" marks still in it
    enabled: bool
    properties: dict[str, Any]


class _Watcher(ServiceInterface):
    def __init__(self, host: TrayHost) -> None:
        super().__init__(WATCHER)
        self.host = host

    @dbus_method()
    def RegisterStatusNotifierItem(self, service: DBusStr):  # the protocol's names
        self.host._registered(service)
        self.StatusNotifierItemRegistered(service)

    @dbus_method()
    def RegisterStatusNotifierHost(self, service: DBusStr):
        pass

    @dbus_property(access=PropertyAccess.READ)
    def RegisteredStatusNotifierItems(self) -> DBusStrings:
        return list(self.host.items)

    @dbus_property(access=PropertyAccess.READ)
    def IsStatusNotifierHostRegistered(self) -> DBusBool:
        return True

    @dbus_property(access=PropertyAccess.READ)
    def ProtocolVersion(self) -> DBusInt32:
        return 0

    @dbus_signal()
    def StatusNotifierItemRegistered(self, service: str) -> DBusStr:
        return service


class TrayHost(BusThread):
    """Connected to the bus at ``address`` while in its ``with``; owns the watcher's name when
    ``watch``."""

    def __init__(self, address: str, *, watch: bool = True) -> None:
        super().__init__("the tray host")
        self.address = address
        self.watch = watch
        self.items: list[str] = []
        self._item = threading.Event()
        self._bus: MessageBus | None = None

    # --- the test's side ----------------------------------------------------------------

    def wait_for_item(self, timeout: float) -> str:
        """The bus name of the first item that registered, waiting up to ``timeout`` s."""
        if not self._item.wait(timeout):
            raise AssertionError(f"no StatusNotifierItem registered within {timeout:.0f} s")
        return self.items[0]

    def menu_labels(self, item: str) -> list[str]:
        """The ``label`` of each entry of the item's menu, as the item sent it."""
        return self._call(self._menu_labels(item))

    def watched_items(self) -> list[str]:
        """``RegisteredStatusNotifierItems`` of whoever owns the watcher on this bus."""
        return self._call(self._watched_items())

    def owner_pid(self, name: str) -> int:
        """The process that owns bus name ``name``."""
        return self._call(self._owner_pid(name))

    def item_properties(self, item: str) -> dict[str, Any]:
        """Every property of the item (``org.kde.StatusNotifierItem``), unwrapped."""
        return self._call(self._item_properties(item))

    def menu(self, item: str) -> list[MenuEntry]:
        """The top level of the item's menu as ``GetLayout`` gives it, separators left out."""
        return self._call(self._menu(item))

    def click(self, item: str, entry: int) -> None:
        """The dbusmenu ``Event`` "clicked" on ``entry`` of the item's menu."""
        self._call(self._click(item, entry))

    def exporters(self, pid: int) -> list[str]:
        """The bus names of process ``pid`` that export an object at /StatusNotifierItem."""
        return self._call(self._exporters(pid))

    # --- the host's thread --------------------------------------------------------------

    def _registered(self, service: str) -> None:
        self.items.append(service)
        self._item.set()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(20)

    async def _ask(
        self, destination: str, path: str, interface: str, member: str,
        signature: str = "", body: list[Any] | None = None,
    ) -> list[Any]:  # fmt: skip
        assert self._bus is not None
        message = Message(destination=destination, path=path, interface=interface,
                          member=member, signature=signature, body=body or [])  # fmt: skip
        reply = await self._bus.call(message)
        assert reply is not None
        if reply.message_type == MessageType.ERROR:
            raise AssertionError(f"{member} on {destination}{path}: {reply.error_name}")
        return reply.body

    async def _menu_labels(self, item: str) -> list[str]:
        properties = ("org.freedesktop.DBus.Properties", "Get", "ss")
        (menu,) = await self._ask(item, ITEM_PATH, *properties, [ITEM_INTERFACE, "Menu"])
        _revision, (_id, _properties, children) = await self._ask(
            item, menu.value, "com.canonical.dbusmenu", "GetLayout", "iias", [0, -1, []]
        )
        labels = []
        for child in children:
            _child_id, properties, _grandchildren = child.value
            if "label" in properties:
                labels.append(properties["label"].value)
        return labels

    async def _watched_items(self) -> list[str]:
        properties = ("org.freedesktop.DBus.Properties", "Get", "ss")
        body = [WATCHER, "RegisteredStatusNotifierItems"]
        (items,) = await self._ask(WATCHER, WATCHER_PATH, *properties, body)
        return list(items.value)

    async def _owner_pid(self, name: str) -> int:
        dbus = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
        (owner,) = await self._ask(*dbus, "GetNameOwner", "s", [name])
        (pid,) = await self._ask(*dbus, "GetConnectionUnixProcessID", "s", [owner])
        return int(pid)

    async def _item_properties(self, item: str) -> dict[str, Any]:
        (found,) = await self._ask(
            item, ITEM_PATH, "org.freedesktop.DBus.Properties", "GetAll", "s", [ITEM_INTERFACE]
        )
        return {name: variant.value for name, variant in found.items()}

    async def _menu(self, item: str) -> list[MenuEntry]:
        menu = (await self._item_properties(item))["Menu"]
        _revision, (_id, _properties, children) = await self._ask(
            item, menu, "com.canonical.dbusmenu", "GetLayout", "iias", [0, -1, []]
        )
        entries = []
        for child in children:
            entry_id, properties, _grandchildren = child.value
            values = {name: variant.value for name, variant in properties.items()}
            if values.get("type") == "separator":
                continue
            entries.append(MenuEntry(entry_id, values.get("label", ""),
                                     values.get("enabled", True), values))  # fmt: skip
        return entries

    async def _click(self, item: str, entry: int) -> None:
        menu = (await self._item_properties(item))["Menu"]
        await self._ask(item, menu, "com.canonical.dbusmenu", "Event", "isvu",
                        [entry, "clicked", Variant("i", 0), 0])  # fmt: skip

    async def _exporters(self, pid: int) -> list[str]:
        dbus = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
        (names,) = await self._ask(*dbus, "ListNames")
        found = []
        for name in names:
            if not name.startswith(":"):
                continue
            (owner,) = await self._ask(*dbus, "GetConnectionUnixProcessID", "s", [name])
            if owner != pid:
                continue
            assert self._bus is not None
            try:
                await self._bus.introspect(name, ITEM_PATH)
            except DBusError:  # Qt answers "No such object path" for a path nothing is at
                continue
            found.append(name)
        return found

    async def _serve(self) -> None:
        assert self._stop is not None
        bus = self._bus = await MessageBus(bus_address=self.address).connect()
        try:
            if self.watch:
                bus.export(WATCHER_PATH, _Watcher(self))
                reply = await bus.request_name(WATCHER, NameFlag.DO_NOT_QUEUE)
                if reply != RequestNameReply.PRIMARY_OWNER:
                    raise RuntimeError(f"{WATCHER} is already owned on this bus ({reply.name})")
            self._ready.set()
            await self._stop.wait()
        finally:
            bus.disconnect()
            await bus.wait_for_disconnect()
