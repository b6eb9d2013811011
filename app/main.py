"""Starting the tray app: one instance per database, an asyncio loop inside Qt (qasync) for
native notifications, and a hand-over when started twice."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QIcon
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QApplication

from app import autostart
from core import paths, private_files, wake
from core.errors import UnsafePermissions
from core.heads import KeyringHeadStore
from core.proxy import remote
from core.store import Store

if TYPE_CHECKING:
    from app.tray import TrayApp

APP_ICON = autostart.APP_ICON
# Qt's logging categories that only say no desktop portal answered (quiet_theme_lookups).
PORTAL_CATEGORIES = ("qt.qpa.theme.gnome", "qt.qpa.services")


def instance_name() -> str:
    """Where the running app listens for a second start: a socket in the folder of the wake
    socket (``$SIGNOFF_HOME/run``, else the user's runtime folder, or a folder where a socket's
    path fits when those are too deep: core/wake.py rule 6), which only the user can enter,
    never a name in a shared temporary folder that another account could take first. One per
    database: the folder is per ``SIGNOFF_HOME``, and without one there is one
    database per user. (Windows: a named pipe of the old name; it has no such folder.)"""
    if sys.platform == "win32":
        digest = hashlib.sha256(str(paths.database_path()).encode()).hexdigest()[:16]
        return f"signoff-{digest}"
    return str(wake.socket_path().with_name("app.sock"))


_instance_lock: int | None = None  # the lock file held for the app's lifetime


def claim_instance() -> bool:
    """Hold ``app.lock`` beside the instance socket for as long as this process lives; False
    when another app holds it (two started at once: both found no socket to hand over to, and
    the second would remove the first one's socket and listen in its place)."""
    global _instance_lock
    if sys.platform == "win32":
        return True
    import fcntl

    path = Path(instance_name()).with_name("app.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _instance_lock = fd
    return True


def hand_over() -> bool:
    """If an instance runs, ask it to show what waits; True when it took over. A socket that
    is not the user's own, in a folder that is not, is not spoken to."""
    path = Path(instance_name())
    if sys.platform != "win32":
        try:
            wake.check_runtime_dir()
            private_files.check(path, "instance socket", kind=stat.S_ISSOCK, modes=False)
        except (OSError, UnsafePermissions):
            return False
    socket = QLocalSocket()
    socket.connectToServer(instance_name())
    if not socket.waitForConnected(500):
        return False
    socket.write(b"show\n")
    socket.waitForBytesWritten(500)
    socket.disconnectFromServer()
    return True


def quiet_theme_lookups() -> None:
    """Where no desktop portal (xdg-desktop-portal) runs, Qt logs its failed D-Bus lookups of
    it at every start: the GNOME platform theme's colour-scheme reads (``qt.qpa.theme.gnome:
    dbus reply error``, two or three lines) and the registration of the app's id
    (``qt.qpa.services: Failed to register with host portal``). Qt then falls back on its
    defaults; nothing is wrong. Those two categories' warnings are turned off before Qt starts,
    unless the person's own rules name them (decision 0040)."""
    rules = os.environ.get("QT_LOGGING_RULES", "")
    ours = [f"{category}.warning=false" for category in PORTAL_CATEGORIES if category not in rules]
    if ours:
        os.environ["QT_LOGGING_RULES"] = ";".join([*ours, *([rules] if rules else [])])


def run(argv: list[str] | None = None) -> int:
    import qasync

    quiet_theme_lookups()
    app = QApplication.instance() or QApplication(argv or sys.argv)
    app.setApplicationName("Signoff")
    # The desktop entry's id: Wayland's app id, and how a desktop matches windows to the entry.
    app.setDesktopFileName(autostart.APP_ID)
    app.setWindowIcon(QIcon(str(APP_ICON)))
    app.setQuitOnLastWindowClosed(False)
    if hand_over():
        print("Signoff is already running; it now shows what waits.")
        return 0
    data = paths.data_dir()
    try:
        log = private_files.open_log(data / "logs" / "app.log")
        if sys.platform != "win32":
            wake.make_runtime_dir()
    except (OSError, UnsafePermissions) as e:
        print(f"Signoff cannot start: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(stream=log, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")  # fmt: skip
    remote.show_urls_in_logs()  # a remote server's URL may carry a key (remote.py rule 7)
    if not claim_instance():
        print("Signoff is already starting.")
        return 0
    server = QLocalServer()
    # Only this user may connect, whatever the umask (the folder already sees to it).
    server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
    QLocalServer.removeServer(instance_name())  # left by an app that died: we hold the lock
    if not server.listen(instance_name()):
        # Two apps on one database would notify every request twice and take each other's
        # wake socket: say so, and do not start a second one silently.
        print(
            f"Signoff cannot listen at {instance_name()}: {server.errorString()}",
            file=sys.stderr,
        )
        return 2
    store = Store.open(paths.database_path())
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    from app.tray import TrayApp

    tray = TrayApp(store, KeyringHeadStore(), data)

    def show() -> None:
        connection = server.nextPendingConnection()
        if connection is not None:
            connection.close()
        if tray.model.pending:
            tray.open_dialog(tray.model.pending[0].id)
        else:
            tray.tray.showMessage("Signoff", "Nothing waits for you.")

    server.newConnection.connect(show)
    tray.start()
    _offer_demo(tray, store)
    with loop:
        loop.run_until_complete(_until_quit(app))
    store.close()
    return 0


def _offer_demo(tray: TrayApp, store: Store) -> None:
    """The first start, with nothing set up (no server, no run), offers the demo, once: the
    welcome (with a button where the notification service has buttons), and the tray's menu
    entry, which is always there."""
    from PySide6.QtCore import QTimer

    from core.demo import first_start
    from core.invocation import suggest

    data = paths.data_dir()
    if not first_start.should_offer(store, paths.config_path(), data):
        return
    first_start.remember_offered(data)
    print(f"{first_start.TITLE}! {first_start.MESSAGE} (From a terminal: {suggest('demo')})")
    # A moment after start, so that the icon is in the tray when its message shows.
    QTimer.singleShot(1500, tray.welcome)


async def _until_quit(app: QApplication) -> None:
    done = asyncio.Event()
    app.aboutToQuit.connect(done.set)
    await done.wait()
