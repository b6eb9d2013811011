"""Notifications, in order of preference: the platform's own with Approve / Reject buttons
(desktop-notifier: D-Bus on Linux, the notification centre on macOS, WinRT on Windows), the
tray's balloon (``QSystemTrayIcon.showMessage``), an in-app popup. A request that needs the
dialog (destructive, interrupted, duplicate) gets a "Review" button only.

Nothing here decides: buttons emit signals; the app decides through ``core.approvals``.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QSystemTrayIcon

from app.model import Pending

log = logging.getLogger("signoff.app")
ICON = Path(__file__).resolve().parent.parent / "resources" / "icons" / "pending.svg"


def message_of(p: Pending) -> tuple[str, str]:
    """A title short enough for narrow notification daemons; the class leads the body."""
    title = f"Approve {p.title}?"
    kind = {"interrupted_side_effect": "started, outcome unknown; ",
            "duplicate": "the same call already ran; "}.get(p.kind, "")  # fmt: skip
    return title, f"{p.side_effect or '?'}: {kind}{p.summary()}\nrequest {p.fingerprint}"


class Notifier(QObject):
    clicked = Signal(str)  # open the dialog for this approval
    approve = Signal(str)
    reject = Signal(str)

    def __init__(self, tray: QSystemTrayIcon | None, *, native: bool = True) -> None:
        super().__init__()
        self.tray = tray
        self.sent: list[tuple[str, str]] = []  # (approval id, how) for the record and tests
        self._native: Any = None
        if native:
            try:
                from desktop_notifier import DesktopNotifier, Icon

                self._native = DesktopNotifier(app_name="Signoff", app_icon=Icon(path=ICON))
            except Exception as e:  # no backend for this platform
                log.warning("no native notifications: %s", e)
        if tray is not None:
            tray.messageClicked.connect(self._balloon_clicked)
        self._last_balloon = ""
        self._tasks: set[asyncio.Task[None]] = set()
        # One send at a time: desktop-notifier connects to the bus on its first send, and two
        # first sends at once would open two connections (one never closed).
        self._sending = asyncio.Lock()

    def notify(self, p: Pending) -> None:
        if self._native is not None:
            task = asyncio.get_event_loop().create_task(self._send_native(p))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._fallback(p)

    async def _send_native(self, p: Pending) -> None:
        from desktop_notifier import Button, Urgency

        title, message = message_of(p)
        buttons = (
            [Button("Review…", on_pressed=lambda: self.clicked.emit(p.id))]
            if p.needs_dialog
            else [
                Button("Approve", on_pressed=lambda: self.approve.emit(p.id)),
                Button("Reject", on_pressed=lambda: self.reject.emit(p.id)),
            ]
        )
        dispatched: list[bool] = []
        async with self._sending:
            if self._native is None:  # an earlier send failed, or the app closed it
                self._fallback(p)
                return
            try:
                # Critical, and no timeout: an approval is notified once, so it must stay until
                # the operator acts on it (daemons expire normal ones in seconds).
                await self._native.send(
                    title=title, message=message, buttons=buttons,
                    urgency=Urgency.Critical, timeout=0,
                    on_clicked=lambda: self.clicked.emit(p.id),
                    on_dispatched=lambda: dispatched.append(True),
                )  # fmt: skip
                if not dispatched:  # desktop-notifier logs a failed send instead of raising
                    raise RuntimeError("no notification service took it")
            except Exception as e:  # no notification service answered: the next way
                log.warning("native notification failed: %s", e)
                self._close_native()
                self._fallback(p)
                return
        self.sent.append((p.id, "native"))

    def close(self) -> None:
        """Let go of the native notifier's connection (its buttons stop answering)."""
        self._close_native()

    def _close_native(self) -> None:
        native, self._native = self._native, None
        # desktop-notifier has no close; its D-Bus backend keeps its connection as ``bus``.
        bus = getattr(getattr(native, "_backend", None), "bus", None)
        if bus is not None:
            bus.disconnect()

    def _fallback(self, p: Pending) -> None:
        title, message = message_of(p)
        if self.tray is not None and QSystemTrayIcon.supportsMessages() and self.tray.isVisible():
            self._last_balloon = p.id
            self.tray.showMessage(title, message, QSystemTrayIcon.MessageIcon.Warning, 15_000)
            self.sent.append((p.id, "balloon"))
            return
        box = QMessageBox(QMessageBox.Icon.Warning, title, message)
        box.setStandardButtons(QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Close)
        box.setModal(False)
        box.buttonClicked.connect(
            lambda b: (
                self.clicked.emit(p.id)
                if box.standardButton(b) == QMessageBox.StandardButton.Open
                else None
            )
        )
        box.show()
        self._popup = box
        self.sent.append((p.id, "popup"))

    def _balloon_clicked(self) -> None:
        if self._last_balloon:
            self.clicked.emit(self._last_balloon)
