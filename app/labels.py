"""Tray menu labels that read exactly as written, on both kinds of tray.

A tray menu reaches the screen one of two ways, each with its own mnemonic marker (read from
Qt 6's sources, and checked against Qt itself by tests/app/test_labels.py):

- **Qt draws it** (X11's XEmbed tray; Windows and macOS too): ``&`` marks the next character as
  the keyboard mnemonic and is not drawn, ``&&`` draws one ``&``, a last lone ``&`` is dropped.
  ``_`` is an ordinary character.
- **A StatusNotifierItem host draws it** (KDE Plasma, GNOME's AppIndicator extension,
  xfce4-panel): Qt exports the menu over D-Bus as ``com.canonical.dbusmenu``, changing one
  thing on the way (``QDBusMenuItem::convertMnemonic``): the first ``&`` that is not the
  label's last character becomes ``_``. Every other character, ``&`` and ``_`` included, is
  sent as it is. The host reads the label by the dbusmenu spec: ``__`` is one ``_``; any other
  ``_`` is not shown, the first marking the next character as the access key. So
  ``write_note (local_mutation)`` shows as ``writenote (localmutation)``.

Rules:

1. ``menu_text(label, dbus_menu=False)`` doubles every ``&``.
2. ``menu_text(label, dbus_menu=True)`` doubles every ``_`` and the first ``&``: Qt sends that
   ``&&`` as ``_&``, which dbusmenu shows as ``&`` (made the access key); the later ``&`` are
   sent, and shown, as they are.
3. ``dbus_menu_in_use()`` says whether Qt will export the tray menu over dbusmenu. It does when
   all three hold:

   a. the platform is ``xcb`` or ``wayland``. Of the other platforms Signoff ships,
      ``offscreen`` and ``minimal`` have a theme with no tray icon at all, and Windows' and
      macOS' menus take Qt's ``&`` convention (rule 1);
   b. the platform theme is one of Qt's own Unix themes (generic, KDE, GNOME, and the gtk3 and
      xdgdesktopportal plugins, which defer to them), whose
      ``QGenericUnixTheme::createPlatformSystemTrayIcon`` makes a ``QDBusTrayIcon``. KDE
      Plasma's theme plugin (plasma-integration, ``KDEPlasmaPlatformTheme6.so``) and LXQt's
      (``libqtlxqt.so``), when Qt loads them, make a tray icon of their own, exported by
      dbusmenu-qt, which converts Qt's ``&`` convention itself (``swapMnemonicChar``): rule 1
      then;
   c. ``org.kde.StatusNotifierWatcher`` has an owner on the session bus when the process makes
      its first tray icon. Qt asks once (``isDBusTrayAvailable``, which keeps the answer for
      the life of the process); without a watcher it falls back to X11's XEmbed tray, which Qt
      draws. A watcher that comes later changes nothing.

   Because of (c): ask once, just before making the ``QSystemTrayIcon``, and keep the answer.
4. A host that reads labels otherwise than the spec is not followed: GNOME Shell's
   AppIndicator extension removes only the first ``_`` that is followed by another character
   than ``_`` (dbusMenu.js, ``_updateLabel``), so there a label with one ``_`` reads right,
   but one with two or more, or with ``_`` and ``&``, shows an extra ``_``. No text reads
   right both there and by the spec.
5. Only the two markers are handled here. Characters that cannot be seen, tabs and line breaks
   (a tab starts a Qt-drawn menu's shortcut column) must be marked before, as
   ``core.present.name`` marks them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

WATCHER = "org.kde.StatusNotifierWatcher"
# Platform theme plugins that make their own tray icon rather than Qt's QDBusTrayIcon.
OWN_TRAY_THEMES = frozenset({"KDEPlasmaPlatformTheme6.so", "libqtlxqt.so"})


def menu_text(label: str, dbus_menu: bool) -> str:
    """The text to give a tray menu's QAction so that ``label`` reads as written (rules 1, 2)."""
    if not dbus_menu:
        return label.replace("&", "&&")
    return label.replace("_", "__").replace("&", "&&", 1)


def exports_dbus_menu(platform: str, theme_plugins: Iterable[str], watcher: bool) -> bool:
    """Rule 3, given the platform's name, the file names of the platform theme plugins loaded,
    and whether the StatusNotifierWatcher has an owner on the session bus."""
    if platform != "xcb" and not platform.startswith("wayland"):
        return False
    if not OWN_TRAY_THEMES.isdisjoint(theme_plugins):
        return False
    return watcher


def dbus_menu_in_use() -> bool:
    """Whether Qt will export this process's tray menu over dbusmenu (rule 3). Needs the
    QGuiApplication; ask just before making the QSystemTrayIcon, and keep the answer."""
    from PySide6.QtGui import QGuiApplication

    platform = QGuiApplication.platformName()
    themes = loaded_theme_plugins()
    if not exports_dbus_menu(platform, themes, watcher=True):
        return False  # decided without asking the bus
    return exports_dbus_menu(platform, themes, watcher=_watcher_has_owner())


def loaded_theme_plugins(maps: Path = Path("/proc/self/maps")) -> frozenset[str]:
    """The file names of the platform theme plugins mapped into this process (Linux)."""
    try:
        text = maps.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    found = set()
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and "/platformthemes/" in fields[5]:
            found.add(Path(fields[5]).name)
    return frozenset(found)


def _watcher_has_owner() -> bool:
    """The question Qt's QDBusMenuConnection asks, on the same session bus."""
    from PySide6.QtDBus import QDBusConnection

    bus = QDBusConnection.sessionBus()
    interface = bus.interface() if bus.isConnected() else None
    if interface is None:
        return False
    reply = interface.isServiceRegistered(WATCHER)
    return bool(reply.isValid() and reply.value())
