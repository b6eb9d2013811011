"""The approval dialog: exactly what will run, readably; nothing that can mislead.

Rules:

1. A headline says in plain words what the tool does (``core.present.CLASS_WORDS``); a
   destructive, interrupted or duplicate request also says so in bold red, and a request that
   touches Signoff's own files says so with the paths it names.
2. The arguments are a table, one row per key in the schema's order (``core.present``): a
   string by its text, anything else by its JSON text, with ``core.marks``' marks. Values wrap,
   at a word or inside one, so no value needs a sideways scroll and no tail is out of sight.
   The values the operator fixed follow, each row marked "set by Signoff": the table is what
   the server receives.
3. When anything had to be marked, a flag above the table says what the marks mean; a path
   shows where it resolves, and whether it climbs above where it starts, in red. Each value
   the policy read as meaning other than it says, or as not one thing (``Pending.read``), is
   said in red above them, its spelling beside what it means (``Pending.meanings``).
4. The exact canonical JSON that is hashed is one click away, wrapped, read-only.
5. Request text is plain text everywhere: nothing the model wrote is read as markup.
6. One hash, one name: the "Request hash", with its fingerprint (what a notification shows).
7. No button is the default, so a stray Enter approves nothing. Once the request is decided
   elsewhere or gone, the dialog says so and can only be closed: it emits no decision.
8. A request the policy asked about may be approved for longer than once (core/grants.py):
   this exact request for 15 min, 1 h or until Signoff quits, chosen here and only here (never
   from a notification). "Once" is the choice the dialog opens with. A request asked about for
   what it may already have done (interrupted, a duplicate, Signoff's own files) is approved
   once each time: no choice is offered, nor for a request no host made. Each choice names the
   host it covers ("…for 15 min, from claude-code 2.0 (process 4242)"): a grant covers that
   host's identical calls only (core/grants.py rule 8). The decision emitted is ``approve`` or
   ``approve:SCOPE``.
   Beside it, "Always…" opens the rule editor (app/rule_editor.py), offered for the same
   requests (and only when the dialog knows the configuration): a rule saved there that
   decides this very request decides it here, as once, as Approve or Reject would.
9. A band at the top shows the request's class, or "may have run", in its colour, icon and
   words (``app.danger``). Below the form, the time it has counts down once a second by the
   dialog's clock (``app.countdown``): how long the agent's call is still held, and when the
   request lapses; at zero each says what has happened.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from PySide6.QtCore import QSize, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextFrameFormat,
    QTextLength,
    QTextOption,
    QTextTableFormat,
)
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app import countdown, danger
from app.countdown import Timing
from app.model import Pending
from app.words import class_explanation, class_words
from core import marks, present
from core.records import ApprovalView
from core.store import Store
from core.tools import SideEffect

CLASSES = frozenset(s.value for s in SideEffect)  # the kinds of the policy's own approvals

KIND_TEXT = {
    "interrupted_side_effect": "Interrupted: this call started and its outcome is unknown."
    " Approving runs it again, once.",
    "duplicate": "Duplicate: the same call already ran ({reason}).",
    "own_files": "Touches Signoff's own files: approve only if you meant the agent to read or"
    " change Signoff's configuration, pinned tools or records.",
}
OWN_FILES_REASON = "touches Signoff's own files: "
FIXED_NOTE = (
    "Rows marked “set by Signoff” are the values fixed for this tool in Signoff's settings:"
    " the model did not write them, and they are bound to this approval with the tool."
)
RED = "#b42318"
# Rule 8: (scope, words), "once" first; the words say what is bound: this exact request.
SCOPES = (
    ("", "Once"),
    ("15min", "This exact request for 15 min"),
    ("1h", "This exact request for 1 hour"),
    ("app", "This exact request until Signoff quits"),
)
SCOPE_NOTE = (
    "Approving for a while lets the same tool of the same server run again with exactly these"
    " arguments without asking you, until then, when the same host asks; another host's"
    " identical request still asks you. Each run is recorded in the history."
)
RULE_NOTE = (
    "Make a rule: always allow or always reject this tool when its arguments are like these"
    " (the same values, a folder, a pattern, a bound), for a while or for good."
)
MARKED_FLAG = (
    "This request contains characters that are invisible or reorder text; each is shown as"
    " ⟨U+XXXX⟩ (long runs of spaces as ⟨N spaces⟩)."
)
REORDERS_FLAG = (
    "Some of this request is written right to left: on the screen its order may not be the"
    " order sent. The exact JSON shows it with such characters escaped."
)
RAW_NOTE = "Exactly the text that is hashed."
RAW_FIXED = "Sent with the values set by Signoff added:"
RAW_ESCAPED = (
    "The text that is hashed, with every character outside ASCII written as \\uXXXX: the same"
    " JSON, in an order no character can change on the screen."
)
CLIMBS = "(climbs above where it starts)"
MEANINGS = "Some values mean other than they say, or could mean more than one thing:"
_SELECTABLE = Qt.TextInteractionFlag.TextSelectableByMouse
_WRAP_ANYWHERE = QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere


def ascii_json(text: str) -> str:
    """JSON text with every character outside ASCII written as ``\\uXXXX`` (a pair for those past
    U+FFFF): the same value, and nothing in it is invisible or drawn right to left. Outside
    strings canonical JSON has only ASCII, so escaping character by character is exact."""

    def escaped(c: str) -> str:
        code = ord(c)
        if code < 0x80:
            return c
        if code <= 0xFFFF:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    return "".join(escaped(c) for c in text)


TICK_MS = 1000


def _utc_now() -> datetime:
    return datetime.now(UTC)


def headline(pending: Pending) -> str:
    words = present.CLASS_WORDS.get(pending.side_effect or "")
    said = f"It {words}." if words else "What it does is not known."
    return f"Run {pending.title}? {said}"


def resolution(argument: present.Argument) -> str | None:
    """The line under a path's value (rule 3), or None."""
    if argument.resolves is None and not argument.climbs:
        return None
    where = argument.resolves
    parts = [f"→ resolves to {marks.visible(where, lines=False)}"] if where is not None else []
    return " ".join(parts + ([CLIMBS] if argument.climbs else []))


