"""Noticing changes: a wake-up datagram from a proxy, with a ``PRAGMA data_version`` poll as a
backstop (for a missed datagram, or a platform without Unix sockets). No thread: a
QSocketNotifier and a QTimer on the event loop."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
from pathlib import Path
from urllib.parse import quote

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from core import wake

POLL_MS = 500


class Watcher(QObject):
    changed = Signal()

    def __init__(self, database: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._socket: socket.socket | None = None
        self._inode = 0
        self._notifier: QSocketNotifier | None = None
        self._bind()
        self._conn = sqlite3.connect(f"file:{quote(str(database))}?mode=ro", uri=True)
        self._version = self._data_version()
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        self._timer.start()

    @property
    def listening(self) -> bool:
        return self._socket is not None

    def close(self) -> None:
        self._timer.stop()
        if self._notifier is not None:
            self._notifier.setEnabled(False)
        if self._socket is not None:
            self._socket.close()
            with contextlib.suppress(OSError):
                path = wake.socket_path()
                if path.stat().st_ino == self._inode:  # ours, not a newer instance's
                    path.unlink()
        self._conn.close()

    def _bind(self) -> None:
        if not hasattr(socket, "AF_UNIX"):
            return
        path = wake.socket_path()
        wake.make_runtime_dir()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by an app that died; this is the only instance
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(str(path))
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self._socket = sock
        self._inode = path.stat().st_ino
        self._notifier = QSocketNotifier(sock.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)

    def _drain(self) -> None:
        if self._socket is None:
            return
        while True:
            try:
                self._socket.recv(64)
            except (BlockingIOError, OSError):
                break
        self._version = self._data_version()
        self.changed.emit()

    def _data_version(self) -> int:
        try:
            version: int = self._conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return -1
        return version

    def _poll(self) -> None:
        version = self._data_version()
        if version != self._version:
            self._version = version
            self.changed.emit()
