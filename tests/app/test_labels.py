"""Tray menu labels read as written, whichever way the menu reaches the screen (app/labels.py).

Qt-drawn menus are checked by capturing the text QMenu actually paints (a paint engine that
records every text item); D-Bus menus by a real Qt tray icon in its own process, on a private
session bus and X server, whose exported menu a stand-in host reads back over
com.canonical.dbusmenu and interprets by the dbusmenu spec.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PySide6.QtGui import QImage, QPaintDevice, QPaintEngine
from PySide6.QtWidgets import QMenu

from app.labels import dbus_menu_in_use, exports_dbus_menu, loaded_theme_plugins, menu_text
from tests.app.test_xvfb_desktop import PACKAGES, Desktop, _xcb_plugin_problem
from tests.app.tray_host import TrayHost
from tests.conftest import ROOT, need
from tests.waiting import read_ready_line

LABEL = "notes/write_note (local_mutation) & co"
LABELS = [LABEL, "&", "&&", "_", "__", "a&&b", "end&", "&start", "_x_", "a & b & c", "x_&_y", ""]
# What a person can read in one line: no control, format or line-breaking characters (those
# are marked before a label is made, rule 5 of app/labels.py).
READABLE = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]), max_size=40)


# --- what each side does with a label, restated to be checked against Qt and the spec --------


def qt_sends(text: str) -> str:
    """Qt's QDBusMenuItem::convertMnemonic: the first "&" not at the end becomes "_"."""
    at = text.find("&")
    if at < 0 or at == len(text) - 1:
        return text
    return f"{text[:at]}_{text[at + 1 :]}"


def dbusmenu_shows(label: str) -> str:
    """What a dbusmenu host shows for ``label`` by the spec: "__" is one "_", any other "_" is
    not shown (the first marks the access key)."""
    shown, i = [], 0
    while i < len(label):
        if label[i] == "_":
            if label[i + 1 : i + 2] == "_":
                shown.append("_")
                i += 2
                continue
            i += 1
            continue
        shown.append(label[i])
        i += 1
    return "".join(shown)


def test_an_unescaped_label_loses_its_underscores_and_ampersand_over_dbusmenu() -> None:
    assert dbusmenu_shows(qt_sends(LABEL)) == "notes/writenote (localmutation)  co"


@pytest.mark.parametrize("label", LABELS)
def test_a_dbus_menu_label_reads_as_written_by_the_dbusmenu_spec(label: str) -> None:
    assert dbusmenu_shows(qt_sends(menu_text(label, dbus_menu=True))) == label


@given(READABLE)
def test_any_readable_label_reads_as_written_over_dbusmenu(label: str) -> None:
    assert dbusmenu_shows(qt_sends(menu_text(label, dbus_menu=True))) == label


# --- a menu Qt draws (the XEmbed tray) ------------------------------------------------------


class _TextRecorder(QPaintEngine):
    """Records the text of every text item painted; paints nothing."""

    def __init__(self) -> None:
        super().__init__(QPaintEngine.PaintEngineFeature.AllFeatures)
        self.texts: list[str] = []

    def drawTextItem(self, p: Any, item: Any) -> None:
        self.texts.append(item.text())

    def begin(self, device: Any) -> bool:
        return True

    def end(self) -> bool:
        return True

    def type(self) -> QPaintEngine.Type:
        return QPaintEngine.Type.User

    def updateState(self, state: Any) -> None:
        pass

    def drawPixmap(self, *args: Any) -> None:
        pass

    def drawImage(self, *args: Any) -> None:
        pass

    def drawTiledPixmap(self, *args: Any) -> None:
        pass

    def drawPath(self, *args: Any) -> None:
        pass

    def drawPolygon(self, *args: Any) -> None:
        pass

    def drawRects(self, *args: Any) -> None:
        pass

    def drawLines(self, *args: Any) -> None:
        pass

    def drawEllipse(self, *args: Any) -> None:
        pass

    def drawPoints(self, *args: Any) -> None:
        pass