_CLASS_NAME = re.compile(r"\b(read_only|local_mutation|remote_mutation|destructive)\b")


def _class_in_words(found: re.Match[str]) -> str:
    """A class named in the policy's reason, as the window names it: “Changes this computer”."""
    return f"“{class_words(found[1])}”"


def plain_label(text: str, *, wrap: bool = True) -> QLabel:
    """A label for text that is short or ours: plain, never markup (rule 5), selectable."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(_SELECTABLE)
    return label


def _reading(edit: QTextEdit | QPlainTextEdit) -> None:
    """Read-only, selectable, wrapped at a word or inside one, never a sideways scroll."""
    edit.setReadOnly(True)
    edit.setUndoRedoEnabled(False)
    edit.setTextInteractionFlags(_SELECTABLE)
    edit.setWordWrapMode(_WRAP_ANYWHERE)
    edit.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)


class WrappedText(QTextEdit):
    """A label for request text: plain, selectable, and wrapped inside a long word too, which a
    QLabel cannot do (its long word would widen the dialog past the screen, out of sight)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        _reading(self)
        self.setPlainText(text)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Window)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.document().setDocumentMargin(0)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def text(self) -> str:
        return self.toPlainText()

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return math.ceil(self._laid_out(width).height())

    def sizeHint(self) -> QSize:
        width = min(math.ceil(self._laid_out(-1).width()), 480)  # -1: unwrapped
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(60, self.fontMetrics().height())

    def _laid_out(self, width: int) -> QSizeF:
        document = self.document().clone()
        document.setTextWidth(width)
        return document.size()


