"""A changed tool, or a server's changed instructions, as pinned against now, side by side: what
the operator reads before pinning it again (``RepinDialog``).

One read-only text view holds a table, pinned on the left and now on the right, the description
first and then the input schema, the title and the output schema (or the instructions' text).
A single table rather than two panes: long description lines
wrap, and a wrapped line still stays level with its counterpart, so there is no scrolling to keep
in step. Removed lines have a red background, added lines a green one, and the words that differ
within a replaced line a stronger shade of the same. The shades follow the palette's base
(light or dark) so that the palette's own text colour stays readable on them. A header says what
changed; a reworded description, title or instructions adds the warning that this is how tool
poisoning works, and re-pinning them needs the operator to tick that they read them.

Without the pinned text there is one column, the tool as listed now, with nothing shaded: what
it is being compared with is unknown, so nothing in it is shown as added.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontDatabase,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextLength,
    QTextTable,
    QTextTableCell,
    QTextTableFormat,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from core.proxy.pindiff import (
    DESCRIPTION,
    INSTRUCTIONS,
    OUTPUT_SCHEMA,
    SCHEMA,
    TITLE,
    InstructionsDiff,
    Row,
    Span,
    ToolDiff,
)

PINNED, NOW = "pinned", "now"
HEADINGS = {
    DESCRIPTION: "Description",
    SCHEMA: "Input schema",
    TITLE: "Title",
    OUTPUT_SCHEMA: "Output schema",
    INSTRUCTIONS: "Instructions",
}
WARNINGS = {
    ToolDiff: "A reworded description is how tool poisoning works: read it before pinning it.",
    InstructionsDiff: "A model reads a server's instructions as it reads a tool's description:"
    " read them before pinning them.",
}
POISONING = {
    ToolDiff: "The description or title changed. A model reads a tool's description as"
    " instructions: rewording it after you approved the tool is how tool poisoning works. Read"
    " the new text before you pin it.",
    InstructionsDiff: "The instructions changed. A model reads them as it reads a tool's"
    " description: rewording them after you approved them is how a server poisons its tools."
    " Read the new text before you pin it.",
}
Diff = ToolDiff | InstructionsDiff


@dataclass(frozen=True)
class Shades:
    removed: QColor
    removed_words: QColor
    added: QColor
    added_words: QColor


LIGHT = Shades(QColor("#ffebe9"), QColor("#ffaba8"), QColor("#e6ffec"), QColor("#9be9a8"))
DARK = Shades(QColor("#4a1d20"), QColor("#8c2a2f"), QColor("#173d24"), QColor("#2a7a40"))


class PinDiffView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.header = QLabel()
        self.header.setWordWrap(True)
        bold = QFont(self.header.font())
        bold.setBold(True)
        self.header.setFont(bold)
        layout.addWidget(self.header)
        self.warning = QLabel(WARNINGS[ToolDiff])
        self.warning.setWordWrap(True)
        layout.addWidget(self.warning)
        self.text = QTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.text.document().setDefaultFont(
            QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        )
        layout.addWidget(self.text, 1)
        self.diff: Diff | None = None
        self.columns: tuple[str, ...] = ()
        self._table: QTextTable | None = None
        self.set_diff(None)

    def shades(self) -> Shades:
        dark = self.palette().color(QPalette.ColorRole.Base).lightness() < 128
        return DARK if dark else LIGHT

    def set_diff(self, diff: Diff | None) -> None:
        """Show ``diff`` (None: nothing to show)."""
        self.diff = diff
        self.text.clear()
        self._table = None
        self.columns = ()
        self.header.setText("No changed tool is chosen" if diff is None else diff.summary())
        self.warning.setVisible(diff is not None and diff.reworded)
        if diff is not None:
            self.warning.setText(WARNINGS[type(diff)])
        if diff is not None:
            self._fill(diff)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.diff is not None:
            self.set_diff(self.diff)  # the shades follow the palette

    # --- what the view shows, for tests and for anyone embedding it ------------------------

    def highlighted(self, side: str) -> list[str]:
        """The lines shaded on ``side`` (PINNED: removed, NOW: added), top to bottom."""
        shades = self.shades()
        shade = shades.removed if side == PINNED else shades.added
        return [_text(cell) for cell in self._cells(side) if _background(cell.format()) == shade]

    def marked(self, side: str) -> list[str]:
        """The words shaded within replaced lines on ``side``, top to bottom."""
        shades = self.shades()
        shade = shades.removed_words if side == PINNED else shades.added_words
        found = []
        for cell in self._cells(side):
            block = cell.firstCursorPosition().block()
            for each in block.textFormats():
                if _background(each.format) == shade:
                    found.append(block.text()[each.start : each.start + each.length])
        return found

    def _cells(self, side: str) -> list[QTextTableCell]:
        if self._table is None or side not in self.columns:
            return []
        column = self.columns.index(side)
        return [self._table.cellAt(r, column) for r in range(self._table.rows())]

    # --- filling the table -------------------------------------------------------------------

    def _fill(self, diff: Diff) -> None:
        self.columns = (PINNED, NOW) if diff.kept else (NOW,)
        rows = diff.rows()
        parts = list(dict.fromkeys(row.part for row in rows))
        table_format = QTextTableFormat()
        table_format.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
        share = 100 / len(self.columns)
        table_format.setColumnWidthConstraints(
            [QTextLength(QTextLength.Type.PercentageLength, share)] * len(self.columns)
        )
        table_format.setBorderStyle(QTextTableFormat.BorderStyle.BorderStyle_None)
        table_format.setCellSpacing(0)
        table_format.setCellPadding(2)
        cursor = QTextCursor(self.text.document())
        table = cursor.insertTable(1 + len(parts) + len(rows), len(self.columns), table_format)
        self._table = table
        heads = {
            PINNED: "Pinned",
            NOW: "Now" if diff.kept else "Now (the pinned text was not kept)",
        }
        for column, side in enumerate(self.columns):
            _write(table.cellAt(0, column), heads[side], bold=True)
        shades = self.shades()
        at = 1
        for part in parts:
            table.mergeCells(at, 0, 1, len(self.columns))
            _write(table.cellAt(at, 0), HEADINGS.get(part, part), bold=True)
            at += 1
            for row in (r for r in rows if r.part == part):
                self._write_row(table, at, row, shades, kept=diff.kept)
                at += 1
        self.text.moveCursor(QTextCursor.MoveOperation.Start)

    def _write_row(
        self, table: QTextTable, at: int, row: Row, shades: Shades, *, kept: bool
    ) -> None:
        sides = [
            (PINNED, row.old, row.old_spans, shades.removed, shades.removed_words),
            (NOW, row.new, row.new_spans, shades.added, shades.added_words),
        ]
        for side, line, spans, line_shade, word_shade in sides:
            if side not in self.columns or line is None:
                continue
            cell = table.cellAt(at, self.columns.index(side))
            if kept and row.tag != "equal":
                cell_format = cell.format()
                cell_format.setBackground(QBrush(line_shade))
                cell.setFormat(cell_format)
            _write(cell, line, spans=spans, shade=word_shade)


class RepinDialog(QDialog):
    """What changed since a tool or a server's instructions were pinned, side by side;
    re-pinning a reworded text needs the operator to tick that they read it."""

    def __init__(self, diff: Diff, parent: QWidget | None, problem: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle(
            f"What changed in {diff.name}"
            + ("'s instructions" if isinstance(diff, InstructionsDiff) else "")
        )
        self.resize(980, 620)
        layout = QVBoxLayout(self)
        self.problem = QLabel(problem)
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020;")
        self.problem.setVisible(bool(problem))
        layout.addWidget(self.problem)
        self.view = PinDiffView()
        self.view.set_diff(diff)
        self.view.warning.setVisible(False)  # said once, below, where it is acknowledged
        layout.addWidget(self.view, 1)
        # A text that cannot be compared may have been reworded: acknowledge it too.
        self.needs_acknowledgement = diff.reworded or not diff.kept
        self.acknowledge = QCheckBox(
            (POISONING[type(diff)] if diff.reworded else
             "The pinned text cannot be compared, so it may have been reworded.")
            + " I read it; pin the new text."
        )  # fmt: skip
        self.acknowledge.setVisible(self.needs_acknowledgement)
        layout.addWidget(self.acknowledge)
        self.buttons = QDialogButtonBox()
        self.repin = self.buttons.addButton("Re-pin", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.repin.setEnabled(not self.needs_acknowledgement)
        self.acknowledge.toggled.connect(self.repin.setEnabled)


def _write(
    cell: QTextTableCell,
    text: str,
    *,
    bold: bool = False,
    spans: tuple[Span, ...] = (),
    shade: QColor | None = None,
) -> None:
    cursor = cell.firstCursorPosition()
    plain = QTextCharFormat()
    if bold:
        plain.setFontWeight(QFont.Weight.Bold)
    marked = QTextCharFormat(plain)
    if shade is not None:
        marked.setBackground(QBrush(shade))
    done = 0
    for start, end in spans:
        cursor.insertText(text[done:start], plain)
        cursor.insertText(text[start:end], marked)
        done = end
    cursor.insertText(text[done:], plain)


def _text(cell: QTextTableCell) -> str:
    cursor = cell.firstCursorPosition()
    cursor.setPosition(cell.lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
    return cursor.selectedText()


def _background(text_format: QTextCharFormat) -> QColor | None:
    brush = text_format.background()
    return brush.color() if brush.style() != Qt.BrushStyle.NoBrush else None
