"""Notifications, in order of preference: the platform's own with buttons (the freedesktop
service over D-Bus on Linux, app/freedesktop.py; desktop-notifier's notification centre on
macOS and WinRT on Windows), the tray's balloon, an in-app popup.

Rules:

1. Nothing the model wrote is markup: a body goes to a daemon that advertises ``body-markup``
   escaped (``core.present.markup_escape``), to any other sink as plain text. The balloon
   carries no request text at all (Qt may hand it to a markup-parsing daemon unescaped); the
   popup is plain text.
2. The body is Signoff's two lines first (the class in words; the request hash's fingerprint), bold
   where markup is parsed, which no argument can be; then one line per argument, and one per
   value set by Signoff, marked so (``core.present``); then one per value whose meaning is not
   its spelling, both said after an arrow that no argument's line begins with
   (``→ "/srv/link/x" resolves to /home/me/x``, ``Pending.meanings``), at most
   ``MOST_MEANINGS`` and the rest counted.
   Approve and Reject are offered only for a request whose every argument is shown whole and
   nothing marked, that is not destructive, interrupted, a duplicate or touching Signoff's own
   files, and whose every value means what it says (``Pending.needs_dialog``); otherwise the
   one button is Review, which opens the dialog.
3. A failed send is tried again on the native path (``RETRIES``) before this request falls
   back; the next request tries the native path afresh.
4. A notification follows its request: ``withdraw`` takes it off the screen when the request
   was decided elsewhere. The ids shown are kept in a file, so a notification left by an app
   that died is taken off by the next one (its buttons could no longer answer); only ids given
   by the same daemon connection are closed, never another program's.

5. A request's notification carries the icon of its class, or of "may have run"
   (``app.danger``): the same icon as the tray, the dialog and the history show.

6. The first start's welcome offers the demo with a button where the service has ``actions``,
   else as a balloon whose click starts it; it is the one message here that is not a request.

Nothing here decides: buttons emit signals; the app decides through ``core.approvals``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QAbstractButton, QMessageBox, QSystemTrayIcon

from app import danger
from app.freedesktop import URGENCY_NORMAL, Freedesktop, NotificationFailed
from app.model import Pending
from app.words import class_words
from core import private_files
from core.errors import UnsafePermissions
from core.present import markup_escape

log = logging.getLogger("signoff.app")
ICON = Path(__file__).resolve().parent.parent / "resources" / "icons" / "pending.svg"
RETRIES = (0.2, 1.0)  # seconds before each further try of a failed native send
WELCOME = "welcome"  # what ``sent`` records for the welcome; no approval id looks so
MOST_MEANINGS = 3  # values a notification says the meaning of (rule 2); the dialog shows all
KINDS = {"interrupted_side_effect": "started before, outcome unknown",
         "duplicate": "the same call already ran",
         "own_files": "touches Signoff's own files"}  # fmt: skip


@dataclass(frozen=True)
class Message:
    title: str
    head: tuple[str, ...]  # Signoff's own lines: the class, the fingerprint
    lines: tuple[str, ...]  # one per argument
    buttons: tuple[tuple[str, str], ...]  # (key, label)
    icon: Path = ICON  # the request's class (rule 5)
    meanings: tuple[str, ...] = ()  # one per value that means other than it says (rule 2)

    def body(self, markup: bool) -> str:
        text = (*self.lines, *self.meanings)  # request text in each: never bold (rule 2)
        if not markup:
            return "\n".join((*self.head, *text))
        return "\n".join((*(f"<b>{markup_escape(line)}</b>" for line in self.head),
                          *(markup_escape(line) for line in text)))  # fmt: skip


def message_of(p: Pending) -> Message:
    kind = class_words(p.side_effect)  # the words every window uses (decision 0045)
    if p.kind in KINDS:
        kind += f" · {KINDS[p.kind]}"
    # Two short lines: each fits a narrow daemon's line (xfce4-notifyd: 42 characters).
    head = (kind, f"fingerprint {p.fingerprint}")
    buttons = (("review", "Review…"),) if p.needs_dialog else (
        ("approve", "Approve"), ("reject", "Reject"))  # fmt: skip
    lines = tuple(line.text for line in p.view.lines())
    meanings = tuple(f"→ {said}" for said in p.meanings[:MOST_MEANINGS])
    if len(p.meanings) > MOST_MEANINGS:
        meanings += (f"(+{len(p.meanings) - MOST_MEANINGS} more such values: Review shows them)",)
    shown = danger.look(p.side_effect, p.kind)
    return Message(f"Approve {p.title}?", head, lines, buttons, shown.path, meanings)


class Notifier(QObject):
    clicked = Signal(str)  # open the dialog for this approval
    approve = Signal(str, str)  # approval id, the request hash the notification showed
    reject = Signal(str, str)
    demo = Signal()  # the welcome's "Try the demo" pressed, or its balloon clicked (rule 6)

    def __init__(
        self,
        tray: QSystemTrayIcon | None,
        *,
        native: bool = True,
        shown_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.tray = tray
        self.sent: list[tuple[str, str]] = []  # (approval id, how) for the record and tests
        self.shown_file = shown_file
        self.shown: dict[str, int] = {}  # approval id -> the daemon's notification id
        self._withdrawn: dict[int, str] = {}  # a press on one still says which request it was
        self._in_flight: set[str] = set()  # sends not answered yet
        self._gone: set[str] = set()  # withdrawn while their send was in flight
        self._native: Freedesktop | _Centre | None = None
        if native:
            self._native = _Centre(self) if sys.platform in ("darwin", "win32") else Freedesktop(
                "Signoff", ICON.as_uri(), self._action, self._closed, self._restarted)  # fmt: skip
        if tray is not None:
            tray.messageClicked.connect(self._balloon_clicked)
        self._last_balloon = ""
        self._welcome_id = 0  # the welcome's notification id, while it shows (rule 6)
        self._popups: dict[str, QMessageBox] = {}
        self._hashes: dict[str, str] = {}  # approval id -> the request hash it was shown with
        self._tasks: set[asyncio.Task[None]] = set()
        # One send at a time: one connection, and ids recorded in the order they were given.
        self._sending = asyncio.Lock()

    # --- what the app calls ---------------------------------------------------------------

    def notify(self, p: Pending) -> None:
        self._hashes[p.id] = p.request_hash  # what a press decides: the request shown
        if self._native is None:
            self._fallback(p)
            return
        self._spawn(self._send_native(p))

    def welcome(self, title: str, text: str, button: str, click: str) -> None:
        """The welcome (rule 6): ``button`` on a native notification with buttons, else a
        balloon saying ``text`` and ``click``."""
        if isinstance(self._native, Freedesktop):
            self._spawn(self._send_welcome(self._native, title, text, button, click))
        else:
            self._welcome_balloon(title, text + click)

    async def _send_welcome(
        self, native: Freedesktop, title: str, text: str, button: str, click: str
    ) -> None:
        try:
            if "actions" in await native.capabilities():
                body = markup_escape(text) if "body-markup" in await native.capabilities() else text
                self._welcome_id = await native.notify(
                    title, body, [("default", ""), ("demo", button)],
                    urgency=URGENCY_NORMAL, expires=-1,
                )  # fmt: skip
                self.sent.append((WELCOME, "native"))
                return
        except NotificationFailed as e:
            log.info("the welcome goes to the balloon: %s", e)
        self._welcome_balloon(title, text + click)

    def _welcome_balloon(self, title: str, text: str) -> None:
        if self.tray is None:
            return
        self._last_balloon = WELCOME
        self.tray.showMessage(title, text, QSystemTrayIcon.MessageIcon.Information, 20_000)
        self.sent.append((WELCOME, "balloon"))

    def showing(self) -> set[str]:
        """The requests with a notification or a popup on the screen."""
        return set(self.shown) | set(self._popups) | self._in_flight

    def withdraw(self, approval_id: str) -> None:
        """The request is no longer pending: its notification and popup go (rule 4)."""
        if approval_id in self._in_flight:  # taken off as soon as its send is answered
            self._gone.add(approval_id)
        popup = self._popups.pop(approval_id, None)
        if popup is not None:
            popup.close()
        nid = self.shown.pop(approval_id, None)
        if nid is not None and self._native is not None:
            self._withdrawn[nid] = approval_id
            self._save()
            self._spawn(self._close(nid))

    def clear_left_over(self) -> None:
        """Take off the notifications an earlier app left on the screen (rule 4)."""
        if isinstance(self._native, Freedesktop) and self.shown_file is not None:
            self._spawn(self._clear_left_over())

    def close(self) -> None:
        """Let go of the native connection (its buttons stop answering)."""
        if self._native is not None:
            self._native.disconnect()
        self._native = None

    # --- sending --------------------------------------------------------------------------

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_event_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_native(self, p: Pending) -> None:
        self._in_flight.add(p.id)
        try:
            await self._send_native_now(p)
        finally:
            self._in_flight.discard(p.id)
        if p.id in self._gone:  # decided elsewhere while it was being sent
            self._gone.discard(p.id)
            self.withdraw(p.id)

    async def _send_native_now(self, p: Pending) -> None:
        message = message_of(p)
        async with self._sending:
            for delay in (*RETRIES, None):
                native = self._native
                if native is None:  # the app closed it meanwhile
                    break
                try:
                    nid = await _deliver(native, message)
                except Exception as e:  # any failure: try again, then fall back
                    log.warning("native notification failed: %s", e)
                    if delay is not None:
                        await asyncio.sleep(delay)
                    continue
                self.shown[p.id] = nid
                self._save()
                self.sent.append((p.id, "native"))
                return
        self._fallback(p)

    async def _close(self, nid: int) -> None:
        try:
            if self._native is not None:
                await self._native.close(nid)
        except Exception as e:  # already gone, or the daemon went away
            log.info("closing notification %s: %s", nid, e)

    async def _clear_left_over(self) -> None:
        assert isinstance(self._native, Freedesktop)
        left = self._load()
        if not left:
            return
        try:
            await self._native.capabilities()  # connects, and learns who owns the service
        except NotificationFailed as e:
            log.info("left-over notifications not closed: %s", e)
            return
        if left.get("owner") == self._native.owner:
            for nid in left.get("ids", {}).values():
                await self._close(int(nid))
        self._save()

    # --- the daemon's answers -------------------------------------------------------------

    def _action(self, nid: int, key: str) -> None:
        if nid and nid == self._welcome_id:  # the welcome: its button or itself starts the demo
            self._welcome_id = 0
            self.demo.emit()
            return
        approval_id = next((a for a, n in self.shown.items() if n == nid), None)
        if approval_id is None:  # withdrawn, and pressed before it went: the app says so
            approval_id = self._withdrawn.pop(nid, None)
        if approval_id is None:
            return  # a notification of another app
        self.shown.pop(approval_id, None)
        self._save()
        if key in ("approve", "reject"):
            # A press decides the request as it was shown; none known (shown by an app that
            # ended) is no hash, which decides nothing.
            shown = self._hashes.get(approval_id, "")
            (self.approve if key == "approve" else self.reject).emit(approval_id, shown)
        else:
            self.clicked.emit(approval_id)

    def _restarted(self) -> None:
        """The daemon changed: its ids mean nothing now, and closing them could close another
        program's notifications."""
        self.shown.clear()
        self._withdrawn.clear()
        self._save()

    def _closed(self, nid: int) -> None:
        for approval_id, shown in list(self.shown.items()):
            if shown == nid:
                del self.shown[approval_id]
                self._save()

    def _save(self) -> None:
        if self.shown_file is None:
            return
        owner = self._native.owner if isinstance(self._native, Freedesktop) else ""
        try:
            private_files.write_text(
                self.shown_file, json.dumps({"owner": owner, "ids": self.shown})
            )
        except (OSError, UnsafePermissions) as e:  # only the clean-up after a restart is lost
            log.warning("the notifications shown cannot be kept in %s: %s", self.shown_file, e)

    def _load(self) -> dict[str, Any]:
        try:
            text = private_files.read_text(self.shown_file) if self.shown_file else None
            value = json.loads(text) if text is not None else None
        except (OSError, UnsafePermissions, ValueError):
            return {}
        ok = isinstance(value, dict) and isinstance(value.get("ids"), dict)
        ids = value["ids"].values() if ok else ()
        return value if ok and all(type(n) is int and n > 0 for n in ids) else {}

    # --- the other ways -------------------------------------------------------------------

    def _fallback(self, p: Pending) -> None:
        """The balloon says only which tool waits (rule 1); the popup shows the lines."""
        if self.tray is not None and QSystemTrayIcon.supportsMessages() and self.tray.isVisible():
            self._last_balloon = p.id
            self.tray.showMessage(f"Signoff: {p.title} waits for you",
                                  "Click to review the request.",
                                  QSystemTrayIcon.MessageIcon.Warning, 15_000)  # fmt: skip
            self.sent.append((p.id, "balloon"))
            return
        message = message_of(p)
        box = QMessageBox(QMessageBox.Icon.Warning, message.title, message.body(markup=False))
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setIconPixmap(danger.look(p.side_effect, p.kind).pixmap(48))
        box.setStandardButtons(QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Close)
        box.setModal(False)
        box.buttonClicked.connect(self._popup_pressed)  # a bound method: see app/tray.py
        box.show()
        self._popups[p.id] = box
        self.sent.append((p.id, "popup"))

    def _popup_pressed(self, button: QAbstractButton) -> None:
        """Open on a popup opens its request's dialog; Close only closes it."""
        for approval_id, box in self._popups.items():
            if box.standardButton(button) == QMessageBox.StandardButton.Open:
                self.clicked.emit(approval_id)
                return

    @property
    def _popup(self) -> QMessageBox | None:  # the latest, for tests
        return next(reversed(self._popups.values()), None)

    def _balloon_clicked(self) -> None:
        if self._last_balloon == WELCOME:
            self._last_balloon = ""
            self.demo.emit()
        elif self._last_balloon:
            self.clicked.emit(self._last_balloon)


