"""What every bundle holds and leaves out, shared by the three PyInstaller specs.

The app uses QtCore, QtGui, QtWidgets, QtNetwork and, for its icons, QtSvg (through the SVG
icon engine and image format plugins). Everything else of Qt is left out: other modules, the
SQL drivers, image formats other than SVG and PNG (built into QtGui), platform plugins other
than the ones listed per system, and the translations (the app is in English only).

Imports that PyInstaller's analysis cannot see are named here: keyring finds its backends
through entry points (its metadata and the backend modules are collected); desktop-notifier
picks its backend at run time; ``signoff _demo-server`` imports the demo server by name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

from PyInstaller.utils.hooks import collect_data_files, collect_submodules, copy_metadata

ROOT = Path(__file__).resolve().parent.parent
ENTRY = str(ROOT / "packaging" / "entry.py")
NAME = "signoff"
APP_ID = "dev.signoff.Signoff"
BUNDLE_ID = APP_ID  # macOS CFBundleIdentifier

QT_MODULES_UNUSED = (
    "Qt3DAnimation", "Qt3DCore", "Qt3DExtras", "Qt3DInput", "Qt3DLogic", "Qt3DRender",
    "QtAxContainer", "QtBluetooth", "QtCharts", "QtConcurrent", "QtDataVisualization",
    "QtDesigner", "QtGraphs", "QtGraphsWidgets", "QtHelp", "QtHttpServer", "QtLocation",
    "QtMultimedia", "QtMultimediaWidgets", "QtNetworkAuth", "QtNfc", "QtOpenGL",
    "QtOpenGLWidgets", "QtPdf", "QtPdfWidgets", "QtPositioning", "QtPrintSupport", "QtQml",
    "QtQuick", "QtQuick3D", "QtQuickControls2", "QtQuickTest", "QtQuickWidgets",
    "QtRemoteObjects", "QtScxml", "QtSensors", "QtSerialBus", "QtSerialPort", "QtSpatialAudio",
    "QtSql", "QtStateMachine", "QtSvgWidgets", "QtTest", "QtTextToSpeech", "QtUiTools",
    "QtWebChannel", "QtWebEngineCore", "QtWebEngineQuick", "QtWebEngineWidgets",
    "QtWebSockets", "QtWebView", "QtXml",
)  # fmt: skip

# Python packages that are in the development environment but not in Signoff.
EXCLUDES = [
    *(f"PySide6.{m}" for m in QT_MODULES_UNUSED),
    "tkinter", "_tkinter", "pytest", "_pytest", "hypothesis", "pytestqt", "keyrings",
    "mypy", "ruff", "IPython", "numpy", "PyQt5", "PyQt6", "PySide2", "setuptools", "pip",
    "PyInstaller",
]  # fmt: skip

# Plugins kept, by folder under Qt's plugins/. A folder not named here is dropped whole.
PLUGINS = {
    "linux": {
        # xcb for X11 (and XWayland); wayland, with the xdg-shell integration and the
        # client-side decorations GNOME needs (about 2 MB); offscreen and minimal for headless
        # runs (tests, screenshots).
        "platforms": {"libqxcb.so", "libqwayland.so", "libqoffscreen.so", "libqminimal.so"},
        "wayland-shell-integration": {"libxdg-shell.so"},
        "wayland-decoration-client": {"libadwaita.so", "libbradient.so"},
        # The desktop portal's theme (colour scheme, file dialogs over D-Bus). Not the GTK 3
        # theme: it brings GTK, GDK, cairo and pango from the build machine (about 25 MB) and
        # can clash with the GTK of the machine it runs on.
        "platformthemes": {"libqxdgdesktopportal.so"},
        "platforminputcontexts": {
            "libcomposeplatforminputcontextplugin.so",
            "libibusplatforminputcontextplugin.so",
        },
        "iconengines": {"libqsvgicon.so"},
        "imageformats": {"libqsvg.so"},
        # Widgets draw in shared memory: no GL integration (xcbglintegrations,
        # wayland-graphics-integration-client) is needed.
    },
    "darwin": {
        "platforms": {"libqcocoa.dylib", "libqoffscreen.dylib", "libqminimal.dylib"},
        "styles": {"libqmacstyle.dylib"},
        "iconengines": {"libqsvgicon.dylib"},
        "imageformats": {"libqsvg.dylib"},
    },
    "win32": {
        "platforms": {"qwindows.dll", "qoffscreen.dll", "qminimal.dll"},
        "styles": {"qmodernwindowsstyle.dll", "qwindowsvistastyle.dll"},
        "iconengines": {"qsvgicon.dll"},
        "imageformats": {"qsvg.dll"},
    },
}[sys.platform if sys.platform in ("darwin", "win32") else "linux"]

# Qt libraries that arrive as dependencies of the plugins dropped, or that nothing kept needs.
QT_LIBRARIES_UNUSED = ("Qt6Qml", "Qt6Quick", "Qt6Pdf", "Qt6Sql", "Qt6Designer", "Qt6Multimedia",
                       "Qt6VirtualKeyboard", "Qt6WebEngine", "Qt6Charts", "Qt63D",
                       "Qt6OpenGLWidgets", "Qt6Test", "Qt6PrintSupport", "Qt6EglFS",
                       "Qt6WlShellIntegration")  # fmt: skip


def hidden_imports() -> list[str]:
    names = [
        "core.demo.server",  # started by name: `signoff _demo-server` (core/cli.py HIDDEN)
        *collect_submodules("keyring.backends"),
        "jeepney", "jeepney.io.blocking", "secretstorage",
        "desktop_notifier.backends.dummy",
    ]  # fmt: skip
    if sys.platform == "darwin":
        names += ["desktop_notifier.backends.macos", "desktop_notifier.backends.macos_support"]
        names += collect_submodules("rubicon")
    elif sys.platform == "win32":
        names += ["desktop_notifier.backends.winrt", "win32ctypes.core"]
        names += collect_submodules("winrt")
    else:
        # The app's own freedesktop client (app/freedesktop.py) speaks D-Bus through dbus-fast.
        names += [*collect_submodules("dbus_fast")]
    return names


def datas() -> list[tuple[str, str]]:
    icons = ROOT / "resources" / "icons"
    return [
        *((str(svg), "resources/icons") for svg in sorted(icons.glob("*.svg"))),
        *copy_metadata("keyring"),  # its backends are entry points
        *copy_metadata("signoff"),  # its version, for importlib.metadata
        *collect_data_files("desktop_notifier"),
    ]


def _qt_part(path: str) -> tuple[str, ...] | None:
    """The path inside Qt's folder of PySide6 (PySide6/Qt/ on Linux and macOS, PySide6/ on
    Windows) as parts, or None for anything else."""
    parts = Path(path).parts
    if "PySide6" not in parts:
        return None
    inside = parts[parts.index("PySide6") + 1 :]
    return inside[1:] if inside[:1] == ("Qt",) else inside


def version() -> str:
    """Signoff's version, as installed in the building environment."""
    from importlib.metadata import version

    return version("signoff")


