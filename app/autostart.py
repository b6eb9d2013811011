"""Start at login. Linux: an XDG autostart entry in ``$XDG_CONFIG_HOME/autostart``, saying what
the application's own entry (resources/dev.signoff.Signoff.desktop) says, with the command that
runs this Signoff: the bundle's executable when frozen. macOS (a login item or a LaunchAgent)
and Windows (a shortcut in the Startup folder) are described in packaging/README.md."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

# The application's id: its desktop entry's name, its icon's name, the Wayland app id.
APP_ID = "dev.signoff.Signoff"
# The X11 WM_CLASS class Qt gives the app's windows (from the application name "Signoff").
WM_CLASS = "Signoff"
# Kept as named before the application id existed: entries people enabled keep working.
ENTRY = "signoff.desktop"


def _path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / ENTRY


def enabled() -> bool:
    return _path().exists()


def command() -> str:
    """The Exec value: the bundle's executable, the installed script, or the module."""
    if getattr(sys, "frozen", False):
        return _quoted(str(Path(sys.executable).absolute()))
    found = shutil.which("signoff")
    if found:
        return _quoted(found)
    return f"{_quoted(sys.executable)} -m app"


def _quoted(argument: str) -> str:
    """One Exec argument, quoted as the Desktop Entry Specification asks when it must be."""
    if not re.search(r"[\s\"'\\><~|&;$*?#()`%]", argument):
        return argument
    escaped = re.sub(r'(["`$\\])', r"\\\1", argument).replace("%", "%%")
    return '"' + escaped.replace("\\", "\\\\") + '"'


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
        f"Exec={command()}\n"
        f"Icon={APP_ID}\n"
        "Terminal=false\n"
        f"StartupWMClass={WM_CLASS}\n"
        "X-GNOME-Autostart-enabled=true\n"
        "NoDisplay=false\n"
    )
