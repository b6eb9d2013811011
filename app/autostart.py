"""Start at login. Linux: an XDG autostart entry in ``$XDG_CONFIG_HOME/autostart``, saying what
the application's own entry (resources/dev.signoff.Signoff.desktop) says, with the command that
runs this Signoff: the bundle's executable when frozen.

Rules:

1. The app started at login watches the database this one watches: when this app runs with
   ``SIGNOFF_HOME``, the entry runs ``env SIGNOFF_HOME=... COMMAND`` (the proxies and
   ``hosts wire`` use it too; without it the login's app would watch another database).
2. The entry's icon exists: the icon theme's ``dev.signoff.Signoff`` where it is installed
   (the bundle's installer puts it in ``~/.local/share/icons/hicolor``), else the absolute path
   of the app's own icon file (a source checkout installs no icon).

macOS (a login item or a LaunchAgent) and Windows (a shortcut in the Startup folder) are
described in packaging/README.md."""

from __future__ import annotations

import os
import re
from pathlib import Path

from core import invocation

# The application's id: its desktop entry's name, its icon's name, the Wayland app id.
APP_ID = "dev.signoff.Signoff"
# The X11 WM_CLASS class Qt gives the app's windows (from the application name "Signoff").
WM_CLASS = "Signoff"
# Kept as named before the application id existed: entries people enabled keep working.
ENTRY = "signoff.desktop"
# The app's own icon file: in the checkout, and inside the bundle beside the code.
APP_ICON = Path(__file__).resolve().parent.parent / "resources" / "icons" / "app.svg"


def _path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / ENTRY


def enabled() -> bool:
    return _path().exists()


def command() -> str:
    """The Exec value: the bundle's executable, the script beside this Python, or the module
    (``core.invocation``)."""
    return " ".join(_quoted(argument) for argument in invocation.signoff_command("app"))


def _quoted(argument: str) -> str:
    """One Exec argument, quoted as the Desktop Entry Specification asks when it must be."""
    if not re.search(r"[\s\"'\\><~|&;$*?#()`%]", argument):
        return argument
    escaped = re.sub(r'(["`$\\])', r"\\\1", argument).replace("%", "%%")
    return '"' + escaped.replace("\\", "\\\\") + '"'


def exec_line() -> str:
    """The Exec value with this app's ``SIGNOFF_HOME`` (rule 1)."""
    home = os.environ.get("SIGNOFF_HOME")
    if not home:
        return command()
    value = str(Path(home).expanduser().resolve())
    return f"env {_quoted(f'SIGNOFF_HOME={value}')} {command()}"


def _data_dirs() -> list[Path]:
    """The XDG data folders an icon theme is looked up in, the user's own first."""
    user = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    system = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    return [Path(user), *(Path(d) for d in system.split(":") if d)]


def icon_value() -> str:
    """The Icon value (rule 2): the theme's name where the theme has it, else a file."""
    for base in _data_dirs():
        if any((base / "icons" / "hicolor").glob(f"*/apps/{APP_ID}.*")):
            return APP_ID
    return str(APP_ICON)


def set_enabled(on: bool) -> None:
    path = _path()
    if not on:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Name=Signoff\n"
        "Comment=Approve what your AI agents do through MCP tools\n"
        f"Exec={exec_line()}\n"
        f"Icon={icon_value()}\n"
        "Terminal=false\n"
        f"StartupWMClass={WM_CLASS}\n"
        "X-GNOME-Autostart-enabled=true\n"
        "NoDisplay=false\n"
    )
