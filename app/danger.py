"""Danger you can see: one colour, one icon and the words of each side-effect class, the same in
the tray icon, the notification, the dialog and the history (decision 0051).

Rules:

1. Each class has its own colour and its own icon (``resources/icons/class-*.svg``): read-only
   blue with an eye, changes this computer amber with a pencil, changes things elsewhere purple
   with an arrow leaving a box, destructive red with a cross; a tool with no class grey with a
   question mark. The colour is never the only signal: the icon's glyph and the class's words
   are always beside it.
2. A request that "may have run" (``MAY_HAVE_RUN``: a duplicate of a call that already ran, or
   one cut off with its outcome unknown) has a look of its own above every class: dark red,
   a warning triangle instead of a shield, and bold. Destructive is bold too.
3. Every colour carries white text and glyphs with a contrast of at least 4.5:1 (WCAG AA for
   text), so the band and the icons read the same on a light or a dark desktop.
4. The tray shows the highest look waiting, in the order of ``RANK``: may have run, then
   destructive, then not classified, then changes elsewhere, this computer, read-only. Deciding
   the highest request brings the icon down to the next one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPixmap

from app.words import class_words
from core.tools import SideEffect

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"
MAY_HAVE_RUN = frozenset({"duplicate", "interrupted_side_effect"})  # approval kinds
MAY_HAVE_RUN_OUTCOMES = frozenset({"interrupted", "not repeated"})  # history outcomes
WHITE = "#ffffff"
MAY_HAVE_RUN_WORDS = "May have run already"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Look:
    """How a class (or "may have run") is shown."""

    name: str  # a class's name, ``unknown``, or ``may-have-run``
    words: str
    colour: str  # the fill behind white text and glyphs
    icon_file: str
    bold: bool = False

    @property
    def path(self) -> Path:
        return ICONS / self.icon_file

    def icon(self) -> QIcon:
        return _icon(str(self.path))

    def pixmap(self, size: int) -> QPixmap:
        return self.icon().pixmap(size, size)

    def qcolor(self) -> QColor:
        return QColor(self.colour)


LOOKS: dict[str, Look] = {
    SideEffect.READ_ONLY: Look(SideEffect.READ_ONLY, class_words(SideEffect.READ_ONLY),
                               "#175cd3", "class-read_only.svg"),
    SideEffect.LOCAL_MUTATION: Look(SideEffect.LOCAL_MUTATION,
                                    class_words(SideEffect.LOCAL_MUTATION), "#b54708",
                                    "class-local_mutation.svg"),
    SideEffect.REMOTE_MUTATION: Look(SideEffect.REMOTE_MUTATION,
                                     class_words(SideEffect.REMOTE_MUTATION), "#6941c6",
                                     "class-remote_mutation.svg"),
    SideEffect.DESTRUCTIVE: Look(SideEffect.DESTRUCTIVE, class_words(SideEffect.DESTRUCTIVE),
                                 "#b42318", "class-destructive.svg", bold=True),
    UNKNOWN: Look(UNKNOWN, class_words(None), "#475467", "class-unknown.svg"),
}  # fmt: skip
MAY_HAVE_RUN_LOOK = Look("may-have-run", MAY_HAVE_RUN_WORDS, "#7a271a", "may-have-run.svg",
                         bold=True)  # fmt: skip
RANK = (
    SideEffect.READ_ONLY,
    SideEffect.LOCAL_MUTATION,
    SideEffect.REMOTE_MUTATION,
    UNKNOWN,
    SideEffect.DESTRUCTIVE,
    MAY_HAVE_RUN_LOOK.name,
)


def class_look(side_effect: str | None) -> Look:
    """The look of a class; an unknown or missing class looks "not classified"."""
    return LOOKS.get(side_effect or UNKNOWN, LOOKS[UNKNOWN])


def look(side_effect: str | None, kind: str = "") -> Look:
    """A request's look: "may have run" above its class (rule 2)."""
    return MAY_HAVE_RUN_LOOK if kind in MAY_HAVE_RUN else class_look(side_effect)


def highest(requests: Iterable[tuple[str | None, str]]) -> Look | None:
    """The highest look among ``(side_effect, kind)`` pairs (rule 4), None for none."""
    looks = [look(side_effect, kind) for side_effect, kind in requests]
    return max(looks, key=lambda found: RANK.index(found.name), default=None)


def cell(role: int, shown: Look) -> Any:
    """A table cell in ``shown``'s look: its icon, white text on its colour, bold where the look
    is; None for any other role (the model's own answer stands)."""
    if role == Qt.ItemDataRole.DecorationRole:
        return shown.icon()
    if role == Qt.ItemDataRole.BackgroundRole:
        return shown.qcolor()
    if role == Qt.ItemDataRole.ForegroundRole:
        return QColor(WHITE)
    if role == Qt.ItemDataRole.FontRole and shown.bold:
        font = QFont()
        font.setBold(True)
        return font
    return None


@cache
def _icon(path: str) -> QIcon:
    return QIcon(path)  # read once: a table asks for it on every paint


def contrast(foreground: str, background: str) -> float:
    """The WCAG contrast ratio of two ``#rrggbb`` colours (rule 3)."""

    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)
