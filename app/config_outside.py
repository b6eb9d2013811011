"""The window for a config.toml changed outside Signoff: what differs, then accept or restore.

The rules in force stay the recorded ones (core/proxy/config_record.py) until the operator
chooses here (or with ``signoff settings accept|restore``): Accept records the file as it was
shown (a file changed since is refused), once it validates; Restore writes the recorded
configuration back over it. The diff is the recorded configuration against the file, as text,
nothing in it rendered. The keyring is read here, on the operator's opening and clicks, with the
deadlines of core/keyring_calls.py; the tray's own watch never reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.words import said
from core import wake
from core.errors import SignoffError
from core.proxy import config as configuration
from core.proxy import config_commands, config_record
from core.store import Store

log = logging.getLogger("signoff.app")

TITLE = "Configuration changed outside Signoff"


class ConfigOutsideDialog(QDialog):
    decided = Signal()  # accepted or restored: the tray looks again

    def __init__(self, store: Store, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.path = path
        self.setWindowTitle(f"Signoff: {TITLE}")
        self.resize(820, 560)
        layout = QVBoxLayout(self)
        self.why = QLabel()
        self.why.setWordWrap(True)
        self.why.setTextFormat(self.why.textFormat().PlainText)
        layout.addWidget(self.why)
        self.diff = QPlainTextEdit()
        self.diff.setReadOnly(True)
        self.diff.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.diff.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        layout.addWidget(self.diff)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020;")
        self.problem.setTextFormat(self.problem.textFormat().PlainText)
        layout.addWidget(self.problem)
        buttons = QDialogButtonBox()
        self.accept_button = QPushButton("Accept this file")
        self.accept_button.setToolTip("Record the file as it is now: its rules take effect")
        self.restore_button = QPushButton("Restore the recorded one")
        self.restore_button.setToolTip("Write the configuration Signoff recorded over the file")
        self.close_button = QPushButton("Close")
        buttons.addButton(self.accept_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.restore_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.close_button, QDialogButtonBox.ButtonRole.RejectRole)
        # A stray Enter takes up nothing: no button is the default.
        for button in (self.accept_button, self.restore_button, self.close_button):
            button.setAutoDefault(False)
            button.setDefault(False)
        self.accept_button.clicked.connect(self.take_up)
        self.restore_button.clicked.connect(self.put_back)
        self.close_button.clicked.connect(self.close)
        layout.addWidget(buttons)
        self.show_state()

    def show_state(self) -> None:
        self.shown = ""  # the fingerprint of the file as shown: Accept takes up that file only
        try:
            now = config_record.state(self.store, self.path)
        except SignoffError as e:  # no trusted record: the file alone, which Accept can take up
            self._refused(e)
            data = self._file()
            self.why.setText(f"No configuration can be trusted. {self.path} as it is now:")
            self.diff.setPlainText("" if data is None else data.decode("utf-8", "replace"))
            self.shown = "" if data is None else config_record.fingerprint(data)
            self.accept_button.setEnabled(bool(self.shown))
            self.restore_button.setEnabled(False)
            return
        self.why.setText(now.why() or f"{self.path} is the configuration Signoff recorded.")
        self.diff.setPlainText(config_commands.diff(now))
        if now.changed_outside and now.file is not None and not now.file_problem:
            self.shown = config_record.fingerprint(now.file)
        self.accept_button.setEnabled(bool(self.shown))
        self.restore_button.setEnabled(now.changed_outside and now.recorded is not None)

    def _file(self) -> bytes | None:
        try:
            return configuration.read_bytes(self.path)
        except (OSError, SignoffError):
            return None

    def take_up(self) -> None:
        self._act(lambda: config_record.accept(self.store, self.path, self.shown), "accepted")

    def put_back(self) -> None:
        self._act(lambda: config_record.restore(self.store, self.path), "restored")

    def _act(self, act: Callable[[], object], done: str) -> None:
        try:
            act()
        except SignoffError as e:  # a file changed since shown, or one that does not validate
            self._refused(e)
            return
        log.info("configuration %s", done)
        wake.wake("config")
        self._said("")
        self.show_state()
        self.decided.emit()

    def _said(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.setToolTip("")
        self.problem.setVisible(bool(text))

    def _refused(self, e: Exception) -> None:
        """Why, in words; the error's name in the tooltip (for a bug report)."""
        self._said(said(e))
        self.problem.setToolTip(type(e).__name__)
