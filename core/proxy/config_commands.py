"""``signoff settings diff|accept|restore``: a config.toml changed outside Signoff.

The rules in force are the recorded ones (core/proxy/config_record.py): ``diff`` shows how the
file differs from them and the file's fingerprint, ``accept FINGERPRINT`` takes up the file as
it was shown (a file changed since is refused), ``restore`` puts the recorded text back.
"""

from __future__ import annotations

import difflib
import sys

from core import paths, wake
from core.errors import SignoffError
from core.proxy import config as configuration
from core.proxy import config_record
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


def _file_fingerprint() -> str:
    try:
        return config_record.fingerprint(configuration.read_bytes(paths.config_path()))
    except (OSError, SignoffError):
        return ""


def run(word: str, shown: str = "") -> int:
    path = paths.config_path()
    try:
        with Store.open(paths.database_path()) as store:
            if word == "accept" and shown:  # needs no trusted record: the way out too
                done = config_record.accept(store, path, shown)
                print(f"accepted {path} (fingerprint {done.sha256[:16]}): its rules are in force")
                wake.wake("config")
                return 0
            try:
                now = config_record.state(store, path)
            except SignoffError as e:
                print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
                if word != "restore" and (fp := _file_fingerprint()):
                    print(f"To take up {path} as it is now (fingerprint {fp}), after reading"
                          f" it:\n  signoff settings accept {fp}")  # fmt: skip
                return 2
            if not now.changed_outside:
                print(f"{path} is the configuration Signoff recorded; nothing to do.")
                return 0
            if word == "restore":
                done = config_record.restore(store, path)
                print(f"restored {path} to the configuration recorded {done.at} by {done.by}")
                wake.wake("config")
                return 0
            print(now.why())
            print(diff(now), end="")
            if now.file is not None and not now.file_problem:
                fp = config_record.fingerprint(now.file)
                print(f"To take this file up (fingerprint {fp}):\n  signoff settings accept {fp}")
            return 1
    except SignoffError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return 2
