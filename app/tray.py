"""The tray app: icon and menu, the approval flow, the witness and the sweeper, wired together.

No worker thread waits on a dialog: a pending approval is a row in the store, the proxy waits
on the store, and the app only writes the decision (through ``core.approvals``).

A prompt follows its request: when the store says a request is no longer pending (decided from
the terminal, from the notification, from another window, or ended), its notification is taken
off the screen and its open dialog says who decided and can decide nothing more; a button
pressed on a prompt whose request is gone says so.

The app leaves its session bus's address for proxies started without it, and a proxy that
cannot reach the OS keyring all the same is an alarm naming it and its host, for as long as it
runs (core/session_bus.py, core/proxy/keyring_reach.py, decision 0069).
"""

from __future__ import annotations

import getpass
import logging
import secrets
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QFont, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QMenu, QMessageBox, QSystemTrayIcon

from app import autostart, config_outside
from app.config_outside import ConfigOutsideDialog
from app.danger import Look, highest, look
from app.demo import DemoRun
from app.dialog import ApprovalDialog, decided_text
from app.history import HistoryWindow
from app.history_model import intact
from app.keyring_worker import KeyringWorker
from app.labels import dbus_menu_in_use, menu_text
from app.model import AppModel, Pending
from app.notifier import Notifier
from app.review_notice import REVIEW_WHY, ReviewNotice
from app.settings import SettingsWindow
from app.watcher import Watcher
from app.words import class_words
from core import grants, operator_key, paths, session_bus
from core.anchor import Anchor
from core.approvals import approve, reject
from core.demo import first_start
from core.errors import SessionBusRefused, SignoffError
from core.heads import HeadStore
from core.operator_key import OperatorKey
from core.proxy import config as configuration
from core.proxy import config_record, keyring_reach
from core.records import read_approval
from core.store import Store
from core.sweep import sweep
from core.witness import WitnessState

log = logging.getLogger("signoff.app")
RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "icons"
SWEEP_MS = 15_000
PROXIES_MS = 2_000  # a proxy's keyring note is seen within this, woken or not (decision 0069)
INFO = QSystemTrayIcon.MessageIcon.Information
UNAUTHENTICATED = (
    "Decisions unauthenticated (your choice): whoever can write Signoff's files can approve"
    " a request"
)
UNCONFIRMED = "[DatabaseReplaced]"  # the alarm of another database where one was anchored
ACCEPT_DATABASE = "This database is mine: anchor it here…"
TRY_DEMO = "Try the demo…"
DEMO_RUNNING = "The demo is running: what it asks…"
DEMO_HISTORY = "The demo's history…"
ANCHOR_RETRY_MAX = 16  # sweeps: a keyring that keeps failing is tried every 4 minutes


def icon(state: str, count: int = 0, look: Look | None = None) -> QIcon:
    """The tray's icon: the state's, or while requests wait the look of the highest of them
    (app/danger.py rule 4), with how many wait."""
    shown = look.path if look is not None and state == "pending" else RESOURCES / f"{state}.svg"
    pixmap = QIcon(str(shown)).pixmap(64, 64)
    if count and state == "pending":
        pixmap = _badge(pixmap, count)
    return QIcon(pixmap)


def _badge(pixmap: QPixmap, count: int) -> QPixmap:
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(QColor("#b42318"))
    painter.setPen(QPen(QColor("#ffffff"), 2))  # outlined: it stays apart on a red icon
    painter.drawEllipse(34, 1, 29, 29)
    font = QFont()
    font.setPixelSize(20)
    font.setBold(True)
    painter.setFont(font)
    painter.drawText(34, 0, 30, 30, 0x0084, str(count) if count < 10 else "9+")
    painter.end()
    return pixmap