class ArgumentsView(QTextEdit):
    """The arguments table (rule 2).

    One read-only document holding a two-column table, rather than a QTableWidget or a grid of
    QLabels: a QLabel wraps only between words (a long word would widen the dialog until it
    needs a sideways scroll), a table cell elides what does not fit and cannot select part of a
    value. A document wraps inside a word too, scrolls only vertically, and lets any part be
    selected and copied. Text goes in through ``QTextCursor.insertText``, which never parses
    markup.
    """

    def __init__(self, view: present.RequestView, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        _reading(self)
        self.setMinimumHeight(90)
        cursor = QTextCursor(self.document())
        if not view.sent:
            cursor.insertText("(no arguments)")
            return
        self._fill(cursor, view.sent)

    def _fill(self, cursor: QTextCursor, arguments: tuple[present.Argument, ...]) -> None:
        key, value, flag = QTextCharFormat(), QTextCharFormat(), QTextCharFormat()
        signoff = QTextCharFormat()
        signoff.setFontItalic(True)
        signoff.setForeground(self.palette().placeholderText())
        key.setFontWeight(QFont.Weight.DemiBold)
        value.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        flag.setForeground(QColor(RED))
        flag.setFontWeight(QFont.Weight.Bold)
        percent = QTextLength.Type.PercentageLength
        table_format = QTextTableFormat()
        table_format.setWidth(QTextLength(percent, 100))
        table_format.setColumnWidthConstraints([QTextLength(percent, 26), QTextLength(percent, 74)])
        table_format.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
        table_format.setBorderBrush(self.palette().mid())
        table_format.setBorderCollapse(True)
        table_format.setBorder(1)
        table_format.setCellPadding(4)
        table = cursor.insertTable(len(arguments), 2, table_format)
        for row, argument in enumerate(arguments):
            named = table.cellAt(row, 0).firstCursorPosition()
            named.insertText(argument.key, key)
            if argument.fixed:  # never among the model's arguments: said on its own line
                named.insertBlock()
                named.insertText(present.SET_BY_SIGNOFF, signoff)
            at = table.cellAt(row, 1).firstCursorPosition()
            at.insertText(argument.value if argument.text is None else argument.text, value)
            note = resolution(argument)
            if note is not None:
                at.insertBlock()
                at.insertText(note, flag)


class ApprovalDialog(QDialog):
    decided = Signal(str, str, str, str)  # approval id, the request hash shown, decision, reason
    details = Signal(str)  # run id: show it in the history window
    rule_saved = Signal(str)  # the id of a rule saved from here: the configuration changed

    def __init__(
        self,
        pending: Pending,
        parent: QWidget | None = None,
        *,
        timing: Timing | None = None,
        clock: Callable[[], datetime] = _utc_now,
        config_path: Path | None = None,
        store: Store | None = None,
    ) -> None:
        """``config_path`` and ``store``: where a rule made here is saved and recorded."""
        super().__init__(parent)
        self.pending = pending
        self.config_path, self.store = config_path, store
        self.rule_editor: QDialog | None = None
        self.timing = timing or Timing()
        self.clock = clock
        self._over = False  # decided elsewhere or gone: nothing here may decide (rule 7)
        view = pending.view
        self.setWindowTitle(f"Signoff: {pending.title} asks for approval")
        self.setMinimumWidth(560)
        layout = QVBoxLayout(self)

        self.banner = plain_label("")
        self.banner.setStyleSheet("background: #fef0c7; padding: 6px; font-weight: bold;")
        self.banner.hide()
        layout.addWidget(self.banner)
        self.look = danger.look(pending.side_effect, pending.kind)
        layout.addWidget(self._band())
        self.headline = WrappedText(headline(pending))
        big = self.headline.font()
        big.setPointSizeF(big.pointSizeF() * 1.2)
        self.headline.setFont(big)
        layout.addWidget(self.headline)
        kind = KIND_TEXT.get(pending.kind, "").format(reason=pending.reason)
        self.kind_label = plain_label(
            kind or f"{class_words(pending.side_effect)}: needs your approval."
        )
        if pending.kind in KIND_TEXT or pending.side_effect == "destructive":
            self.kind_label.setStyleSheet(f"font-weight: bold; color: {RED};")
        layout.addWidget(self.kind_label)
        # The paths as they resolve, named by the proxy (core/policy/own_files.py): any text,
        # wrapped.
        touched = pending.reason.removeprefix(OWN_FILES_REASON)
        self.touches = WrappedText(marks.visible(f"It names {touched}", lines=False))
        self.touches.setStyleSheet(f"font-weight: bold; color: {RED};")
        self.touches.setVisible(pending.kind == "own_files")
        layout.addWidget(self.touches)
        self.meanings = WrappedText("\n".join((MEANINGS, *pending.meanings)))  # rule 3
        self.meanings.setStyleSheet(f"font-weight: bold; color: {RED};")
        self.meanings.setVisible(bool(pending.meanings))
        layout.addWidget(self.meanings)
        layout.addLayout(self._form(pending))
        self.hold_label = plain_label("")
        self.lapse_label = plain_label("")
        for label in (self.hold_label, self.lapse_label):
            layout.addWidget(label)

        flags = [MARKED_FLAG] * view.marked + [REORDERS_FLAG] * view.reorders
        self.flag = plain_label(" ".join(flags) or MARKED_FLAG)
        self.flag.setStyleSheet(f"font-weight: bold; color: {RED};")
        self.flag.setVisible(bool(flags))
        layout.addWidget(self.flag)
        layout.addWidget(QLabel("Arguments, exactly as they will be sent:"))
        self.arguments = ArgumentsView(view)
        layout.addWidget(self.arguments, 3)
        self.fixed_note = plain_label(FIXED_NOTE)
        self.fixed_note.setVisible(bool(view.fixed))
        layout.addWidget(self.fixed_note)

        self.raw_button = QPushButton("Show the exact JSON")
        self.raw_button.setCheckable(True)
        self.raw_button.setAutoDefault(False)
        self.raw_button.toggled.connect(self._show_raw)
        layout.addWidget(self.raw_button, 0, Qt.AlignmentFlag.AlignLeft)
        escape = view.marked or view.reorders
        self.raw_note = plain_label(RAW_ESCAPED if escape else RAW_NOTE)
        if escape:
            self.raw_note.setStyleSheet(f"color: {RED};")
        self.raw = QPlainTextEdit(ascii_json(pending.arguments) if escape else pending.arguments)
        self.raw_fixed = QPlainTextEdit(ascii_json(pending.fixed) if escape else pending.fixed)
        self.raw_fixed_note = plain_label(RAW_FIXED)
        for raw in (self.raw, self.raw_fixed):
            _reading(raw)
            raw.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
            raw.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._raw_widgets: tuple[QWidget, ...] = (self.raw_note, self.raw)
        if view.fixed:
            self._raw_widgets += (self.raw_fixed_note, self.raw_fixed)
        for widget in self._raw_widgets:
            widget.hide()
            layout.addWidget(widget, 2 if isinstance(widget, QPlainTextEdit) else 0)

        self.reason = QLineEdit()
        self.reason.setPlaceholderText("Reason (optional, recorded with your decision)")
        layout.addWidget(self.reason)
        layout.addLayout(self._buttons(pending))
        self.ticker = QTimer(self)
        self.ticker.setInterval(TICK_MS)
        self.ticker.timeout.connect(self.tick)
        self.tick()
        self.ticker.start()
        self._default_size()

    def _band(self) -> QFrame:
        """The class (or "may have run") in its colour, icon and words (rule 8)."""
        look = self.look
        band = QFrame()
        band.setObjectName("band")
        band.setStyleSheet(f"#band {{ background: {look.colour}; border-radius: 4px; }}")
        row = QHBoxLayout(band)
        row.setContentsMargins(8, 4, 8, 4)
        self.band_icon = QLabel()
        self.band_icon.setPixmap(look.pixmap(28))
        self.band_icon.setAccessibleName(look.words)
        # On a white tile: the icon's own colour is the band's, and its shape must show.
        self.band_icon.setStyleSheet("background: #ffffff; border-radius: 4px; padding: 2px;")
        words = look.words
        if look is danger.MAY_HAVE_RUN_LOOK:
            words += f" · {class_words(self.pending.side_effect)}"
        self.band_words = plain_label(words)
        weight = "bold" if look.bold else "600"
        self.band_words.setStyleSheet(f"color: #ffffff; font-weight: {weight};")
        row.addWidget(self.band_icon)
        row.addWidget(self.band_words, 1)
        self.band = band
        return band

    def tick(self) -> None:
        """Once a second: how long it has waited, is still held, and has before it lapses."""
        now = self.clock()
        self.waiting_label.setText(countdown.waited(self.pending, now))
        hold = countdown.hold_text(self.pending, self.timing, now)
        self.hold_label.setText(hold)
        self.hold_label.setVisible(bool(hold))
        self.lapse_label.setText(countdown.lapse_text(self.pending, self.timing, now))

    def _form(self, pending: Pending) -> QFormLayout:
        form = QFormLayout()
        for label, value in (
            ("Tool", pending.tool or "?"),
            ("Server", pending.server or "(library run)"),
        ):  # named by the server: any length, anything in them
            form.addRow(label, WrappedText(marks.visible(value, lines=False)))
        side = pending.side_effect
        shown_class = plain_label(class_words(side))  # the headline says what it does
        # The class's name as the configuration and the terminal write it, and what it means.
        shown_class.setToolTip(f"{side or 'no class'}: {class_explanation(side)}")
        form.addRow("Class", shown_class)
        policy = _CLASS_NAME.sub(_class_in_words, pending.reason) or "-"
        form.addRow("Policy", plain_label(marks.visible(policy, lines=False)))
        self.waiting_label = plain_label("")
        form.addRow("Waiting", self.waiting_label)
        self.description = WrappedText(marks.visible(pending.description or "(no description)"))
        form.addRow("Description", self.description)
        self.hash_label = plain_label(pending.request_hash, wrap=False)
        self.hash_label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.fingerprint_label = plain_label(f"fingerprint {pending.fingerprint}", wrap=False)
        row = QHBoxLayout()
        row.addWidget(self.hash_label)
        row.addWidget(self.fingerprint_label)
        row.addStretch(1)
        form.addRow("Request hash", row)
        return form

    def _buttons(self, pending: Pending) -> QHBoxLayout:
        buttons = QHBoxLayout()
        self.history_button = QPushButton("Details in history…")
        # Bound methods, not lambdas holding self (see app/tray.py).
        self.history_button.clicked.connect(self._details_clicked)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)
        self.close_button.hide()
        self.reject_button = QPushButton("Reject")
        self.approve_button = QPushButton("Approve")
        self.scope = QComboBox()  # rule 8
        for scope, words in SCOPES:
            self.scope.addItem(f"{words}, from {pending.host}" if scope else words, scope)
        self.scope.setToolTip(SCOPE_NOTE)
        self.scope.setVisible(pending.kind in CLASSES and bool(pending.host))
        self.rule_button = QPushButton("Always…")
        self.rule_button.setToolTip(RULE_NOTE)
        self.rule_button.setVisible(
            pending.kind in CLASSES and self.config_path is not None and bool(pending.server)
        )
        self.rule_button.clicked.connect(self.open_rule_editor)
        buttons.addWidget(self.history_button)
        buttons.addStretch(1)
        for button in (self.close_button, self.rule_button, self.reject_button, self.scope,
                       self.approve_button):  # fmt: skip
            buttons.addWidget(button)
        for button in (self.history_button, self.rule_button, self.reject_button,
                       self.approve_button):  # fmt: skip
            button.setAutoDefault(False)
            button.setDefault(False)
        self.reject_button.clicked.connect(self._reject_clicked)
        self.approve_button.clicked.connect(self._approve_clicked)
        return buttons

    def _default_size(self) -> None:
        """Wide enough for the hash beside its fingerprint, tall enough for the table, never
        taller than the screen (the buttons stay in sight)."""
        room = self.screen().availableGeometry()
        hint = self.sizeHint()
        self.resize(min(max(hint.width(), 720), room.width()), min(660, room.height()))

    def _show_raw(self, shown: bool) -> None:
        self.raw_button.setText("Hide the exact JSON" if shown else "Show the exact JSON")
        for widget in self._raw_widgets:
            widget.setVisible(shown)

    def decided_elsewhere(self, text: str) -> None:
        """The request was decided elsewhere, or is gone: say ``text``; only Close is left."""
        self._over = True
        self.ticker.stop()
        for label in (self.hold_label, self.lapse_label):
            label.hide()
        self.banner.setText(text)
        self.banner.show()
        self.reason.setEnabled(False)
        for button in (self.approve_button, self.reject_button, self.scope, self.rule_button):
            button.setEnabled(False)
            button.hide()
        self.close_button.show()
        self.close_button.setDefault(True)  # Enter now only closes
        self.close_button.setFocus()

    def _details_clicked(self) -> None:
        self.details.emit(self.pending.run_id)

    def _reject_clicked(self) -> None:
        self._decide("reject")

    def _approve_clicked(self) -> None:
        scope = "" if self.scope.isHidden() else self.scope.currentData()
        self._decide(f"approve:{scope}" if scope else "approve")

    def open_rule_editor(self) -> QDialog:
        """The rule editor for this request (rule 8), not modal: the dialog stays usable."""
        from app.rule_editor import RuleEditor
        from app.settings import SettingsState

        if self.rule_editor is None:
            assert self.config_path is not None  # the button is offered only then
            editor = RuleEditor(self.pending, SettingsState(self.config_path, self.store), self)
            editor.saved.connect(self._rule_saved)
            self.rule_editor = editor
        self.rule_editor.show()
        self.rule_editor.raise_()
        self.rule_editor.activateWindow()
        return self.rule_editor

    def _rule_saved(self, decision: str, rule_id: str) -> None:
        self.rule_saved.emit(rule_id)
        if decision:  # the new rule decides this request: as once, named in the reason
            self._decide(decision, self.reason.text() or f"by rule {rule_id}, made here")

    def _decide(self, decision: str, reason: str | None = None) -> None:
        if self._over:
            return
        reason = self.reason.text() if reason is None else reason
        self.decided.emit(self.pending.id, self.pending.request_hash, decision, reason)
        self.accept()


def decided_text(approval: ApprovalView | None) -> str:
    """A sentence for a request that is no longer pending (no request text in it)."""
    if approval is None:
        return "This request is no longer in the record."
    if approval.status == "pending":
        return "This request is no longer waiting: its run ended."
    verb = {"approved": "Approved", "consumed": "Approved (and run)", "rejected": "Rejected",
            "expired": "Expired", "superseded": "Replaced by a newer request"}.get(
        approval.status, approval.status.capitalize())  # fmt: skip
    by = f" by {approval.decided_by}" if approval.decided_by else ""
    why = f" ({approval.decided_reason})" if approval.decided_reason else ""
    return f"{verb}{by}{why}. Nothing here can change it now."
