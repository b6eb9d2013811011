"""``signoff settings diff|accept|restore``: a config.toml changed outside Signoff.

The rules in force are the recorded ones (core/proxy/config_record.py); these show how the file
differs from them, take the file up, or put the recorded text back.
"""

from __future__ import annotations

import difflib
import sys

from core import paths
from core.errors import SignoffError
from core.proxy import config_record, wake
from core.store import Store

WORDS = ("diff", "accept", "restore")


def diff(now: config_record.State) -> str:
    """The file against the recorded configuration, as a unified diff ("" when the same)."""
    if not now.changed_outside:
        return ""
    recorded = now.recorded.text if now.recorded else ""
    return "".join(
        difflib.unified_diff(
            recorded.splitlines(keepends=True),
            now.file_text.splitlines(keepends=True),
            fromfile="recorded by Signoff",
            tofile=f"{now.path}" + (" (gone)" if now.file is None else ""),
        )
    )


def run(word: str) -> int:
    path = paths.config_path()
    try:
        with Store.open(paths.database_path()) as store:
            now = config_record.state(store, path)
            if word == "diff":
                if not now.changed_outside:
                    print(f"{path} is the configuration Signoff recorded.")
                    return 0
                print(now.why())
                print(diff(now), end="")
                return 1
            if not now.changed_outside:
                print(f"{path} is already the configuration Signoff recorded; nothing to do.")
                return 0
            if word == "accept":
                done = config_record.accept(store, path)
                print(f"accepted {path} (sha256 {done.sha256[:16]}…): its rules are in force now")
            else:
                done = config_record.restore(store, path)
                print(f"restored {path} to the configuration recorded {done.at} by {done.by}")
    except SignoffError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return 2
    wake.wake("config")
    return 0
