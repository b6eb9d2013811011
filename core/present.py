"""How a pending request is put before the operator, so that what is shown is what will run.
Pure code: the notification, the dialog and ``signoff pending`` all show requests through it.

Rules:

1. Nothing the model wrote is markup. ``markup_escape`` escapes ``& < > ' "`` for a sink that
   parses markup (a notification daemon that advertises ``body-markup``); a sink that takes
   plain text gets the text as it is. Deciding which is the sink's job, never skipped.
2. One line per top-level argument, ``key: value``, in the tool schema's property order:
   the ``required`` keys in their listed order, then the schema's other properties in its
   order, then keys the schema does not name, sorted.
3. A value is shown as its canonical JSON text (a string in quotes, so ``"1"`` and ``1``
   differ, ``"false"`` and ``false`` too) with ``core.marks``' marks; in one line, newlines are
   JSON escapes, so no argument makes a line of its own. The dialog shows a string in quotes
   with its lines kept. A key that is not a plain name is shown as JSON too.
4. A notification line fits ``LINE_WIDTH`` characters: a longer value is cut and says how
   much is missing, ``(+N characters)``; at most ``MAX_LINES`` arguments are listed, and the
   rest are counted. A view is *whole* when nothing was cut or left out, nothing had to be
   marked, nothing is drawn right to left (``core.marks.reorders``: its order on the screen is
   not the order sent) and no path climbs (rule 5); only a whole view may offer Approve
   outside the dialog.
5. A string that reads as a path (``~`` at its start, or a ``.``/``..`` segment between ``/``
   or ``\\``; a leading ``scheme://`` is left out) shows where it resolves (``~`` expanded,
   segments folded, and for an absolute path its symbolic links followed as the rules read it:
   core/policy/meaning.py) when that differs from what was written; a relative path that
   climbs above its start is said to. ``core.policy.own_files`` reads paths the same way
   (``expand``).
6. The values the operator fixed for the tool (sent with every call, hidden from the model, not
   part of the model's arguments) are shown after the arguments, each its own line marked
   ``(set by Signoff)``, under the same rules: exact JSON, marks, cut and counted alike.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from core import canonical, marks
from core.errors import SignoffError
from core.policy import meaning

LINE_WIDTH = 56
SET_BY_SIGNOFF = "set by Signoff"
MAX_LINES = 8
KEY_WIDTH = 24
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_MARKUP = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#39;", '"': "&quot;"})

CLASS_WORDS = {
    "read_only": "reads, changes nothing",
    "local_mutation": "changes something on this computer",
    "remote_mutation": "changes something elsewhere (sends, pushes, posts)",
    "destructive": "deletes or overwrites, cannot be undone",
}


def markup_escape(text: str) -> str:
    """``text`` for a sink that parses Pango or HTML markup: every character shows as itself."""
    return text.translate(_MARKUP)


def name(text: str) -> str:
    """A server's or tool's name for a title, a menu or a balloon, where it may be read as
    markup or plain: marked as ``core.marks`` marks, and ``& < > ' "`` marked too."""
    shown = marks.visible(text, lines=False)
    return "".join(f"⟨U+{ord(c):04X}⟩" if c in "&<>'\"" else c for c in shown)


def fingerprint(request_hash: str) -> str:
    """The request hash's first 16 hex digits in groups of four: what a notification shows."""
    h = request_hash
    return f"{h[:4]} {h[4:8]} {h[8:12]} {h[12:16]}"


@dataclass(frozen=True)
class Argument:
    """One top-level argument as shown."""

    key: str  # shown (rule 3)
    value: str  # the whole value, shown (JSON text with marks), on one line
    text: str | None  # a string in quotes with marks, newlines kept (the dialog); else None
    marked: bool  # the key or the value had to be marked
    reorders: bool  # drawn partly right to left
    resolves: str | None  # where a path resolves, when that differs (rule 5)
    climbs: bool  # a relative path that goes above its start
    fixed: bool = False  # a value the operator fixed, set by Signoff (rule 6)


@dataclass(frozen=True)
class Line:
    """One argument fitted to a notification line."""

    text: str
    cut: bool


@dataclass(frozen=True)
class RequestView:
    """Every argument of a request, in order, the values set by Signoff after them (rule 6),
    and the notification lines made of them."""

    arguments: tuple[Argument, ...]
    unreadable: bool  # the arguments were not a JSON object: shown raw, never whole
    fixed: tuple[Argument, ...] = ()  # set by Signoff, never among the model's arguments

    @property
    def sent(self) -> tuple[Argument, ...]:
        """Everything the server receives: the model's arguments, then the fixed values."""
        return self.arguments + self.fixed

    @property
    def marked(self) -> bool:
        return self.unreadable or any(a.marked for a in self.sent)

    @property
    def climbs(self) -> bool:
        return any(a.climbs for a in self.sent)

    @property
    def reorders(self) -> bool:
        return any(a.reorders for a in self.sent)

    def lines(self, width: int = LINE_WIDTH, most: int = MAX_LINES) -> list[Line]:
        sent = self.sent
        shown = [_fit(a, width) for a in sent[:most]]
        left = len(sent) - len(shown)
        if left:
            shown.append(Line(f"(+{left} more arguments)", cut=True))
        if not sent:
            shown.append(Line("(no arguments)", cut=False))
        return shown

    def whole(self, width: int = LINE_WIDTH, most: int = MAX_LINES) -> bool:
        """Every argument shown whole in the notification, nothing marked, no path that climbs
        above its start (rule 4)."""
        if self.marked or self.climbs or self.reorders:
            return False
        return not any(line.cut for line in self.lines(width, most))