def numeric_version() -> str:
    """The version as macOS and Windows want it: numbers only (0.1.0.dev0 gives 0.1.0)."""
    found = re.match(r"\d+(\.\d+){0,2}", version())
    return found.group(0) if found else "0.0.0"


def keep(path: str) -> bool:
    """False for a Qt file (a source path or a bundle path) the app does not use: a plugin not
    listed, a translation, an unused Qt library (libQt6Qml.so.6, Qt6Qml.dll, QtQml.framework)."""
    name = Path(path).name
    for part in Path(path).parts:
        if part.endswith(".framework"):
            name = part.removesuffix(".framework").replace("Qt", "Qt6", 1)
    if any(name.startswith((f"lib{lib}", lib)) for lib in QT_LIBRARIES_UNUSED):
        return False
    inside = _qt_part(path)
    if not inside:
        return True
    if inside[0] == "translations":
        return False
    if inside[0] == "plugins" and len(inside) >= 3:
        wanted = PLUGINS.get(inside[1], set())
        return wanted is None or inside[-1] in wanted
    return True


def trim(entries: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """A hook's (source, folder) or an Analysis's (name, source, kind) entries, less what
    ``keep`` refuses (judged on the source path, which both carry)."""
    return [entry for entry in entries if keep(entry[0]) and keep(entry[1])]


def qt_hook(hook_file: str) -> tuple[list[str], list[tuple[str, str]], list[tuple[str, str]]]:
    """What PyInstaller's own hook for a PySide6 module collects, less what ``keep`` refuses:
    trimmed before the dependency analysis, so that a dropped plugin's libraries (GTK for the
    GTK theme) are never looked for. Used by packaging/hooks/."""
    from PyInstaller.utils.hooks.qt import add_qt6_dependencies, pyside6_library_info

    hiddenimports, binaries, datas = add_qt6_dependencies(hook_file)
    if Path(hook_file).name == "hook-PySide6.QtNetwork.py":
        binaries += pyside6_library_info.collect_qtnetwork_files()
    return hiddenimports, trim(binaries), trim(datas)