class TrayApp(QObject):
    state_changed = Signal(str)

    def __init__(
        self,
        store: Store,
        heads: HeadStore,
        data_dir: Path,
        *,
        native: bool = True,
        operator: OperatorKey | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.config_path = paths.config_path()
        self.model = AppModel(store, data_dir / "notified.json", self.config_path)
        self.operator = operator or operator_key.default()
        # The witness and the operator key: every keyring call on a thread of its own.
        self.witness = KeyringWorker(store.path, heads, data_dir / "alarm.json", self.operator)
        self.witness.checked.connect(self._witnessed)
        self.witness.keyed.connect(self._keyed)
        self.model.witness = self.witness.state
        self.key_problem = ""  # why decisions cannot be signed now, "" when they can
        self.session = secrets.token_hex(8)  # "until Signoff quits" grants name it
        # Asked once, before Qt makes its own choice of tray (app/labels.py rule 3).
        self.dbus_menu = dbus_menu_in_use()
        self.tray = QSystemTrayIcon(self)
        self.menu = QMenu()
        self.menu.triggered.connect(self._menu_chosen)
        self.menu.aboutToHide.connect(self._menu_closed)
        self._menu_says: object = None  # what the menu says now (see _rebuild)
        self._menu_stale = False
        self.tray.setContextMenu(self.menu)
        self.notifier = Notifier(
            self.tray, native=native, shown_file=data_dir / "notifications.json"
        )
        # Signals go to bound methods, never to a lambda or partial holding self: PySide keeps
        # those as long as their sender, a cycle through C++ that Python cannot collect, and
        # what it holds is then deleted by PySide's teardown at exit, in no set order, which
        # crashed (docs/reliability.md, "Crash at exit"). The other app modules do the same.
        self.notifier.clicked.connect(self.open_dialog)
        self.notifier.approve.connect(self._approve_from_notification)
        self.notifier.reject.connect(self._reject_from_notification)
        self.dialogs: dict[str, ApprovalDialog] = {}
        self.icon_look: Look | None = None  # the highest look waiting, as the icon shows it
        self.history: HistoryWindow | None = None
        self.settings: SettingsWindow | None = None
        # Servers with tools to review: menu entries opening Settings on them (app/review_notice)
        self.review = ReviewNotice(self.config_path, data_dir / "status", self.open_settings, self)
        self.menu.triggered.connect(self.review.chosen)
        self.notifications = self._notifications()
        self.watcher = Watcher(store.path, self)
        self.watcher.changed.connect(self.refresh)
        self._sweeper = QTimer(self)
        self._sweeper.setInterval(SWEEP_MS)
        self._sweeper.timeout.connect(self.sweep)
        # The proxies' keyring notes, read again even when no wake reaches the app (no Unix
        # sockets, a run folder's path too long to bind): a listing of one small folder.
        self._proxies = QTimer(self)
        self._proxies.setInterval(PROXIES_MS)
        self._proxies.timeout.connect(self._proxies_tick)
        self._anchor_wait = self._anchor_countdown = 1  # sweeps between keyring retries
        self._alarmed = ""
        self._confirming: QMessageBox | None = None  # the question before accepting a database
        self.config_outside = ""  # why config.toml is not the recorded one, "" when it is
        self.data_dir = data_dir
        # Running proxies that cannot reach the OS keyring (core/proxy/keyring_reach.py).
        self.unreachable: tuple[keyring_reach.Unreachable, ...] = ()
        self.config_dialog: ConfigOutsideDialog | None = None
        self.said: list[tuple[str, str]] = []  # (title, text) of the tray's messages, in order
        self.tray.activated.connect(self._activated)
        # Trying the demo from here: its own home and store, this app's dialogs (app/demo.py).
        self.demo = DemoRun(data_dir, self.operator)
        self.demo.changed.connect(self._demo_changed)
        self.demo.problem.connect(self._demo_problem)
        self.notifier.demo.connect(self.try_demo)

    def start(self) -> None:
        self.leave_session_bus()
        self._app_session(grants.start_app_session)  # a crashed app's are over (decision 0050)
        self.witness.check_all()
        self.witness.fetch_key()
        # The icon first: a hidden icon shows no message, and an alarm found now must show.
        self._rebuild()
        self.tray.show()
        self.notifier.clear_left_over()
        self.check_config()
        self.sweep()
        self.refresh()
        self._sweeper.start()
        self._proxies.start()

    def leave_session_bus(self) -> None:
        """This session's bus address, left for the proxies a host starts without it."""
        try:
            session_bus.leave()
        except (SessionBusRefused, OSError, SignoffError) as e:
            log.warning("the session bus address is not left for the proxies: %s", e)

    def stop(self) -> None:
        if self._app_session(grants.end_app_session):  # "until Signoff quits": now
            # The witness stops with the app: the end is kept in the keyring here, so that a
            # database cut back to before it is seen (core/grants.py rule 6).
            problem = grants.keep_end(self.store, Anchor(self.witness.heads))
            if problem:
                log.error("the grants' end is recorded but not kept in the keyring: %s", problem)
        self._sweeper.stop()
        self._proxies.stop()
        self.demo.stop()
        self.watcher.close()
        if self.config_dialog is not None:
            self.config_dialog.close()
        self.notifier.close()
        self.witness.close()
        self.tray.hide()

    def _app_session(self, end: Callable[[Store, str], int]) -> int:
        """End the "until Signoff quits" grants ``end`` names, and say how many; a store that
        cannot be written now never keeps the app from starting or quitting (their cap ends
        them: core/grants)."""
        try:
            return end(self.store, self.session)
        except SignoffError as e:
            log.error("the grants of this app's session could not be ended: %s", e)
            return 0

    # --- reacting to the store ---------------------------------------------------------

    def refresh(self) -> None:
        self.witness.advance()  # its answer comes back to _witnessed
        fresh = self.model.refresh()
        for p in fresh if self.notifications == "each" else ():
            log.info("notifying approval %s (%s)", p.id, p.title)
            self.notifier.notify(p)
        self._follow_decisions()
        self.check_config()
        self.check_proxies()
        for item in self.review.read():  # newly waiting: said once, then in the menu
            self.say("Signoff: tools to review", f"{item.words()}. {REVIEW_WHY}")
        if self.history is not None and self.history.isVisible():
            self.history.refresh()
        self._rebuild()

    def _witnessed(self, state: WitnessState) -> None:
        """The witness's answer, from its thread: the icon, the menu, the alarm's message."""
        was = self.model.witness
        self.model.witness = state
        if state.anchored and not was.anchored and was.head is not None:
            log.info("the keyring answers again: the chain is anchored")
        if state.alarm and self._alarmed != state.alarm:
            self._alarmed = state.alarm
            self.say("Signoff: the record does not verify", state.alarm,
                     QSystemTrayIcon.MessageIcon.Critical)  # fmt: skip
        if self.history is not None and (state.anchored, state.alarm) != (was.anchored, was.alarm):
            self.history.witness_changed()  # its banner follows what the witness says
        self._rebuild()

    def _keyed(self, problem: str) -> None:
        if problem != self.key_problem:
            self.key_problem = problem
            self._rebuild()

    def say(self, title: str, text: str, icon: QSystemTrayIcon.MessageIcon = INFO) -> None:
        """A message from the tray (its text never holds a request's arguments). The icon is
        shown first: a hidden icon shows no message."""
        if not self.tray.isVisible():
            self.tray.show()
        self.said.append((title, text))
        self.tray.showMessage(title, text, icon, 10_000)

    def _follow_decisions(self) -> None:
        """Prompts of requests no longer pending: notifications go, dialogs say who decided."""
        waiting = {p.id for p in self.model.pending}
        for approval_id in self.notifier.showing() - waiting:
            self.notifier.withdraw(approval_id)
        for approval_id, dialog in list(self.dialogs.items()):
            live = dialog.isVisible() and dialog.approve_button.isEnabled()
            if approval_id not in waiting and live:
                dialog.decided_elsewhere(self.decided_text(approval_id))

    def decided_text(self, approval_id: str) -> str:
        """Who decided a request that is no longer pending, in a sentence."""
        with self.store.snapshot() as conn:
            approval = read_approval(conn, approval_id)
        return decided_text(approval)

    def sweep(self) -> None:
        """Every SWEEP_MS: the sweeper, and the keyring tried again while the head is not kept."""
        try:
            for line in sweep(self.store):
                log.info("sweeper: %s", line)
        except SignoffError as e:
            log.warning("sweeper: %s", e)
        self.check_config()
        self._proxies_tick()
        self._retry_anchor()

    def _proxies_tick(self) -> None:
        if self.check_proxies():
            self._rebuild()

    def check_proxies(self) -> bool:
        """Which running proxies cannot reach the OS keyring; each new one said once, as an
        alarm. True when that changed."""
        now = keyring_reach.read(self.data_dir)
        if now == self.unreachable:
            return False
        seen = {n.pid for n in self.unreachable}
        self.unreachable = now
        for note in now:
            if note.pid not in seen:
                log.error("%s", note.words())
                self.say("Signoff: a proxy cannot reach the OS keyring",
                         f"{note.words()}: its calls are refused.",
                         QSystemTrayIcon.MessageIcon.Critical)  # fmt: skip
        return True

    def check_config(self) -> None:
        """Whether config.toml is the configuration Signoff recorded; said once when not. From
        the database and the file alone: no keyring call on this thread (the dialog, opened by
        the operator, reads what is in force)."""
        try:
            why = config_record.glance(self.store, self.config_path)
        except SignoffError as e:
            why = f"the recorded configuration cannot be read: {e}"
        if why == self.config_outside:
            return
        self.config_outside = why
        if why:
            log.warning("%s", why)
            self.say(f"Signoff: {config_outside.TITLE}", why,
                     QSystemTrayIcon.MessageIcon.Warning)  # fmt: skip
        self._rebuild()

    def open_config_outside(self) -> ConfigOutsideDialog:
        if self.config_dialog is None:
            self.config_dialog = ConfigOutsideDialog(self.store, self.config_path)
            self.config_dialog.decided.connect(self.check_config)
        self.config_dialog.show_state()
        self.config_dialog.show()
        self.config_dialog.raise_()
        self.config_dialog.activateWindow()
        return self.config_dialog

    def _retry_anchor(self) -> None:
        """A keyring that came back keeps the head again without waiting for the record to
        change. One still failing is tried after 1, 2, 4... sweeps, at most every
        ANCHOR_RETRY_MAX: a locked keyring asks for its password on each try."""
        witness = self.model.witness
        if witness.head is None or witness.anchored or witness.alarm:
            self._anchor_wait = self._anchor_countdown = 1
            return
        self._anchor_countdown -= 1
        if self._anchor_countdown > 0:
            return
        self.witness.retry()  # on the worker; an answer that anchors resets the wait above
        if self.key_problem:
            self.witness.fetch_key()
        self._anchor_wait = min(self._anchor_wait * 2, ANCHOR_RETRY_MAX)
        self._anchor_countdown = self._anchor_wait

    # --- deciding -----------------------------------------------------------------------

    def open_dialog(self, approval_id: str) -> ApprovalDialog | None:
        pending = next((p for p in self.model.pending if p.id == approval_id), None)
        if pending is None:
            return None
        dialog = self.dialogs.get(approval_id)
        if dialog is None:
            dialog = ApprovalDialog(pending, timing=self.model.timing(),
                                    config_path=self.config_path, store=self.store)  # fmt: skip
            dialog.decided.connect(self.decide)
            dialog.details.connect(self.show_in_history)
            dialog.rule_saved.connect(self._rule_saved)
            # Qt deletes the closed dialog; only then is it forgotten here (dropping the last
            # Python reference inside its own finished signal would delete it mid-emission).
            # Through a weak reference, not a bound method: an app being deleted deletes its
            # dialogs, whose signal would then reach a Python object half gone.
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.destroyed.connect(partial(_forget_dialog, weakref.ref(self), approval_id))
            self.dialogs[approval_id] = dialog
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def open_history(self) -> HistoryWindow:
        if self.history is None:
            self.history = HistoryWindow(self.store, self.witness.heads, self.config_path)
            self.history.open_approval.connect(self.open_dialog)
        self.history.show()
        self.history.raise_()
        self.history.activateWindow()
        return self.history

    def open_settings(self) -> SettingsWindow:
        if self.settings is None:
            self.settings = SettingsWindow(self.config_path, self.store)
            self.settings.state.changed.connect(self._config_changed)
            self.settings.state.recheck.connect(self.recheck_history)
        self.settings.show()
        self.settings.raise_()
        self.settings.activateWindow()
        return self.settings

    def recheck_history(self) -> None:
        """The history's re-check of every run against the rules as they are now."""
        history = self.open_history()
        history.tabs.setCurrentWidget(history.recheck_tab)
        history.recheck_all()

    def _rule_saved(self) -> None:
        """A rule saved from a dialog: an open settings window reads the file again."""
        if self.settings is not None:
            self.settings.state.reload()
            self.settings.state.changed.emit()  # its pages, and _config_changed

    def _config_changed(self) -> None:
        self.notifications = self._notifications()
        self.refresh()

    def _notifications(self) -> str:
        try:
            return configuration.load(self.config_path).notifications
        except SignoffError as e:  # a broken file: notify, the safe side
            log.warning("configuration: %s", e)
            return configuration.NOTIFICATIONS[0]

    def welcome(self) -> None:
        """The first start's welcome, offering the demo: a button on the notification where
        the notification service has buttons, else a click on the balloon; and the menu."""
        self.notifier.welcome(first_start.TITLE, first_start.MESSAGE, first_start.BUTTON,
                              first_start.CLICK)  # fmt: skip

    def try_demo(self) -> None:
        """The demo, in a home of its own (app/demo.py): its requests open here."""
        if self.demo.start():
            self.say("Signoff: the demo starts", first_start.STARTED)

    def _demo_changed(self) -> None:
        """The menu says whether the demo runs: made again after the menu entry that started
        it has finished its own signal (the menu deletes its entries when made again)."""
        QTimer.singleShot(0, self, self._rebuild)

    def _demo_problem(self, text: str) -> None:
        self.say("Signoff: the demo", text, QSystemTrayIcon.MessageIcon.Warning)

    def show_in_history(self, run_id: str) -> None:
        """The history window, with this run's details (from a notification's dialog)."""
        self.open_history().show_run(run_id)

    def _approve_from_notification(self, approval_id: str, shown_hash: str) -> None:
        self.decide(approval_id, shown_hash, "approve", "from the notification")

    def _reject_from_notification(self, approval_id: str, shown_hash: str) -> None:
        self.decide(approval_id, shown_hash, "reject", "from the notification")

    def decide(self, approval_id: str, shown_hash: str, decision: str, reason: str = "") -> bool:
        """Decide the request as the prompt showed it: ``shown_hash`` is the expected hash, so a
        request rewritten behind the id since (whatever the app re-read meanwhile) is refused."""
        pending = next((p for p in self.model.pending if p.id == approval_id), None)
        if pending is None:  # decided meanwhile, elsewhere: the button says so
            self.say("Signoff: nothing decided", self.decided_text(approval_id))
            return False
        if decision == "approve" and reason == "from the notification" and pending.needs_dialog:
            self.open_dialog(approval_id)  # never approved from the notification alone
            return False
        decision, _, scope = decision.partition(":")  # from the dialog only (app/dialog.py)
        problem = self.witness.key_problem(self.store)  # the keyring is read on its own thread
        if problem:
            self.key_problem = problem
            self.say("Signoff: not decided", f"Keyring locked or unavailable: {problem}",
                     QSystemTrayIcon.MessageIcon.Warning)  # fmt: skip
            self._rebuild()
            return False
        by = f"operator:{getpass.getuser()}"
        try:
            if decision == "approve":
                approve(self.store, pending.run_id, pending.id, by, reason,
                        expected_hash=shown_hash, operator=self.operator, scope=scope or None,
                        app_session=self.session)  # fmt: skip
            else:
                reject(self.store, pending.run_id, pending.id, by, reason,
                       expected_hash=shown_hash, operator=self.operator)  # fmt: skip
        except SignoffError as e:
            self.say("Signoff: not decided", str(e), QSystemTrayIcon.MessageIcon.Warning)
            return False
        self.refresh()
        return True

    # --- the icon and the menu ----------------------------------------------------------

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        """A left click opens what waits: the oldest request's dialog, or the history."""
        if reason != QSystemTrayIcon.ActivationReason.Trigger:
            return
        if self.model.pending:
            self.open_dialog(self.model.pending[0].id)
        else:
            self.open_history()

    def _rebuild(self) -> None:
        model = self.model
        state = "alarm" if self.unreachable else model.state
        self.icon_look = highest((p.side_effect, p.kind) for p in model.pending)
        self.tray.setIcon(icon(state, len(model.pending), self.icon_look))
        witness = model.witness
        anchor = "anchored in the keyring" if witness.anchored else "not anchored"
        most = f" (the most: {self.icon_look.words.lower()})" if self.icon_look else ""
        tip = {"idle": "nothing waits", "pending": f"{len(model.pending)} waiting{most}",
               "alarm": "the record does not verify"}[model.state]  # fmt: skip
        if self.unreachable:
            tip = f"{tip}; {self.unreachable[0].words()}"
        keyring = (
            "; decisions UNAUTHENTICATED"
            if model.unauthenticated
            else "; keyring locked: decisions cannot be signed"
            if self.key_problem
            else ""
        )
        outside = f"; {config_outside.TITLE.lower()}" if self.config_outside else ""
        # The database first: two apps on two homes are told apart (issue 21, item 7).
        self.tray.setToolTip(
            f"Signoff on {shown_path(self.store.path)}: {tip}; chain {anchor}{keyring}{outside}"
        )
        # The menu is made again only when what it says changed, and never while it is open
        # (made again under the pointer it closed, or moved): then once it closes.
        says = (state, tuple((p.id, p.title, p.side_effect, p.fingerprint) for p in model.pending),
                witness, self.key_problem, model.unauthenticated, model.paused,
                self.dbus_menu, self.config_outside, self.review.waiting, self.demo.running,
                self.demo.has_record(), self.unreachable)  # fmt: skip
        if says == self._menu_says:
            return
        if self.menu.isVisible():
            self._menu_stale = True
            return
        self._menu_says = says
        self._menu_stale = False
        menu = self.menu
        menu.clear()
        if model.unauthenticated:
            unsigned = menu.addAction(self._label(UNAUTHENTICATED))
            unsigned.setEnabled(False)
            menu.addSeparator()
        elif self.key_problem:
            locked = menu.addAction(
                self._label("Keyring locked: chain not anchored, decisions cannot be signed")
            )
            locked.setEnabled(False)
            menu.addSeparator()
        if witness.alarm:
            alarm = menu.addAction(self._label(f"Alarm: {witness.alarm[:80]}"))
            acknowledge = menu.addAction("Acknowledge the alarm and verify again")
            acknowledge.triggered.connect(self._acknowledge)
            alarm.setEnabled(False)
            if UNCONFIRMED in witness.alarm:
                accept = menu.addAction(ACCEPT_DATABASE)
                accept.triggered.connect(self.confirm_database)
            menu.addSeparator()
        for note in self.unreachable:
            menu.addAction(self._label(f"Alarm: {note.words()}")).setEnabled(False)
        if self.unreachable:
            menu.addSeparator()
        if self.config_outside:
            outside_action = menu.addAction(self._label(f"{config_outside.TITLE}: review…"))
            outside_action.triggered.connect(self.open_config_outside)
            menu.addSeparator()
        self.review.add_to(menu, self._label)
        if self.store.path.parent != paths.platform_dirs()[0]:  # another home: say which
            menu.addAction(self._label(f"On {shown_path(self.store.path)}")).setEnabled(False)
        header = menu.addAction(
            f"{len(model.pending)} waiting for you" if model.pending else "Nothing waits"
        )
        header.setEnabled(False)
        for p in model.pending:
            action = menu.addAction(
                self._label(f"{p.title} ({class_words(p.side_effect)}) fingerprint {p.fingerprint}")
            )
            action.setIcon(look(p.side_effect, p.kind).icon())
            action.setData(p.id)  # opened by _menu_chosen
        menu.addSeparator()
        history = menu.addAction("History…")
        history.triggered.connect(self.open_history)
        settings = menu.addAction("Settings…")
        settings.triggered.connect(self.open_settings)
        if self.demo.running:
            menu.addAction(DEMO_RUNNING).triggered.connect(self.demo.show_waiting)
        else:
            menu.addAction(TRY_DEMO).triggered.connect(self.try_demo)
        if self.demo.has_record():
            menu.addAction(DEMO_HISTORY).triggered.connect(self.demo.open_history)
        seen = witness.head.seq if witness.head else 0
        chain = menu.addAction(self._label(f"{intact(seen)}, {anchor}"))
        chain.setEnabled(False)
        pause = QAction("Pause notifications", menu)
        pause.setCheckable(True)
        pause.setChecked(model.paused)
        pause.toggled.connect(self._pause)
        menu.addAction(pause)
        start_at_login = QAction("Start at login", menu)
        start_at_login.setCheckable(True)
        start_at_login.setChecked(autostart.enabled())
        start_at_login.toggled.connect(autostart.set_enabled)
        menu.addAction(start_at_login)
        menu.addSeparator()
        quit_action = menu.addAction("Quit Signoff")
        quit_action.triggered.connect(self._quit)
        self.state_changed.emit(state)

    def _menu_closed(self) -> None:
        """A change seen while the menu was open is shown once it closes (after the action
        chosen in it, if any, has run)."""
        if self._menu_stale:
            QTimer.singleShot(0, self, self._rebuild)

    def _menu_chosen(self, action: QAction) -> None:
        """A waiting request's entry (its data is the approval id) opens its dialog."""
        approval_id = action.data()
        if isinstance(approval_id, str) and approval_id:
            self.open_dialog(approval_id)

    def _label(self, text: str) -> str:
        """A menu label that reads as written on this tray (app/labels.py)."""
        return menu_text(text, self.dbus_menu)

    def _pause(self, paused: bool) -> None:
        self.model.paused = paused
        self._rebuild()

    def _acknowledge(self) -> None:
        self.witness.acknowledge()
        self._alarmed = ""

    def confirm_database(self) -> QMessageBox:
        """Ask before anchoring another database here (core/witness.py rule 5): the alarm in
        full, and Accept or Cancel; the box, for whoever drives it."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Signoff: another database",
                          f"{self.witness.state.alarm}\n\nAccept the database at"
                          f" {self.store.path} as yours, and anchor it here?")  # fmt: skip
        accept = box.addButton("Accept this database", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)

        def answered() -> None:
            if box.clickedButton() is accept:
                self.witness.accept()
                self._alarmed = ""

        box.finished.connect(answered)
        box.open()
        self._confirming = box
        return box

    def _quit(self) -> None:
        from PySide6.QtWidgets import QApplication

        self.stop()
        QApplication.quit()

    def pending_by_id(self, approval_id: str) -> Pending | None:
        return next((p for p in self.model.pending if p.id == approval_id), None)


def shown_path(path: Path) -> str:
    """A path as a person reads it: under their home folder as ``~/...``."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def _forget_dialog(app: weakref.ref[TrayApp], approval_id: str) -> None:
    """A dialog Qt deleted leaves ``dialogs`` (nothing to do while the app itself goes)."""
    live = app()
    if live is not None:
        live.dialogs.pop(approval_id, None)
