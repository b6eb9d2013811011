"""Start at login. Linux: an XDG autostart entry in ``$XDG_CONFIG_HOME/autostart``.
macOS (a login item or a LaunchAgent) and Windows (a shortcut in the Startup folder) are
described in packaging/README.md."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ENTRY = "signoff.desktop"


def _path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / ENTRY


def enabled() -> bool:
    return _path().exists()


def set_enabled(on: bool) -> None:
    path = _path()
    if not on:
        path.unlink(missing_ok=True)
        return
    command = shutil.which("signoff") or f"{sys.executable} -m app"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Name=Signoff\n"
        "Comment=Approve what your AI agents do through MCP tools\n"
        f"Exec={command}\n"
        "Icon=signoff\n"
        "X-GNOME-Autostart-enabled=true\n"
        "NoDisplay=false\n"
    )
