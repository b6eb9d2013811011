"""The command an MCP host launches for this Signoff: absolute, since hosts start servers with a
minimal PATH."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def signoff_command() -> list[str]:
    """The absolute command a host should launch for this Signoff (hosts start servers with a
    minimal PATH, so never a bare name); ``HostConfigError`` when there is none."""
    from core.hosts import HostConfigError  # defined beside the host files it is about

    if getattr(sys, "frozen", False):
        # On Windows the tray app is a windowed executable a host cannot talk to over stdio;
        # the console `signoff.exe` beside it is the one to launch.
        here = Path(sys.executable).absolute()
        console = here.with_name("signoff.exe" if here.suffix == ".exe" else "signoff")
        return [str(console if console.is_file() else here)]
    for name in ("signoff", "signoff.exe"):
        script = Path(sys.executable).with_name(name)
        if script.is_file():
            return [str(script.absolute())]
    found = shutil.which("signoff")
    if found:
        return [str(Path(found).absolute())]
    raise HostConfigError(
        "cannot find the signoff command for the host to launch: run this from the environment"
        " Signoff is installed in"
    )


def our_command() -> list[str] | None:
    from core.hosts import HostConfigError

    try:
        return signoff_command()
    except HostConfigError:
        return None
