"""The tray app in front of a locked keyring, run in a process of its own (its caller gives it a
private Secret Service, since locking one cannot be undone without a prompt).

    python -m tests.app.locked_keyring lock|block OUT.json

``lock``: the real gnome-keyring's own Lock call on its default collection; the keyring then
refuses every read (in a headless session its unlock prompt cannot open). ``block``: every
keyring call waits, as one does while the desktop's unlock prompt is up, until the scenario
ends. Either way a request is made five times, and the scenario writes what the app did: what
its menu and tooltip said, which requests it notified while the keyring was in that state, how
many keyring calls the wakes made, and what deciding said.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from keyring.backends import SecretService
from PySide6.QtWidgets import QApplication

from core.heads import KeyringHeadStore
from core.operator_key import KeyringKeyStore, OperatorKey
from core.store import Store

DEADLINE = 30.0


class Watched(SecretService.Keyring):
    """The real Secret Service, its calls counted, and, blocked, waiting until released. A
    Secret Service backend itself, so that its calls are made under the lock of the bus it
    reaches, as the real one's are (core/keyring_calls.py), not under the user's."""

    def __init__(self, backend: Any, blocked: bool) -> None:
        super().__init__()
        self.backend = backend
        self.calls = 0
        self.released = threading.Event()
        if not blocked:
            self.released.set()

    def get_password(self, service: str, username: str) -> str | None:
        self.calls += 1
        self.released.wait()
        return self.backend.get_password(service, username)  # type: ignore[no-any-return]

    def set_password(self, service: str, username: str, password: str) -> None:
        self.calls += 1
        self.released.wait()
        self.backend.set_password(service, username, password)


def wait(qt: QApplication, condition: Any) -> bool:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        qt.processEvents()
        if condition():
            return True
        time.sleep(0.01)
    return False


def main(mode: str, out: Path) -> None:
    import secretstorage

    from app.tray import TrayApp
    from core import keyring_calls
    from tests.app.pending import make_pending

    on_app_thread: list[str] = []  # keyring calls the app's (main) thread waited on
    original = keyring_calls.call

    def recorded(fn: Any, timeout: float = keyring_calls.TIMEOUT) -> Any:
        if threading.current_thread() is threading.main_thread():
            on_app_thread.append("".join(traceback.format_stack(limit=8)))
        return original(fn, timeout)

    keyring_calls.call = recorded  # every Signoff keyring call goes through it
    qt = QApplication([])
    home = Path(tempfile.mkdtemp())
    os.environ["SIGNOFF_HOME"] = str(home)
    real = SecretService.Keyring()
    real.set_password("signoff-tests", "probe", "unlocked")  # the collection exists, unlocked
    if mode == "lock":
        connection = secretstorage.dbus_init()
        secretstorage.get_default_collection(connection).lock()
    watched = Watched(real, blocked=mode == "block")
    store = Store.open(home / "signoff.db")
    tray = TrayApp(store, KeyringHeadStore(watched), home, native=False,  # type: ignore[arg-type]
                   operator=OperatorKey(KeyringKeyStore(watched)))  # type: ignore[arg-type]  # fmt: skip
    tray.start()
    result: dict[str, Any] = {"started": True}
    result["locked_shown"] = wait(qt, lambda: bool(tray.key_problem)) if mode == "lock" else None
    calls_before = watched.calls
    notified = []
    for n in range(5):
        approval = make_pending(store, run_id=f"r{n}")
        if wait(qt, lambda a=approval: a.id in {i for i, _ in tray.notifier.sent}):
            notified.append(approval.id)
    result["notified"] = notified
    result["menu"] = [a.text() for a in tray.menu.actions()]
    result["tooltip"] = tray.tray.toolTip()
    result["keyring_calls_by_wakes"] = watched.calls - calls_before
    history = tray.open_history()  # its banner compares the chain with the kept head
    result["history_verified"] = wait(qt, lambda: not history.verifying)
    result["banner"] = history.banner_state
    result["decided"] = tray.decide(approval.id, approval.request_hash, "reject", "dialog")
    result["said"] = tray.said[-1] if tray.said else None
    result["released_during"] = watched.released.is_set()
    result["on_app_thread"] = on_app_thread
    with store.snapshot() as conn:
        result["statuses"] = [s for (s,) in conn.execute("SELECT status FROM approvals")]
    watched.released.set()
    tray.stop()
    store.close()
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
