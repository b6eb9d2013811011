"""The conditions the rule editor offers on one argument (app/rule_editor.py rule 2), each
made with core/policy/rules.py's shorthands (no condition language of the editor's own), what each
opens with for the request's value, and how each is said in words. No Qt.

Rules:

1. A string offers "any value", "equals this value", "is in the folder" and "matches the
   pattern"; a number (not a boolean) "any value", "equals this value" and "at most";
   anything else "any value" and "equals this value".
2. The folder opens at the value's parent when the value is an absolute path (else empty);
   the pattern at the value escaped and anchored (``^…$``: this value only, since a JSON
   Schema pattern searches); "at most" at the value.
3. A condition that cannot be made (a folder not absolute, a pattern that is not one, a bound
   that is not a number) raises ``RuleConditionInvalid``, as ``signoff rule add`` does.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from core import canonical, marks
from core.canonical import JSONValue
from core.errors import RuleConditionInvalid, SignoffError
from core.policy import meaning, rules

ANY, EQUALS, FOLDER, PATTERN, AT_MOST = "any", "equals", "folder", "pattern", "at_most"
CHOICES = {ANY: "any value", EQUALS: "equals this value", FOLDER: "is in the folder",
           PATTERN: "matches the pattern", AT_MOST: "at most"}  # fmt: skip


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def choices_for(value: Any) -> tuple[str, ...]:
    """The conditions a value of this type offers (rule 1)."""
    if isinstance(value, str):
        return ANY, EQUALS, FOLDER, PATTERN
    if is_number(value):
        return ANY, EQUALS, AT_MOST
    return ANY, EQUALS


def prefill(choice: str, value: Any) -> str:
    """What a condition's field opens with for this value (rule 2)."""
    if choice == FOLDER and isinstance(value, str) and value.startswith("/"):
        # The folder the path resolves in, written plainly (``/a/../b/c`` is in ``/b``).
        meant = meaning.path(value, meaning.Where(None)).meanings or (value,)
        return posixpath.dirname(meant[0].rstrip("/")) or "/"
    if choice == PATTERN and isinstance(value, str):
        return f"^{re.escape(value)}$"
    if choice == AT_MOST and is_number(value):
        return canonical.dumps_text(value)
    return ""


def condition(choice: str, value: Any, text: str) -> dict[str, JSONValue] | None:
    """The shorthand's condition for one row; None for "any value"."""
    if choice == ANY:
        return None
    if choice == EQUALS:
        return rules.equals(value)
    if choice == FOLDER:
        return rules.under_folder(text.strip())
    if choice == PATTERN:
        return rules.pattern(text)
    try:
        bound = canonical.loads(text.strip())  # exact JSON: no NaN, no Infinity
    except SignoffError:
        bound = None
    if not is_number(bound):
        raise RuleConditionInvalid(f"at most {text!r}: a bound is a number")
    return rules.at_most(bound)


def shown(value: Any) -> str:
    """A value as the dialog shows it: its JSON text, with what a reader cannot see marked."""
    return marks.visible(canonical.dumps_text(value), lines=False)


def said(choice: str, name: str, value: Any, text: str) -> str:
    """One row's condition in words ("" for "any value")."""
    words = {
        EQUALS: f"is {shown(value)}",
        FOLDER: f"is in the folder {text.strip()}",
        PATTERN: f"matches the pattern {text}",
        AT_MOST: f"is at most {text.strip()}",
    }
    return f"{marks.visible(name, lines=False)} {words[choice]}" if choice in words else ""
