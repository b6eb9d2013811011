"""A tray icon with one menu entry, in a process of its own, for tests/app/test_labels.py.

    python -m tests.app.tray_probe LABEL

Asks ``dbus_menu_in_use()`` before making the QSystemTrayIcon (as the tray must), gives the
entry ``menu_text(LABEL, that answer)``, shows the icon, prints one JSON line (``dbus_menu``,
``text``, ``pid``) once shown, and runs until it is ended.
"""

from __future__ import annotations

import json
import os
import sys

from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from app.labels import dbus_menu_in_use, menu_text


def main(argv: list[str]) -> int:
    (label,) = argv
    app = QApplication(["tray-probe"])
    dbus_menu = dbus_menu_in_use()
    tray = QSystemTrayIcon()
    pixmap = QPixmap(22, 22)
    pixmap.fill(QColor("green"))
    tray.setIcon(QIcon(pixmap))
    menu = QMenu()
    action = menu.addAction(menu_text(label, dbus_menu))
    tray.setContextMenu(menu)
    tray.show()  # a D-Bus tray icon exports its item and menu here, before this returns
    print(json.dumps({"dbus_menu": dbus_menu, "text": action.text(), "pid": os.getpid()}),
          flush=True)  # fmt: skip
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
