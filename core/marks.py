"""Text a reader can trust: every character that cannot be seen, or that changes how the text
around it is read, shown as a mark. Pure code.

Rules:

1. Control and format characters (bidi overrides and isolates, zero-width characters), lone
   surrogates, line and paragraph separators, the private-use and unassigned code points,
   Unicode's default-ignorable code points (variation selectors, Hangul fillers, tag
   characters), every space but U+0020, and the braille blank are shown as ``⟨U+XXXX⟩``;
   tab and line feed are kept unless ``lines`` is false. ``⟨`` itself is shown as
   ``⟨U+27E8⟩``, so no text can pass for a mark. A combining mark after the second on one
   character is shown as a mark too, so no text can be drawn over its neighbours.
2. A run of ``SPACE_RUN`` or more spaces is shown as ``⟨N spaces⟩``: the tail after it is never
   pushed out of sight.
3. ``visible`` never loses anything: ``marked`` tells whether it had to show a mark.
4. ``reorders`` tells whether text holds characters that a bidi layout draws right to left
   (strong right-to-left letters, Arabic digits): their order on the screen is not the order
   sent, and no mark can show that, so a prompt says so instead.
"""

from __future__ import annotations

import re
import unicodedata

MARK = "⟨"
SPACE_RUN = 8
MOST_COMBINING = 2
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_COMBINING = frozenset({"Mn", "Me"})
# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties) outside the categories above,
# and the braille blank, which draws nothing.
_IGNORABLE = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2800, 0x2800),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
_SPACES = re.compile(f" {{{SPACE_RUN},}}")
_PLAIN = re.compile(r"[\x20-\x7e]*")  # printable ASCII: nothing here needs a second look


def _hidden(c: str, lines: bool) -> bool:
    if c == MARK:
        return True
    if c in "\n\t":
        return not lines
    if c == " ":
        return False
    if unicodedata.category(c) in _HIDDEN:
        return True
    code = ord(c)
    return any(low <= code <= high for low, high in _IGNORABLE)


def _marked(text: str, lines: bool) -> str:
    shown: list[str] = []
    combining = 0
    for c in text:
        combining = combining + 1 if unicodedata.category(c) in _COMBINING else 0
        hidden = _hidden(c, lines) or combining > MOST_COMBINING
        shown.append(f"⟨U+{ord(c):04X}⟩" if hidden else c)
    return "".join(shown)


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` with every character a reader cannot see shown as a mark (rules 1 and 2)."""
    if _PLAIN.fullmatch(text) and " " * SPACE_RUN not in text:
        return text
    return _SPACES.sub(lambda m: f"⟨{len(m[0])} spaces⟩", _marked(text, lines))


def marked(text: str, *, lines: bool = True) -> bool:
    """Whether ``visible(text)`` differs from ``text``: something in it had to be marked."""
    return visible(text, lines=lines) != text


def reorders(text: str) -> bool:
    """Whether a bidi layout would draw some of ``text`` right to left (rule 4)."""
    return not text.isascii() and any(
        unicodedata.bidirectional(c) in ("R", "AL", "AN") for c in text
    )
