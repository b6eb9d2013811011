"""What changed in a tool since the operator pinned it: the description and the input schema,
as a unified diff and side by side. Pure code.

Rules:

1. The description is compared as decoded text and the schema as its normal form (pretty-printed
   with sorted keys and an indent of 2), so a change of escapes, white space or key order alone
   changes neither. When the pin changed but neither did, the diff says exactly that
   (``formatting_only``) rather than showing nothing.
2. The description is split into lines at line feeds only; the schema at its normal form's lines.
3. Characters a reader cannot see, or that a terminal acts on, are shown as ``⟨U+XXXX⟩`` and
   long runs of spaces as ``⟨N spaces⟩`` (``core.marks``, the rule every prompt uses). A
   reworded description cannot hide behind an escape sequence, a right-to-left override or a
   zero-width character.
4. Without the pinned text (``old=None``: pinned before Signoff kept texts, or the store was
   cleared) nothing is compared: the diff says so, holds only the tool as listed now, and has no
   unified text; it never presents the whole tool as an addition.
5. Within a replaced line, the spans that differ are found word by word (a word or a run of
   punctuation, with the white space after it). A line of more than ``MAX_TOKENS`` words is
   marked whole rather than compared.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

from core.marks import visible
from core.proxy.pins import ListedTool
from core.proxy.pinstore import PinnedTool

DESCRIPTION, SCHEMA = "description", "input schema"
MAX_TOKENS = 2000

_TOKEN = re.compile(r"\w+\s*|[^\w\s]+\s*|\s+")

Span = tuple[int, int]  # [start, end) of a line's characters


@dataclass(frozen=True)
class Row:
    """One line of the side-by-side view: the pinned line, the line now, or both."""

    part: str  # DESCRIPTION or SCHEMA
    tag: str  # equal / replace / delete / insert
    old: str | None
    new: str | None
    old_spans: tuple[Span, ...] = ()  # what differs within a replaced line
    new_spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class ToolDiff:
    """A tool pinned (``old_*``, None when its text was not kept) against the tool now."""

    name: str
    old_pin: str | None
    new_pin: str
    old_description: str | None
    new_description: str
    old_schema: str | None
    new_schema: str

    @property
    def kept(self) -> bool:
        return self.old_pin is not None

    @property
    def description_changed(self) -> bool:
        return self.kept and self.old_description != self.new_description

    @property
    def schema_changed(self) -> bool:
        return self.kept and self.old_schema != self.new_schema

    @property
    def formatting_only(self) -> bool:
        """The pin changed, yet the description and the schema read the same."""
        return (
            self.kept
            and self.old_pin != self.new_pin
            and not (self.description_changed or self.schema_changed)
        )

    def summary(self) -> str:
        """What changed, in one sentence for the operator."""
        if not self.kept:
            return "The pinned text was not kept; only the tool as listed now is shown"
        if self.description_changed and self.schema_changed:
            return "The description was reworded and the input schema changed"
        if self.description_changed:
            return "The description was reworded"
        if self.schema_changed:
            return "The input schema changed"
        if self.formatting_only:
            return "Only the JSON formatting or key order changed; the tool reads as pinned"
        return "Nothing changed since it was pinned"

    def unified(self) -> str:
        """A unified diff of the description and the schema, labelled pinned and now ("" when
        nothing reads differently or the pinned text was not kept)."""
        lines: list[str] = []
        for part, old, new in self._parts():
            if old is not None:
                lines.extend(
                    difflib.unified_diff(old, new, f"pinned {part}", f"now {part}", lineterm="")
                )
        return "\n".join(lines)

    def rows(self) -> list[Row]:
        """The description's lines, then the schema's, aligned pinned against now. Without the
        pinned text every row is an insertion with nothing on the pinned side."""
        rows: list[Row] = []
        for part, old, new in self._parts():
            if old is None:
                rows.extend(Row(part, "insert", None, line) for line in new)
            else:
                rows.extend(_rows(part, old, new))
        return rows

    def _parts(self) -> list[tuple[str, list[str] | None, list[str]]]:
        return [
            (part, None if old is None else old.split("\n"), new.split("\n"))
            for part, old, new in (
                (DESCRIPTION, self.old_description, self.new_description),
                (SCHEMA, self.old_schema, self.new_schema),
            )
        ]


def diff(old: PinnedTool | None, new: ListedTool) -> ToolDiff:
    """``new`` against ``old``, the tool as pinned (None: its text was not kept)."""
    return ToolDiff(
        name=new.name,
        old_pin=None if old is None else old.pin,
        new_pin=new.pin,
        old_description=None if old is None else visible(old.description),
        new_description=visible(new.description),
        old_schema=None if old is None else schema_text(old.input_schema),
        new_schema=schema_text(new.input_schema),
    )


def schema_text(schema: dict[str, Any]) -> str:
    """The schema's normal form: sorted keys, an indent of 2, hidden characters shown."""
    return visible(json.dumps(schema, sort_keys=True, indent=2, ensure_ascii=False))


def _rows(part: str, old: list[str], new: list[str]) -> list[Row]:
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(None, old, new)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(Row(part, "equal", line, line) for line in old[i1:i2])
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for a, b in zip(old[i1 : i1 + paired], new[j1 : j1 + paired], strict=True):
            old_spans, new_spans = _spans(a, b)
            rows.append(Row(part, "replace", a, b, old_spans, new_spans))
        rows.extend(Row(part, "delete", line, None) for line in old[i1 + paired : i2])
        rows.extend(Row(part, "insert", None, line) for line in new[j1 + paired : j2])
    return rows


def _spans(old: str, new: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
    """Where two lines differ, word by word (rule 5)."""
    a = [m.span() for m in _TOKEN.finditer(old)]
    b = [m.span() for m in _TOKEN.finditer(new)]
    if len(a) > MAX_TOKENS or len(b) > MAX_TOKENS:
        return ((0, len(old)),) if old else (), ((0, len(new)),) if new else ()
    matcher = difflib.SequenceMatcher(
        None, [old[s:e] for s, e in a], [new[s:e] for s, e in b], autojunk=False
    )
    old_spans: list[Span] = []
    new_spans: list[Span] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            old_spans.append((a[i1][0], a[i2 - 1][1]))
        if j2 > j1:
            new_spans.append((b[j1][0], b[j2 - 1][1]))
    return tuple(old_spans), tuple(new_spans)