async def _deliver(native: Freedesktop | _Centre, message: Message) -> int:
    if isinstance(native, _Centre):
        return await native.send(message)
    capabilities = await native.capabilities()
    # "default" is a click on the notification itself: it opens the dialog.
    buttons = [("default", ""), *message.buttons] if "actions" in capabilities else []
    body = message.body(markup="body-markup" in capabilities)
    return await native.notify(message.title, body, buttons, icon=message.icon.as_uri())


class _Centre:
    """macOS' notification centre and Windows' toasts through desktop-notifier: both take
    plain text (desktop-notifier writes the toast's XML with ElementTree, which escapes)."""

    owner = ""

    def __init__(self, notifier: Notifier) -> None:
        from desktop_notifier import DesktopNotifier, Icon

        self._notifier = notifier
        self._centre = DesktopNotifier(app_name="Signoff", app_icon=Icon(path=ICON))
        self._sent: dict[int, Any] = {}
        self._numbers = itertools.count(1)  # never reused: a press names one request only

    async def send(self, message: Message) -> int:
        from desktop_notifier import Button, Urgency

        nid = next(self._numbers)

        def press(key: str) -> None:
            self._notifier._action(nid, key)

        buttons = [Button(label, on_pressed=lambda k=key: press(k)) for key, label in
                   message.buttons]  # fmt: skip
        dispatched: list[bool] = []
        from desktop_notifier import Icon

        self._sent[nid] = await self._centre.send(
            title=message.title, message=message.body(markup=False), buttons=buttons,
            icon=Icon(path=message.icon),
            urgency=Urgency.Critical, timeout=0, on_clicked=lambda: press("review"),
            on_dispatched=lambda: dispatched.append(True),
        )  # fmt: skip
        if not dispatched:  # desktop-notifier logs a failed send instead of raising
            raise NotificationFailed("no notification service took it")
        return nid

    def disconnect(self) -> None:
        # desktop-notifier has no close; its D-Bus backend keeps its connection as ``bus``.
        bus = getattr(getattr(self._centre, "_backend", None), "bus", None)
        if bus is not None:
            bus.disconnect()

    async def close(self, nid: int) -> None:
        sent = self._sent.pop(nid, None)
        if sent is not None:
            await self._centre.clear(sent)
