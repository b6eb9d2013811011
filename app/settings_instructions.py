"""A server's instructions on the tools page: their text as the server sends them now, whether
they reach hosts, and pinning them; changed ones are shown against the text as pinned first
(core/proxy/instructions.py, the rules; core/proxy/pindiff.py, the diff)."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.diffview import RepinDialog
from app.settings import SettingsState
from app.words import said
from core.marks import visible
from core.proxy import instructions, manage, pindiff, pinstore
from core.proxy.instructions import CHANGED, NEW, NONE, PINNED

STATES = {
    NONE: "The server sends no instructions.",
    NEW: "Not pinned yet: withheld from hosts. Read them, then pin them.",
    PINNED: "Pinned, unchanged: forwarded to hosts.",
    CHANGED: "CHANGED since you pinned them: withheld from hosts until you review and re-pin them.",
}


class InstructionsBox(QGroupBox):
    """The instructions of the server the tools page shows (``show``)."""

    def __init__(self, state: SettingsState, parent: QWidget | None = None) -> None:
        super().__init__("Server's instructions (read by the host's model)", parent)
        self.state = state
        self.server = ""
        self.told: instructions.Instructions | None = None
        self.repin_dialog: RepinDialog | None = None
        self._repinning: tuple[str, str] | None = None  # (server, text) the dialog shows
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.pin_button = QPushButton("Pin instructions")
        self.pin_button.clicked.connect(self.pin)
        row.addWidget(self.status, 1)
        row.addWidget(self.pin_button)
        layout.addLayout(row)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumHeight(90)
        layout.addWidget(self.text)
        self.message = QLabel()
        self.message.setWordWrap(True)
        layout.addWidget(self.message)
        self.show_server("")

    def show_server(self, name: str) -> None:
        """Show server ``name``'s instructions as its last connection in this window gave them."""
        if name != self.server:
            self.message.setText("")
        self.server = name
        server = self.state.config.servers.get(name)
        handshake = self.state.handshakes.get(name)
        self.told = None
        if server is None or handshake is None:
            self.status.setText("Connect to the server to see its instructions.")
        else:
            self.told = instructions.evaluate(handshake, server.instructions_pin)
            self.status.setText(
                STATES.get(self.told.status, f"Refused, never forwarded: {self.told.reason}.")
            )
        text = self.told.text if self.told is not None else None
        # Characters a reader cannot see are shown as ⟨U+XXXX⟩, as in every diff and prompt.
        self.text.setPlainText(visible(text) if text is not None else "")
        self.text.setVisible(text is not None)
        waiting = self.told is not None and self.told.status in (NEW, CHANGED)
        self.pin_button.setEnabled(waiting)
        changed = self.told is not None and self.told.status == CHANGED
        self.pin_button.setText("Review changes…" if changed else "Pin instructions")

    def pin(self) -> RepinDialog | None:
        """Pin the instructions as shown; changed ones show what changed first."""
        told, server = self.told, self.state.config.servers.get(self.server)
        if told is None or told.text is None or server is None:
            return None
        if told.status == CHANGED and server.instructions_pin is not None:
            problem = ""
            try:
                old = pinstore.kept_instructions(
                    manage.pins_dir(self.state.config_path), server.instructions_pin
                )
            except (pinstore.PinTextAltered, pinstore.PinTextUnreadable) as e:
                problem = (
                    "The text kept when you pinned these instructions cannot be trusted, so no"
                    f" diff is shown: {said(e)}"
                )
                old = None
            diff = pindiff.instructions_diff(self.server, old, told.text)
            self.repin_dialog = RepinDialog(diff, self, problem)
            self._repinning = (self.server, told.text)
            self.repin_dialog.accepted.connect(self._repin_accepted)
            self.repin_dialog.open()
            return self.repin_dialog
        self._pin(self.server, told.text)
        return None

    def _repin_accepted(self) -> None:
        if self._repinning is not None:
            self._pin(*self._repinning)

    def _pin(self, server: str, text: str) -> None:
        error = self.state.apply(lambda p: manage.pin(p, server, [], instructions=text))
        self.message.setText(
            f"Not pinned: {error}" if error else f"Pinned the instructions of {server}."
        )
        self.show_server(self.server)