def view(arguments: str, schema: dict[str, Any] | None = None, fixed: str = "{}") -> RequestView:
    """The request's canonical ``arguments`` text as shown, keys in ``schema``'s order; then
    the tool's ``fixed`` values (canonical JSON of an object), set by Signoff (rule 6)."""
    shown, whole = _object(arguments, schema, "(arguments)", fixed=False)
    set_by_signoff, fixed_whole = _object(fixed, schema, "(fixed values)", fixed=True)
    return RequestView(shown, not (whole and fixed_whole), set_by_signoff)


def _object(
    text: str, schema: dict[str, Any] | None, label: str, *, fixed: bool
) -> tuple[tuple[Argument, ...], bool]:
    """The members of the JSON object ``text`` as shown, and whether it read as an object."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raw = marks.visible(text, lines=False)
        return (Argument(label, raw, None, True, marks.reorders(text), None, False, fixed),), False
    return tuple(_argument(k, value[k], fixed) for k in order(value, schema)), True


def order(value: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
    """Rule 2: required keys, then the schema's other properties, then the rest sorted."""
    schema = schema if isinstance(schema, dict) else {}
    required = schema.get("required")
    properties = schema.get("properties")
    named = [k for k in required if isinstance(k, str)] if isinstance(required, list) else []
    if isinstance(properties, dict):
        named += [k for k in properties if k not in named]
    first = [k for k in named if k in value]
    return first + sorted(k for k in value if k not in set(first))


def expand(path: str) -> str:
    """``path`` as rule 5 reads it, before folding: ``\\`` as ``/``, a leading ``~`` expanded."""
    path = path.replace("\\", "/")
    return os.path.expanduser(path) if path.startswith("~") else path


def resolves(text: str) -> tuple[str | None, bool]:
    """Where a path-like ``text`` resolves when that differs, and whether it climbs (rule 5)."""
    if len(text) > 4096:
        return None, False
    written = text
    path = _SCHEME.sub("", text, count=1)
    segments = re.split(r"[/\\]", path)
    if not (path.startswith("~") or any(s in (".", "..") for s in segments)):
        return None, False
    folded = posixpath.normpath(expand(path))
    climbs = not folded.startswith("/") and (folded == ".." or folded.startswith("../"))
    if path != written:  # a URL: where it points is the server's business; climbing is not
        return None, climbs
    if folded.startswith("/"):  # as the rules read it: links followed (decision 0064)
        meant = meaning.path(folded, meaning.Where(None)).meanings
        folded = meant[0] if meant else folded
    return (folded if folded != written else None), climbs


def _argument(key: str, value: Any, fixed: bool = False) -> Argument:
    quoted = key if _PLAIN_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    shown_key = marks.visible(quoted, lines=False)
    try:
        whole = canonical.dumps_text(value)
        exact = True
    except SignoffError:  # never in a recorded request: those are canonical already
        whole, exact = json.dumps(value, ensure_ascii=False, separators=(",", ":")), False
    shown = marks.visible(whole, lines=False)
    text = f'"{marks.visible(value)}"' if isinstance(value, str) else None
    where, climbs = resolves(value) if isinstance(value, str) else (None, False)
    marked = shown != whole or shown_key != quoted or (text is not None and text[1:-1] != value)
    marked = marked or not exact
    reorders = marks.reorders(key) or marks.reorders(whole)
    return Argument(shown_key, shown, text, marked, reorders, where, climbs, fixed)


def _fit(argument: Argument, width: int) -> Line:
    key, cut_key = argument.key, len(argument.key) > KEY_WIDTH
    if cut_key:
        key = f"{key[: KEY_WIDTH - 1]}…"
    head = f"{key}: "
    tail = f" ({SET_BY_SIGNOFF})" if argument.fixed else ""
    room = width - len(head) - len(tail)
    if len(argument.value) <= room:
        return Line(head + argument.value + tail, cut=cut_key)
    longest = len(f"… (+{len(argument.value)} characters)")  # the count only gets smaller
    keep = max(room - longest, 8)
    missing = len(argument.value) - keep
    return Line(f"{head}{argument.value[:keep]}… (+{missing} characters){tail}", cut=True)
