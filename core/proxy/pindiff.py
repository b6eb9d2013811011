"""What changed in a tool, or in a server's instructions, since the operator pinned them: the
description, the input schema, the title and the output schema of a tool, or the text of the
instructions, as a unified diff and side by side. Pure code.

Rules:

1. The description, the title and the instructions are compared as decoded text, the schemas as
   their normal form (pretty-printed with sorted keys and an indent of 2), so a change of
   escapes, white space or key order alone changes none of them. When the pin changed but
   nothing reads differently, the diff says exactly that (``formatting_only``) rather than
   showing nothing.
2. Texts are split into lines at line feeds only; the schemas at their normal form's lines. A
   title or an output schema a side does not have reads as empty; they are shown only when
   either side has one, so a tool without them reads as it always did.
3. Characters a reader cannot see, or that a terminal acts on, are shown as ``⟨U+XXXX⟩`` and
   long runs of spaces as ``⟨N spaces⟩`` (``core.marks``, the rule every prompt uses). A
   reworded text cannot hide behind an escape sequence, a right-to-left override or a
   zero-width character.
4. Without the pinned text (``old=None``: pinned before Signoff kept texts, or the store was
   cleared) nothing is compared: the diff says so, holds only what is listed now, and has no
   unified text; it never presents the whole of it as an addition.
5. Within a replaced line, the spans that differ are found word by word (a word or a run of
   punctuation, with the white space after it). A line of more than ``MAX_TOKENS`` words is
   marked whole rather than compared.
6. ``reworded`` says that a text a model reads as words (a description, a title, instructions)
   reads differently: the change tool poisoning makes, which the operator must acknowledge.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

from core.marks import visible
from core.proxy.instructions import pin_of
from core.proxy.pins import ListedTool
from core.proxy.pinstore import PinnedTool

DESCRIPTION, SCHEMA = "description", "input schema"
TITLE, OUTPUT_SCHEMA = "title", "output schema"
INSTRUCTIONS = "instructions"
MAX_TOKENS = 2000

_TOKEN = re.compile(r"\w+\s*|[^\w\s]+\s*|\s+")

Span = tuple[int, int]  # [start, end) of a line's characters
Part = tuple[str, str | None, str]  # (part, pinned text or None when not kept, text now)


@dataclass(frozen=True)
class Row:
    """One line of the side-by-side view: the pinned line, the line now, or both."""

    part: str  # DESCRIPTION, SCHEMA, TITLE, OUTPUT_SCHEMA or INSTRUCTIONS
    tag: str  # equal / replace / delete / insert
    old: str | None
    new: str | None
    old_spans: tuple[Span, ...] = ()  # what differs within a replaced line
    new_spans: tuple[Span, ...] = ()


class _Diff:
    """What a tool's and the instructions' diffs share: their parts, pinned against now."""

    old_pin: str | None

    def parts(self) -> list[Part]:
        raise NotImplementedError

    @property
    def kept(self) -> bool:
        return self.old_pin is not None

    def unified(self) -> str:
        """A unified diff of each part, labelled pinned and now ("" when nothing reads
        differently or the pinned text was not kept)."""
        lines: list[str] = []
        for part, old, new in self.parts():
            if old is not None:
                old_lines, new_lines = old.split("\n"), new.split("\n")
                labels = (f"pinned {part}", f"now {part}")
                lines.extend(difflib.unified_diff(old_lines, new_lines, *labels, lineterm=""))
        return "\n".join(lines)

    def rows(self) -> list[Row]:
        """Each part's lines in turn, aligned pinned against now. Without the pinned text every
        row is an insertion with nothing on the pinned side."""
        rows: list[Row] = []
        for part, old, new in self.parts():
            if old is None:
                rows.extend(Row(part, "insert", None, line) for line in new.split("\n"))
            else:
                rows.extend(_rows(part, old.split("\n"), new.split("\n")))
        return rows


@dataclass(frozen=True)
class ToolDiff(_Diff):
    """A tool pinned (``old_*``, None when its text was not kept) against the tool now. A title
    or an output schema it does not have is "" on its side."""

    name: str
    old_pin: str | None
    new_pin: str
    old_description: str | None
    new_description: str
    old_schema: str | None
    new_schema: str
    old_title: str | None = None
    new_title: str = ""
    old_output_schema: str | None = None
    new_output_schema: str = ""

    @property
    def description_changed(self) -> bool:
        return self.kept and self.old_description != self.new_description

    @property
    def schema_changed(self) -> bool:
        return self.kept and self.old_schema != self.new_schema

    @property
    def title_changed(self) -> bool:
        return self.kept and self.old_title != self.new_title

    @property
    def output_schema_changed(self) -> bool:
        return self.kept and self.old_output_schema != self.new_output_schema

    @property
    def reworded(self) -> bool:
        """The description or the title reads differently (rule 6)."""
        return self.description_changed or self.title_changed

    @property
    def formatting_only(self) -> bool:
        """The pin changed, yet nothing pinned reads differently."""
        changed = (self.description_changed, self.schema_changed, self.title_changed,
                   self.output_schema_changed)  # fmt: skip
        return self.kept and self.old_pin != self.new_pin and not any(changed)

    def summary(self) -> str:
        """What changed, in one sentence for the operator."""
        if not self.kept:
            return "The pinned text was not kept; only the tool as listed now is shown"
        said = [
            said
            for changed, said in (
                (self.description_changed, "the description was reworded"),
                (self.schema_changed, "the input schema changed"),
                (self.title_changed, "the title changed"),
                (self.output_schema_changed, "the output schema changed"),
            )
            if changed
        ]
        if said:
            text = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
            return text[0].upper() + text[1:]
        if self.formatting_only:
            return "Only the JSON formatting or key order changed; the tool reads as pinned"
        return "Nothing changed since it was pinned"

    def parts(self) -> list[Part]:
        parts: list[Part] = [
            (DESCRIPTION, self.old_description, self.new_description),
            (SCHEMA, self.old_schema, self.new_schema),
        ]
        for part, old, new in (
            (TITLE, self.old_title, self.new_title),
            (OUTPUT_SCHEMA, self.old_output_schema, self.new_output_schema),
        ):
            if old or new:  # rule 2
                parts.append((part, old, new))
        return parts


@dataclass(frozen=True)
class InstructionsDiff(_Diff):
    """A server's instructions as pinned (``old_text``, None when not kept) against now."""

    server: str
    old_pin: str | None
    new_pin: str
    old_text: str | None
    new_text: str

    @property
    def name(self) -> str:
        return self.server

    @property
    def reworded(self) -> bool:
        return self.kept and self.old_text != self.new_text

    def summary(self) -> str:
        if not self.kept:
            return "The pinned instructions were not kept; only the instructions now are shown"
        if self.reworded:
            return "The instructions were reworded"
        if self.old_pin != self.new_pin:
            return "The instructions changed only in characters that read the same"
        return "Nothing changed since they were pinned"

    def parts(self) -> list[Part]:
        return [(INSTRUCTIONS, self.old_text, self.new_text)]


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
        old_title=None if old is None else visible(old.title or ""),
        new_title=visible(new.title or ""),
        old_output_schema=None if old is None else _optional_schema(old.output_schema),
        new_output_schema=_optional_schema(new.output_schema),
    )


def instructions_diff(server: str, old: str | None, new: str) -> InstructionsDiff:
    """Server ``server``'s instructions ``new`` against ``old``, the text as pinned (None: it
    was not kept)."""
    return InstructionsDiff(
        server=server,
        old_pin=None if old is None else pin_of(old),
        new_pin=pin_of(new),
        old_text=None if old is None else visible(old),
        new_text=visible(new),
    )


def _optional_schema(schema: dict[str, Any] | None) -> str:
    return "" if schema is None else schema_text(schema)


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