class _Recording(QPaintDevice):
    """A paint device of a screen's size whose engine records text."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = _TextRecorder()
        self._like = QImage(1200, 200, QImage.Format.Format_ARGB32)

    def paintEngine(self) -> QPaintEngine:
        return self.engine

    def metric(self, metric: QPaintDevice.PaintDeviceMetric) -> int:
        m = QPaintDevice.PaintDeviceMetric
        return {
            m.PdmWidth: self._like.width(),
            m.PdmHeight: self._like.height(),
            m.PdmWidthMM: self._like.widthMM(),
            m.PdmHeightMM: self._like.heightMM(),
            m.PdmNumColors: self._like.colorCount(),
            m.PdmDepth: self._like.depth(),
            m.PdmDpiX: self._like.logicalDpiX(),
            m.PdmDpiY: self._like.logicalDpiY(),
            m.PdmPhysicalDpiX: self._like.physicalDpiX(),
            m.PdmPhysicalDpiY: self._like.physicalDpiY(),
            m.PdmDevicePixelRatio: 1,
            m.PdmDevicePixelRatioScaled: int(QPaintDevice.devicePixelRatioFScale()),
        }.get(metric, 0)


def drawn(text: str) -> str:
    """The text a QMenu paints for an entry whose action has ``text``."""
    menu = QMenu()
    menu.addAction(text)
    menu.adjustSize()
    device = _Recording()
    menu.render(device)
    return "".join(device.engine.texts)


def test_the_recorder_sees_the_mnemonic_markers_qt_hides(qapp: Any) -> None:
    assert drawn("a &b && c&") == "a b & c"


@pytest.mark.parametrize("label", LABELS)
def test_a_label_in_a_menu_qt_draws_reads_as_written(qapp: Any, label: str) -> None:
    assert drawn(menu_text(label, dbus_menu=False)) == label


@given(READABLE)
def test_any_readable_label_reads_as_written_in_a_menu_qt_draws(qapp: Any, label: str) -> None:
    assert drawn(menu_text(label, dbus_menu=False)) == label


# --- which way the menu goes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "themes", "watcher", "dbus"),
    [
        ("xcb", [], True, True),
        ("wayland", ["libqxdgdesktopportal.so"], True, True),
        ("xcb", ["libqgtk3.so"], True, True),
        ("xcb", [], False, False),  # the XEmbed tray, drawn by Qt
        ("wayland", [], False, False),  # no tray at all
        ("offscreen", [], True, False),
        ("minimal", [], True, False),
        ("windows", [], True, False),
        ("cocoa", [], True, False),
        ("xcb", ["KDEPlasmaPlatformTheme6.so"], True, False),  # Plasma's own tray icon
        ("xcb", ["libqtlxqt.so"], True, False),  # LXQt's own tray icon
    ],
)
def test_qt_exports_the_menu_over_dbusmenu_only_from_its_own_unix_tray_with_a_watcher(
    platform: str, themes: list[str], watcher: bool, dbus: bool
) -> None:
    assert exports_dbus_menu(platform, themes, watcher) is dbus


def test_the_loaded_theme_plugins_are_read_from_the_process_maps(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/qt6/plugins/platformthemes/libqgtk3.so\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /opt/a b/platformthemes/KDEPlasmaPlatformTheme6.so\n"
        "7f04-7f05 r-xp 00000000 08:01 3 /usr/lib/qt6/plugins/platforms/libqxcb.so\n"
        "7f06-7f07 rw-p 00000000 00:00 0 \n"
    )
    assert loaded_theme_plugins(maps) == {"libqgtk3.so", "KDEPlasmaPlatformTheme6.so"}
    assert loaded_theme_plugins(tmp_path / "none") == frozenset()


def test_offscreen_qt_has_no_dbus_tray(qapp: Any) -> None:
    assert qapp.platformName() == "offscreen"
    assert dbus_menu_in_use() is False


# --- the real thing: a Qt tray icon, a session bus, a host reading its menu -------------------


@contextlib.contextmanager
def display_and_bus(root: Path) -> Iterator[Desktop]:
    """Xvfb and a private D-Bus session bus, ended on leaving."""
    for tool in ("Xvfb", "dbus-daemon"):
        need(shutil.which(tool) is not None, f"{tool} is not installed ({PACKAGES})")
    problem = _xcb_plugin_problem()
    need(problem is None, f"{problem} ({PACKAGES})")
    for sub in ("logs", "runtime"):
        (root / sub).mkdir(mode=0o700, parents=True)
    with Desktop(root) as desktop:
        desktop.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(root),
            "XDG_RUNTIME_DIR": str(root / "runtime"),
            "DISPLAY": desktop._start_display(),
        }
        desktop._start_bus()
        yield desktop


@contextlib.contextmanager
def probe(desktop: Desktop, label: str, platform: str) -> Iterator[dict[str, Any]]:
    """tests/app/tray_probe.py showing ``label`` on ``platform``; its report once shown."""
    env = {**desktop.env, "QT_QPA_PLATFORM": platform, "PYTHONPATH": str(ROOT)}
    process = desktop.spawn(
        "probe", [sys.executable, "-m", "tests.app.tray_probe", label],
        env=env, cwd=ROOT, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        try:
            line = read_ready_line(process.stdout.fileno(), "the tray probe, shown")
        except AssertionError as e:
            raise AssertionError(f"{e}; its log:\n{desktop.log('probe')}") from None
        report = json.loads(line)
        assert report["pid"] == process.pid
        yield report
    finally:
        Desktop.end(process)


@pytest.mark.slow
def test_a_status_notifier_tray_shows_the_label_as_written(tmp_path: Path) -> None:
    with display_and_bus(tmp_path) as desktop, TrayHost(desktop.bus) as host:
        with probe(desktop, LABEL, "xcb") as report:
            assert report["dbus_menu"] is True
            assert host.exporters(report["pid"]) != []  # exported by the time it said so
            item = host.wait_for_item(20)
            [sent] = host.menu_labels(item)
        assert sent == qt_sends(report["text"])  # Qt changed what qt_sends says, no more
        assert dbusmenu_shows(sent) == LABEL
        assert dbusmenu_shows(qt_sends(LABEL)) != LABEL  # without menu_text it would not


@pytest.mark.slow
@pytest.mark.parametrize(
    ("platform", "watcher"),
    [("xcb", False), ("offscreen", True)],
    ids=["x11-without-a-watcher", "offscreen-with-a-watcher"],
)
def test_when_dbus_menu_in_use_says_no_qt_exports_no_menu(
    tmp_path: Path, platform: str, watcher: bool
) -> None:
    with display_and_bus(tmp_path) as desktop, TrayHost(desktop.bus, watch=watcher) as host:
        with probe(desktop, LABEL, platform) as report:
            assert report["dbus_menu"] is False
            assert host.exporters(report["pid"]) == []
            assert report["text"] == LABEL.replace("&", "&&")
        assert host.items == []
