"""How this Signoff is run: the command a program starts, and the words a person types.

Rules:

1. A program (the app starting the demo, the demo starting a proxy) runs ``signoff`` as
   installed beside this Python, or the bundle's own executable, or this Python's module:
   never a bare name looked up on a PATH it may not have.
2. A command Signoff suggests to a person (in the terminal, a log, a tooltip) is one that works
   where it runs: ``signoff`` when that name on PATH is this very Signoff, else its absolute
   path (a source checkout's ``.venv/bin/signoff``), else this Python running the module.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def frozen() -> bool:
    """True in a bundle (PyInstaller): ``sys.executable`` is ``signoff`` itself, no Python."""
    return bool(getattr(sys, "frozen", False))


def _script() -> Path | None:
    """This Signoff's own executable: the bundle, or the console script beside this Python."""
    if frozen():
        return Path(sys.executable).absolute()
    script = Path(sys.executable).with_name("signoff")
    return script.absolute() if script.is_file() else None


def signoff_command(what: str = "cli") -> list[str]:
    """The argv that runs this Signoff (rule 1); ``what`` is "app" for the tray app's module
    when there is no script, anything else for the command line's."""
    script = _script()
    if script is not None:
        return [str(script)]
    return [sys.executable, "-m", "app" if what == "app" else "core"]


def signoff_word() -> str:
    """How a person runs this ``signoff`` in a terminal, quoted for a POSIX shell (rule 2)."""
    script = _script()
    if script is None:
        return shlex.join([sys.executable, "-m", "core"])
    found = shutil.which("signoff")
    if found is not None and Path(found).resolve() == script.resolve():
        return "signoff"
    return shlex.quote(str(script))


def suggest(*argv: str) -> str:
    """A whole ``signoff ARG...`` command line as a person should type it here."""
    return " ".join([signoff_word(), *(shlex.quote(a) for a in argv)])
