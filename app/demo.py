"""Trying the demo from the app (decision 0039): ``signoff demo --no-app`` in a home of its own
under the app's data folder, its requests decided in this app's approval dialog, its record
shown in a history window of its own.

Rules:

1. The demo runs in ``DATA/demo`` (DATA: the app's data folder), never on the operator's
   database: its runs and events are in a chain of their own. A new try replaces the last
   try's home (a demo's record is a demo's; the person is told so before).
2. No second tray app: the demo runs with ``--no-app``, and this app shows the demo's pending
   requests in its own approval dialog. A decision goes through ``core.approvals`` on the
   demo's store with the operator's key, as any decision does.
3. The demo's store is polled (POLL_MS): its proxy wakes the demo home's socket, not this
   app's, and this app must not take that socket (it would take its own home's from itself).
4. One demo at a time; what it prints goes to ``DATA/logs/demo.log``.
5. When it ends, its history window opens; ``open_history`` opens it again, one click from
   the tray menu.
"""

from __future__ import annotations

import getpass
import logging
import secrets
import shutil
import sqlite3
import weakref
from functools import partial
from pathlib import Path

import shiboken6
from PySide6.QtCore import QObject, QProcess, Qt, QTimer, Signal

from app.dialog import ApprovalDialog, decided_text
from app.history import HistoryWindow
from app.model import Pending, read_pending
from core import invocation, paths, private_files
from core.approvals import approve, reject
from core.errors import SignoffError, UnsafePermissions
from core.heads import MemoryHeadStore
from core.operator_key import OperatorKey
from core.records import read_approval
from core.store import Store

log = logging.getLogger("signoff.app")
HOME = "demo"  # the demo's home, in the app's data folder (rule 1)
LOG = "demo.log"
POLL_MS = 500
WAIT_SECONDS = 600  # how long the demo's agent waits for each decision


