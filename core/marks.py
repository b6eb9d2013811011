"""Text a reader can trust: every character that cannot be seen, or that changes how the text
around it is read, shown as a mark. Pure code.

Rules:

1. Control and format characters (bidi overrides and isolates, zero-width characters), lone
   surrogates, line and paragraph separators, and the private-use and unassigned code points
   are shown as ``⟨U+XXXX⟩``; tab and line feed are kept unless ``lines`` is false. ``⟨`` itself
   is shown as ``⟨U+27E8⟩``, so no text can pass for a mark.
2. A run of ``SPACE_RUN`` or more spaces is shown as ``⟨N spaces⟩``: the tail after it is never
   pushed out of sight.
3. ``visible`` never loses anything: ``marked`` tells whether it had to show a mark.
"""

from __future__ import annotations

import re
import unicodedata

MARK = "⟨"
SPACE_RUN = 8
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SPACES = re.compile(f" {{{SPACE_RUN},}}")


def _hidden(c: str, lines: bool) -> bool:
    if c == MARK:
        return True
    if c in "\n\t":
        return not lines
    return unicodedata.category(c) in _HIDDEN


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` with every character a reader cannot see shown as a mark (rules 1 and 2)."""
    if text.isprintable() and MARK not in text and " " * SPACE_RUN not in text:
        return text
    shown = "".join(f"⟨U+{ord(c):04X}⟩" if _hidden(c, lines) else c for c in text)
    return _SPACES.sub(lambda m: f"⟨{len(m[0])} spaces⟩", shown)


def marked(text: str, *, lines: bool = True) -> bool:
    """Whether ``visible(text)`` differs from ``text``: something in it had to be marked."""
    return visible(text, lines=lines) != text
