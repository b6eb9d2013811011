"""The tray app's windows on a Wayland compositor, in a process of its own, for
tests/app/test_wayland_smoke.py.

    python -m tests.app.wayland_probe HOME

Makes a waiting request in HOME's store as a proxy makes one (tests/app/pending.py), starts
the tray app (``TrayApp``, as ``signoff`` does) and prints one JSON line once its tray icon is
shown: ``platform`` and ``pid``. The test then chooses the request and History in the tray's
menu, over the bus, as a panel does. Once both windows are exposed by the compositor, the probe
reads what each shows, closes them, and prints a second JSON line: per window its title,
size, whether it was exposed and then closed, how many colours it painted, its texts (and the
history's rows); and every message Qt logged from the start (warnings and worse). It ends
after that, or after DEADLINE_S seconds with what it has.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QMessageLogContext, QTimer, QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QWidget

from app.dialog import ApprovalDialog
from app.history import HistoryWindow
from app.tray import TrayApp
from core.heads import MemoryHeadStore
from core.store import Store
from tests.app.pending import make_pending

# It ends as soon as both windows are shown; the deadline is for a busy machine (the tests run
# side by side), within the test's own wait for its report (test_wayland_smoke.py REPORT_WAIT).
DEADLINE_S = 60
messages: list[dict[str, str]] = []


def _logged(kind: QtMsgType, context: QMessageLogContext, text: str) -> None:
    if kind != QtMsgType.QtDebugMsg and kind != QtMsgType.QtInfoMsg:
        messages.append({"type": kind.name, "category": str(context.category), "text": text})


def colours(widget: QWidget) -> int:
    """The number of colours in the widget as it paints itself (every fourth pixel)."""
    image = widget.grab().toImage()
    return len(
        {image.pixel(x, y) for x in range(0, image.width(), 4) for y in range(0, image.height(), 4)}
    )


def texts(widget: QWidget) -> list[str]:
    return [
        child.text()
        for child in widget.findChildren(QWidget)
        if isinstance(child, QLabel | QAbstractButton) and child.isVisible() and child.text()
    ]


def exposed(widget: QWidget | None) -> bool:
    handle = widget.windowHandle() if widget is not None else None
    return handle is not None and handle.isExposed()


class Probe:
    def __init__(self, tray: TrayApp) -> None:
        self.tray = tray
        self.report: dict[str, Any] = {}
        self.started = time.monotonic()
        self.timer = QTimer()
        self.timer.setInterval(50)
        self.timer.timeout.connect(self.look)
        self.timer.start()

    def windows(self) -> tuple[ApprovalDialog | None, HistoryWindow | None]:
        dialog = next(iter(self.tray.dialogs.values()), None)
        return dialog, self.tray.history

    def look(self) -> None:
        dialog, history = self.windows()
        late = time.monotonic() - self.started > DEADLINE_S
        if not late and not (exposed(dialog) and exposed(history)):
            return
        self.timer.stop()
        shown = {"dialog": dialog, "history": history}
        for name, window in shown.items():
            if window is None:
                self.report[name] = None
                continue
            self.report[name] = {
                "title": window.windowTitle(),
                "exposed": exposed(window),
                "width": window.width(),
                "height": window.height(),
                "colours": colours(window),
                "texts": texts(window),
            }
            if window is history:
                self.report[name]["rows"] = history.model.rowCount()
            window.close()
        QTimer.singleShot(0, self.closed)

    def closed(self) -> None:
        for name, window in zip(("dialog", "history"), self.windows(), strict=True):
            if self.report.get(name) is not None:
                self.report[name]["closed"] = window is None or not window.isVisible()
        self.tray.stop()
        self.report["messages"] = messages
        print(json.dumps(self.report), flush=True)
        QApplication.quit()


def main(argv: list[str]) -> int:
    (home,) = argv
    qInstallMessageHandler(_logged)
    app = QApplication(["signoff"])
    app.setQuitOnLastWindowClosed(False)
    with Store.open(Path(home) / "signoff.db") as store:
        make_pending(store)
        tray = TrayApp(store, MemoryHeadStore(), Path(home), native=False)
        tray.start()
        print(json.dumps({"platform": app.platformName(), "pid": os.getpid(),
                          "dbus_menu": tray.dbus_menu}), flush=True)  # fmt: skip
        probe = Probe(tray)
        code = app.exec()
        del probe
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
