"""The app's keyring work, on a thread of its own: the witness, and the operator key.

Rules:

1. No keyring call runs on the UI thread. The witness (core/witness.py) and the reading of the
   operator key run on one worker thread, with a database connection of their own. The worker
   never touches a Qt object: what it finds goes into a queue, which a timer of the UI thread
   empties while work is outstanding, emitting the signals there (a signal emitted from the
   worker could meet its object being deleted by the UI thread).
2. Work asked for while the same work is still queued is asked once: a burst of wakes makes one
   verification, not one each, and a locked keyring is not asked again and again.
3. A decision needs the operator key in memory. ``key_for_deciding`` waits for it at most
   ``KEY_WAIT`` seconds (the read itself runs on the worker); a keyring that does not answer
   within it leaves the decision unmade, with the reason, and the read goes on in the
   background.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from core.errors import OperatorKeyUnavailable, SignoffError
from core.heads import HeadStore
from core.operator_key import OperatorKey, unauthenticated_mode
from core.store import Store
from core.witness import Witness, WitnessState

log = logging.getLogger("signoff.app")

KEY_WAIT = 0.5  # seconds a decision waits for the operator key to be read
DELIVERY_MS = 20  # how often the UI thread takes the worker's results while work is out


class KeyringWorker(QObject):
    checked = Signal(object)  # the witness's new state (a WitnessState)
    keyed = Signal(str)  # "" once the operator key is in memory, else why it is not

    def __init__(
        self, database: Path, heads: HeadStore, alarm_file: Path, operator: OperatorKey
    ) -> None:
        super().__init__()
        self.database = database
        self.heads = heads
        self.operator = operator
        self._alarm_file = alarm_file
        self.state = Witness.remembered(alarm_file)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="signoff-keyring-work")
        self._queued: set[str] = set()
        self._guard = threading.Lock()
        self._store: Store | None = None  # opened on the worker thread, used only there
        self._witness: Witness | None = None
        self._key: Future[Any] | None = None
        self._closed = False
        self._results: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._outstanding = 0  # work submitted and not yet delivered (the UI thread's count)
        self._delivery = QTimer(self)
        self._delivery.setInterval(DELIVERY_MS)
        self._delivery.timeout.connect(self._deliver)

    # --- asked for on the UI thread --------------------------------------------------------

    def check_all(self) -> None:
        self._submit("check_all")

    def advance(self) -> None:
        self._submit("advance")

    def retry(self) -> None:
        self._submit("retry")

    def acknowledge(self) -> None:
        self._submit("acknowledge")

    def accept(self) -> None:
        """The operator confirms that the database here is theirs (core/witness.py rule 5)."""
        self._submit("accept")

    def fetch_key(self) -> Future[Any]:
        """Read (or make) the operator key on the worker; the same read while one is queued."""
        with self._guard:
            if self._key is None or self._key.done():
                self._key = self._pool.submit(self._read_key)
                self._expect()
            return self._key

    def _expect(self) -> None:
        """One more result to deliver (called on the UI thread, where the timer lives)."""
        self._outstanding += 1
        if not self._delivery.isActive():
            self._delivery.start()

    def _deliver(self) -> None:
        """On the UI thread: the worker's results, as signals."""
        while True:
            try:
                kind, value = self._results.get_nowait()
            except queue.Empty:
                break
            self._outstanding -= 1
            if self._closed:
                continue
            if kind == "checked":
                self.state = value
                self.checked.emit(value)
            elif kind == "keyed":
                self.keyed.emit(value)
        if self._outstanding <= 0 or self._closed:
            self._outstanding = max(self._outstanding, 0)
            self._delivery.stop()

    def key_problem(self, store: Store) -> str:
        """Why a decision cannot be signed now ("" when it can), waiting at most KEY_WAIT."""
        with store.snapshot() as conn:
            if unauthenticated_mode(conn):
                return ""
        if self.operator.cached(store.database_id):
            return ""
        try:
            problem: str = self.fetch_key().result(timeout=KEY_WAIT)
        except FutureTimeout:
            return (
                "the OS keyring did not answer (locked?): decisions cannot be signed until it"
                " is unlocked"
            )
        return problem

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until the work asked for so far is done, and deliver what it found."""
        self._pool.submit(lambda: None).result(timeout)
        self._deliver()

    def close(self) -> None:
        """Stop: queued work is dropped (nothing is signalled after), and the worker's
        connection closed once what runs now is done."""
        self._closed = True
        self._delivery.stop()
        with contextlib.suppress(RuntimeError):  # closed already
            self._pool.submit(self._close)
        self._pool.shutdown(wait=False, cancel_futures=False)

    # --- on the worker thread -------------------------------------------------------------

    def _submit(self, kind: str) -> None:
        with self._guard:
            if kind in self._queued and kind not in ("acknowledge", "accept"):
                return
            self._queued.add(kind)
        try:
            self._pool.submit(self._run, kind)
        except RuntimeError:  # closed: the app is stopping
            return
        self._expect()

    def _run(self, kind: str) -> None:
        with self._guard:
            self._queued.discard(kind)
        if self._closed:
            return
        try:
            witness = self._open()
            state: WitnessState = getattr(witness, kind)()
        except SignoffError as e:  # the database itself cannot be read now
            log.warning("witness: %s", e)
            self._results.put(("failed", None))
            return
        self._results.put(("checked", state))

    def _read_key(self) -> str:
        try:
            self.operator.key_for_deciding(self._open().store)
        except (OperatorKeyUnavailable, SignoffError) as e:
            problem = f"decisions cannot be signed: {e}"
        else:
            problem = ""
        self._results.put(("keyed", problem))
        return problem

    def _open(self) -> Witness:
        if self._witness is None:
            self._store = Store.open(self.database, create=False, readonly=True)
            self._witness = Witness(self._store, self.heads, self._alarm_file, self.operator.keys)
        return self._witness

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = self._witness = None
