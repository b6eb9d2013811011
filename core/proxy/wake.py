"""Waking the tray app: a datagram on a local socket, fire and forget.

The app listens on ``wake.sock`` in the user's runtime directory (``$SIGNOFF_HOME/run`` when
set), a directory only the user can enter. A proxy sends one datagram after it creates an
approval and after a run ends; when no app listens the send fails at once and is ignored, so
a call is never delayed. The datagram carries nothing but a word: the app reads the store.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import platformdirs

from core import paths


def socket_path() -> Path:
    home = os.environ.get("SIGNOFF_HOME")
    base = Path(home) / "run" if home else Path(platformdirs.user_runtime_dir(paths.APP_NAME))
    return base / "wake.sock"


def wake(reason: str = "changed") -> bool:
    """Tell a listening app to look at the store; True when a listener took the datagram."""
    if not hasattr(socket, "AF_UNIX"):
        return False  # Windows: the app polls the store instead
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(reason.encode()[:64], str(socket_path()))
    except OSError:
        return False
    return True