class DemoRun(QObject):
    changed = Signal()  # started or ended: the tray's menu says which
    problem = Signal(str)  # a sentence for the person (the demo did not start, a decision failed)

    def __init__(self, data_dir: Path, operator: OperatorKey) -> None:
        super().__init__()
        self.home = data_dir / HOME
        self.log_path = data_dir / "logs" / LOG
        self.operator = operator
        self.session = secrets.token_hex(8)  # the demo's "until Signoff quits" grants name it
        self.process: QProcess | None = None
        self.exit_code: int | None = None
        self.store: Store | None = None
        self.dialogs: dict[str, ApprovalDialog] = {}
        self.history: HistoryWindow | None = None
        self._asked: set[str] = set()  # the requests whose dialog opened once
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.poll)

    @property
    def running(self) -> bool:
        return self.process is not None

    @property
    def database(self) -> Path:
        return self.home / paths.DATABASE_NAME

    def has_record(self) -> bool:
        """A demo ran here before (this start or an earlier one): its history can be shown."""
        return not self.running and self.database.is_file()

    # --- running it -------------------------------------------------------------------------

    def start(self) -> bool:
        """Start a demo (rule 4: not while one runs); False when it could not start."""
        if self.process is not None:
            return False
        self._let_go()
        try:
            if self.home.exists():
                shutil.rmtree(self.home)  # the last try's home (rule 1)
            private_files.write_text(self.log_path, "")  # 0600 before QProcess writes to it
        except (OSError, UnsafePermissions) as e:
            self.problem.emit(f"The demo cannot start: {e}")
            return False
        command = invocation.signoff_command()
        process = QProcess(self)
        process.setProgram(command[0])
        process.setArguments([*command[1:], "demo", "--no-app", "--home", str(self.home),
                              "--wait", str(WAIT_SECONDS)])  # fmt: skip
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        process.setStandardOutputFile(str(self.log_path))
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._failed)
        self.process, self.exit_code = process, None
        log.info("demo: %s %s", process.program(), " ".join(process.arguments()))
        process.start()
        self._timer.start()
        self.changed.emit()
        return True

    def stop(self) -> None:
        """The app quits: the demo (and its agent) stop, its windows close."""
        self._timer.stop()
        process, self.process = self.process, None
        if process is not None:
            process.finished.disconnect(self._finished)
            process.errorOccurred.disconnect(self._failed)
            process.terminate()
            if not process.waitForFinished(5000):
                process.kill()
                process.waitForFinished(5000)
        self._let_go()

    def _failed(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._finished(-1)

    def _finished(self, code: int, _status: QProcess.ExitStatus | None = None) -> None:
        self._timer.stop()
        self.poll()
        self.process, self.exit_code = None, code
        log.info("demo: ended with %s (its output: %s)", code, self.log_path)
        if code != 0:
            self.problem.emit(
                f"The demo stopped before its end (exit {code}). What it printed is in"
                f" {self.log_path}."
            )
        self.changed.emit()
        if self.database.is_file():
            self.open_history()

    # --- its requests -----------------------------------------------------------------------

    def _open_store(self) -> Store | None:
        """The demo's store, once the demo has made it (its configuration names the server)."""
        if self.store is None and (self.home / paths.CONFIG_NAME).is_file():
            try:
                self.store = Store.open(self.database, create=False)
            except (SignoffError, OSError, sqlite3.Error) as e:
                log.info("demo: its store is not ready: %s", e)
        return self.store

    def poll(self) -> None:
        """Open a dialog for each request of the demo's that waits and was not asked yet; a
        dialog whose request is no longer waiting says so."""
        store = self._open_store()
        if store is None:
            return
        try:
            pending = read_pending(store, self.home / paths.CONFIG_NAME)
        except (SignoffError, sqlite3.Error) as e:
            log.warning("demo: %s", e)
            return
        for p in pending:
            if p.id not in self._asked:
                self._asked.add(p.id)
                self.open_dialog(p)
        waiting = {p.id for p in pending}
        for approval_id, dialog in list(self.dialogs.items()):
            if approval_id not in waiting and dialog.approve_button.isEnabled():
                with store.snapshot() as conn:
                    approval = read_approval(conn, approval_id)
                dialog.decided_elsewhere(decided_text(approval))

    def show_waiting(self) -> None:
        """Every request of the demo's that waits, in its dialog (one closed undecided opens
        again: the demo's agent waits for it)."""
        self._asked = {i for i, dialog in self.dialogs.items() if dialog.isVisible()}
        self.poll()
        for approval_id in self._asked & set(self.dialogs):
            self.dialogs[approval_id].raise_()

    def open_dialog(self, pending: Pending) -> ApprovalDialog:
        dialog = ApprovalDialog(pending)
        dialog.setWindowTitle(f"Signoff demo: {pending.title} asks for approval")
        dialog.decided.connect(self.decide)
        dialog.details.connect(self._details)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.dialogs[pending.id] = dialog
        # Through a weak reference, as app/tray.py does: no lambda holding self on a signal.
        dialog.destroyed.connect(partial(_forget_dialog, weakref.ref(self), pending.id, id(dialog)))
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def decide(self, approval_id: str, shown_hash: str, decision: str, reason: str) -> bool:
        """As the tray decides the operator's own requests, on the demo's store (rule 2)."""
        store = self._open_store()
        if store is None:
            return False
        with store.snapshot() as conn:
            approval = read_approval(conn, approval_id)
        if approval is None or approval.status != "pending":
            return False
        # "approve:SCOPE" from the dialog (app/dialog.py rule 8): the demo's store is thrown
        # away with it, so "until Signoff quits" is until the demo's end.
        decision, _, scope = decision.partition(":")
        by, reason = f"operator:{getpass.getuser()}", reason or "in the demo"
        try:
            if decision == "approve":
                approve(store, approval.run_id, approval_id, by, reason, expected_hash=shown_hash,
                        operator=self.operator, scope=scope or None,
                        app_session=self.session)  # fmt: skip
            else:
                reject(store, approval.run_id, approval_id, by, reason, expected_hash=shown_hash,
                       operator=self.operator)  # fmt: skip
        except SignoffError as e:
            self.problem.emit(f"Not decided: {e}")
            return False
        return True

    def _details(self, run_id: str) -> None:
        history = self.open_history()
        if history is not None:
            history.show_run(run_id)

    # --- its record -------------------------------------------------------------------------

    def open_history(self) -> HistoryWindow | None:
        """The demo's runs, in a history window of their own (rule 5)."""
        store = self._open_store()
        if store is None:
            self.problem.emit("The demo left no record to show.")
            return None
        if self.history is None:
            # No head of the demo's chain is kept in the keyring: the app does not witness it.
            self.history = HistoryWindow(store, MemoryHeadStore(), self.home / paths.CONFIG_NAME)
            self.history.setWindowTitle("Signoff: the demo's history")
        self.history.refresh()
        self.history.show()
        self.history.raise_()
        self.history.activateWindow()
        return self.history

    def _let_go(self) -> None:
        """Close the last demo's windows and store (before its home is replaced, or at exit)."""
        for dialog in list(self.dialogs.values()):
            dialog.close()
        self.dialogs.clear()
        self._asked.clear()
        if self.history is not None:
            # Deleted now, with its timers, before the store it reads is closed.
            self.history.close()
            shiboken6.delete(self.history)
            self.history = None
        if self.store is not None:
            self.store.close()
            self.store = None


def _forget_dialog(demo: weakref.ref[DemoRun], approval_id: str, dialog: int) -> None:
    """A dialog Qt deleted leaves ``dialogs``, unless a newer one for its request took its
    place (one closed undecided, opened again before Qt deleted it)."""
    live = demo()
    if live is not None and id(live.dialogs.get(approval_id)) == dialog:
        live.dialogs.pop(approval_id, None)
