"""Rules on a tool's arguments: "always allow / always reject this tool when...", the condition
a JSON Schema over the arguments (decision 0048). Pure code: no I/O, the time is given.

Rules:

1. A rule names a server's tool, an effect (``allow`` or ``reject``), a condition (a JSON
   Schema, self-contained, of the draft the tools' schemas use: core/tools.py), an optional
   expiry, a note, and an id (``R`` and six hex digits of the SHA-256 over its server, tool,
   effect, condition and expiry: the same rule has the same id, and a removed rule's id is
   never taken by a different one).
2. The condition sees the arguments as the server will receive them: the call's arguments with
   the tool's fixed values (core/proxy/config.py) over them.
3. A rule whose expiry is at or before the time it is asked about does nothing.
4. Of the live rules on a tool, a matching ``reject`` rule decides before any ``allow`` rule
   (the lowest id first, so the same request always names the same rule). Rules judge what a
   value means, not how it is spelled (core/policy/judge.py, decision 0064): a ``reject`` rule
   matches when any reading of the request could be in its set (``/a/./b``, ``~/a/b``, a
   relative ``b`` from ``/a``, ``file://localhost/a/%62``, ``A@X.com`` in a list of
   recipients...); an ``allow`` rule only when every value it judges has one meaning and that
   meaning is in its set.
5. A request a rule cannot read as one thing (a relative path with no known folder, an escape
   that does not decode, an unknown scheme carrying dot segments, a ``..`` in a value read as
   text, more readings than are checked) is decided by no rule: when a reject rule could not be
   ruled out, or an allow rule judges such a value or would have matched the request as
   written, it is asked, and ``Decided.doubts`` says why. A folder condition (``under_folder``)
   also refuses a path holding a control character (``/notes\n`` is not in ``/notes``), and a
   pattern never matches a text ending in a line break (a pattern's ``$`` would match before
   it).
6. An ``allow`` rule on a destructive tool decides only when the operator confirmed it for a
   destructive tool (``destructive``); one made before the tool was classified destructive
   does nothing until it is made again with that confirmation.
7. What a rule cannot do is said by the policy (core/policy/policy.py): it is asked only about
   a tool the proxy offers (pinned, unchanged, classified), after the class or tool rule; a deny
   stands; the proxy's rules for Signoff's own files and duplicates come after it.
8. A rule's id is the one its contents make (rule 1): a rule whose id is not is refused by
   name (``RuleIdMismatch``), so "allowed by rule R" always names what decided.
"""

from __future__ import annotations

import enum
import functools
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from core import canonical, marks
from core.canonical import JSONValue
from core.errors import (
    JSONRefused,
    RuleConditionInvalid,
    RuleExpiryInvalid,
    RuleIdMismatch,
    RuleRefused,
    SchemaRefused,
)
from core.policy import judge, meaning
from core.policy.meaning import Reading, Where

RULE_ID = re.compile(r"R[0-9a-f]{6}")
KEYS = ("effect", "when", "expires", "note", "destructive")  # a rule's table in config.toml
# A ``..`` (or ``.``) path segment, with either separator: what rule 5 and ``under_folder``
# refuse. A word of prose ("wait...") holds none.
DOT_SEGMENT = meaning.DOT_SEGMENT.pattern
CONTROL = meaning.CONTROL.pattern  # what no folder's path holds (rule 5)
LINE_END = r"\n$"  # a text ending in a line break, which a pattern's $ lets through (rule 5)
_DURATION = re.compile(r"(\d{1,6})\s*(s|m|min|h|d|w)")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}


class Effect(enum.StrEnum):
    ALLOW = "allow"
    REJECT = "reject"


@dataclass(frozen=True)
class ArgumentRule:
    id: str
    server: str
    tool: str
    effect: Effect
    when: dict[str, JSONValue]
    expires: datetime | None = None
    note: str = ""
    destructive: bool = False  # the operator confirmed an allow on a destructive tool

    @classmethod
    def make(
        cls,
        server: str,
        tool: str,
        effect: Effect,
        when: Any,
        *,
        expires: datetime | None = None,
        note: str = "",
        destructive: bool = False,
    ) -> ArgumentRule:
        """A new rule, its condition checked (``RuleConditionInvalid``) and its id made."""
        condition = check_condition(when)
        return cls(
            rule_id(server, tool, effect, condition, expires),
            server, tool, effect, condition, expires, note, destructive,
        )  # fmt: skip

    @property
    def gate_name(self) -> str:
        return f"{self.server}/{self.tool}"

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and self.expires <= now

    @cached_property
    def _validator(self) -> Any:
        from core.tools import compile_schema

        return compile_schema(f"rule {self.id}", self.when)

    def matches(self, arguments: JSONValue) -> bool:
        """Whether the condition, as written, holds for ``arguments`` as spelled."""
        return bool(self._validator.is_valid(arguments))

    def by_meaning(self, where: Where) -> Callable[[JSONValue], bool] | None:
        """The condition with its values compared by what they mean (core/policy/judge.py
        rule 2), as read from ``where`` now; None when that changes nothing."""
        normalized = judge.normalize(self.when, where)
        if normalized == self.when:
            return None
        return _compiled(self.id, canonical.dumps_text(normalized)).is_valid  # type: ignore[no-any-return]

    def as_json(self) -> dict[str, JSONValue]:
        return {
            "id": self.id, "server": self.server, "tool": self.tool, "effect": self.effect.value,
            "when": self.when, "expires": None if self.expires is None else when_text(self.expires),
            "note": self.note, "destructive": self.destructive,
        }  # fmt: skip

    def table(self) -> dict[str, Any]:
        """Its table in config.toml (``KEYS``): the condition as JSON text (TOML has no null)."""
        table: dict[str, Any] = {"effect": self.effect.value,
                                 "when": canonical.dumps_text(self.when)}  # fmt: skip
        if self.expires is not None:
            table["expires"] = when_text(self.expires)
        if self.note:
            table["note"] = self.note
        if self.destructive:
            table["destructive"] = True
        return table


@functools.lru_cache(maxsize=256)
def _compiled(rule: str, condition: str) -> Any:
    from core.tools import compile_schema

    return compile_schema(f"rule {rule}", canonical.loads(condition))


def rule_id(
    server: str, tool: str, effect: Effect, when: JSONValue, expires: datetime | None
) -> str:
    made = {"server": server, "tool": tool, "effect": effect.value, "when": when,
            "expires": None if expires is None else when_text(expires)}  # fmt: skip
    return "R" + canonical.sha256_hex(made)[:6]


def from_table(server: str, tool: str, rule: str, table: Mapping[str, Any]) -> ArgumentRule:
    """A rule as config.toml holds it; ``RuleRefused`` (a subclass) says what is wrong."""
    if not RULE_ID.fullmatch(rule):
        raise RuleRefused(f"{rule!r} is not a rule id (R and six hex digits)")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise RuleRefused(f"unknown key {unknown[0]} (known here: {', '.join(KEYS)})")
    try:
        effect = Effect(str(table.get("effect")))
    except ValueError:
        raise RuleRefused(f"effect = {table.get('effect')!r}: expected allow or reject") from None
    text = table.get("when")
    if not isinstance(text, str):
        raise RuleConditionInvalid("when: the condition, a JSON Schema written as JSON text")
    try:
        when = canonical.loads(text)
    except JSONRefused as e:
        raise RuleConditionInvalid(f"when: not exact JSON ({e})") from None
    expires = table.get("expires")
    if expires is not None and not isinstance(expires, str):
        raise RuleExpiryInvalid("expires: a time written as 2026-12-31T18:00:00Z")
    note, destructive = table.get("note", ""), table.get("destructive", False)
    if not isinstance(note, str) or not isinstance(destructive, bool):
        raise RuleRefused("note is text, destructive true or false")
    made = ArgumentRule(rule, server, tool, effect, check_condition(when),
                        None if expires is None else read_time(expires), note,
                        destructive)  # fmt: skip
    own = rule_id(server, tool, effect, made.when, made.expires)
    if rule != own:  # rule 8
        raise RuleIdMismatch(
            f"{rule} is not this rule's id: its server, tool, effect, condition and expiry make"
            f" {own} (a rule changed by hand keeps no id; remove it and add it again)"
        )
    return made


def check_condition(when: Any) -> dict[str, JSONValue]:
    """A condition as a rule holds it: a self-contained JSON Schema object that compiles."""
    from core.tools import compile_schema

    if not isinstance(when, dict):
        raise RuleConditionInvalid("a condition is a JSON Schema object ({} for any arguments)")
    try:
        compile_schema("the condition", when)
    except SchemaRefused as e:
        raise RuleConditionInvalid(str(e).replace("the input schema of ", "")) from None
    for node in _nodes(when):
        pattern = node.get("pattern") if isinstance(node, dict) else None
        if isinstance(pattern, str):
            try:
                re.compile(pattern)
            except re.error as e:
                raise RuleConditionInvalid(f"pattern {pattern!r} is not a pattern: {e}") from None
    return when


# --- conditions from the command line's shorthands --------------------------------------


def equals(value: JSONValue) -> dict[str, JSONValue]:
    return {"const": value}


def one_of(values: list[JSONValue]) -> dict[str, JSONValue]:
    """One of ``values``, or a non-empty list of nothing else (a list of recipients)."""
    return {"anyOf": [{"enum": values},
                      {"type": "array", "minItems": 1, "items": {"enum": values}}]}  # fmt: skip


def at_most(bound: float) -> dict[str, JSONValue]:
    return {"type": "number", "maximum": bound}


def pattern(regex: str) -> dict[str, JSONValue]:
    """A text the regular expression finds, not ending in a line break (rule 5)."""
    return {"type": "string", "pattern": regex, "not": {"pattern": LINE_END}}


def under_folder(folder: str) -> dict[str, JSONValue]:
    """An absolute path that is ``folder`` or inside it, compared as text, with no ``.`` or
    ``..`` segment and no control character anywhere (so ``/notes/../secrets`` is not inside
    ``/notes``, nor ``/notes`` and a line break beside it: rule 5). The folder
    must be absolute and written plainly (no ``.``, ``..`` or doubled separators)."""
    plain = folder.rstrip("/") or "/"
    if not folder.startswith("/") or "//" in plain or posixpath.normpath(plain) != plain:
        raise RuleConditionInvalid(
            f"{folder!r}: a folder is an absolute path written plainly (no ., .. or //)"
        )
    head = "" if plain == "/" else re.escape(plain)
    return {"type": "string", "pattern": f"^{head}(/|$)",
            "not": {"pattern": f"{DOT_SEGMENT}|{CONTROL}"}}  # fmt: skip


def on_arguments(
    conditions: Iterable[tuple[str, dict[str, JSONValue]]], *, closed: bool = False
) -> dict[str, JSONValue]:
    """Per-argument conditions as one schema: each argument present and meeting all of its
    (``{}``: any value). ``closed``: and no other argument (for an ``allow`` rule that is to
    match one request's shape only; never for a ``reject`` rule, which it would narrow)."""
    each: dict[str, list[JSONValue]] = {}
    for name, condition in conditions:
        each.setdefault(name, []).append(condition)
    properties: dict[str, JSONValue] = {
        name: found[0] if len(found) == 1 else {"allOf": found} for name, found in each.items()
    }
    schema: dict[str, JSONValue] = {"type": "object", "properties": properties,
                                    "required": list(each)}  # fmt: skip
    if closed:
        schema["additionalProperties"] = False
    return schema


# --- time ------------------------------------------------------------------------------


def when_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_time(text: str) -> datetime:
    """A time as written in config.toml or given: ISO 8601; without a zone, local time."""
    try:
        moment = datetime.fromisoformat(text.strip())
        if moment.tzinfo is None:
            moment = moment.astimezone()  # as the person who typed it reads a clock
        return moment.astimezone(UTC).replace(microsecond=0)
    except ValueError:
        raise RuleExpiryInvalid(f"{text!r} is not a time (2026-12-31T18:00:00Z)") from None
    except OverflowError:  # a time at the calendar's edge, moved to UTC
        raise RuleExpiryInvalid(f"{text!r} is further than a date can be written") from None


def expiry(text: str, now: datetime) -> datetime:
    """``--expires``: a duration from ``now`` (30m, 2h, 7d, 1w) or a time; in the future."""
    duration = _DURATION.fullmatch(text.strip())
    if duration is not None:
        try:
            moment = now + timedelta(seconds=int(duration[1]) * _UNITS[duration[2]])
        except OverflowError:
            raise RuleExpiryInvalid(f"{text!r} is further than a date can be written") from None
        moment = moment.replace(microsecond=0)
    else:
        moment = read_time(text)
    if moment <= now:
        raise RuleExpiryInvalid(f"{text!r} is not in the future: the rule would do nothing")
    return moment


# --- deciding --------------------------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """What the rules made of a request: the rule that decides it (None: no rule does), and
    the values no rule could read as one thing (rule 5): then it is asked."""

    rule: ArgumentRule | None = None
    doubts: tuple[Reading, ...] = ()
    unsure: bool = False  # a reject rule could not be ruled out: asked even if allowed


def deciding(
    rules: Iterable[ArgumentRule],
    arguments: JSONValue,
    *,
    destructive: bool,
    now: datetime,
    where: Where | None = None,
) -> Decided:
    """What decides a request with these ``arguments`` (as the server will receive them), at
    ``now``, values read from ``where`` (None: relative paths have no folder): rules 3 to 6."""
    where = where if where is not None else Where(None)
    live = sorted((r for r in rules if not r.expired(now)), key=lambda r: r.id)
    doubts: list[Reading] = []
    by_meaning = {rule.id: rule.by_meaning(where) for rule in live}  # once per rule, per call
    for rule in live:
        if rule.effect is Effect.REJECT:
            verdict = judge.reject(rule.when, rule.matches, by_meaning[rule.id], arguments,
                                   where)  # fmt: skip
            if verdict.matches:  # rule 4
                return Decided(rule)
            doubts.extend(verdict.doubts)
    if doubts:  # a reject rule that could not be ruled out: asked (rule 5)
        return Decided(None, _once(doubts), unsure=True)
    for rule in live:
        allowed_here = rule.destructive or not destructive  # rule 6
        if rule.effect is not Effect.ALLOW or not allowed_here:
            continue
        normalized = by_meaning[rule.id] or rule.matches
        verdict = judge.allow(rule.when, normalized, arguments, where)
        if verdict.matches:
            return Decided(rule)
        if verdict.doubts and (verdict.judged or rule.matches(arguments)):  # it might have
            doubts.extend(verdict.doubts)
    return Decided(None, _once(doubts))


def _once(doubts: list[Reading]) -> tuple[Reading, ...]:
    return tuple(dict.fromkeys(doubts))


def _nodes(value: Any) -> Iterator[Any]:
    stack = [value]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


# --- in words (windows and the terminal) -----------------------------------------------

EFFECT_WORDS = {Effect.ALLOW: "Always allow", Effect.REJECT: "Always reject"}
HAND_WRITTEN = "arguments match a JSON Schema condition"


def words(rule: ArgumentRule) -> str:
    """A rule's condition in words: "path is in the folder /home/u/notes", "to is one of a@x,
    b@y", "any arguments". The shapes the shorthands make are said exactly; any other condition
    (a hand-written ``--when``) is ``HAND_WRITTEN``, and its JSON is for a tooltip."""
    return marks.visible(_said(rule.when) or HAND_WRITTEN, lines=False)


def expiry_words(
    rule: ArgumentRule, now: datetime, show: Callable[[datetime], str] = when_text
) -> str:
    """ "never", "expired", or "until" and the time (as ``show`` writes it)."""
    if rule.expires is None:
        return "never"
    return "expired" if rule.expired(now) else f"until {show(rule.expires)}"


def _said(when: Mapping[str, Any]) -> str | None:
    if not when:
        return "any arguments"
    parts = when.get("allOf")
    if set(when) == {"allOf"} and isinstance(parts, list) and parts:
        each = [_said(p) if isinstance(p, dict) else None for p in parts]
        if None in each:
            return None
        return " and ".join(s for s in each if s and s != "any arguments") or "any arguments"
    properties, required = when.get("properties"), when.get("required")
    closed = when.get("additionalProperties") is False
    keys = {"type", "properties", "required"} | ({"additionalProperties"} if closed else set())
    shaped = set(when) == keys and when.get("type") == "object"
    if not (shaped and isinstance(properties, dict) and properties and isinstance(required, list)):
        return None
    if sorted(map(str, required)) != sorted(properties):
        return None
    said = _all([_named(name, _value_said(c)) for name, c in properties.items()])
    return f"{said}, and no other argument" if said is not None and closed else said


def _named(name: str, said: str | None) -> str | None:
    return None if said is None else f"{name} {said}"


def _all(said: list[str | None]) -> str | None:
    """Each said, joined with "and"; None when one cannot be."""
    found = [s for s in said if s is not None]
    return " and ".join(found) if len(found) == len(said) else None


def _value_said(condition: Any) -> str | None:
    """One argument's condition as ``on_arguments`` holds it, in words; None: not a shorthand."""
    if not isinstance(condition, dict):
        return None
    each = condition.get("allOf")
    if set(condition) == {"allOf"} and isinstance(each, list) and each:
        return _all([_value_said(c) for c in each])
    if not condition:
        return "is any value"
    if set(condition) == {"const"}:
        return f"is {_shown(condition['const'])}"
    found = condition.get("anyOf")
    if set(condition) == {"anyOf"} and isinstance(found, list) and found:
        values = found[0].get("enum") if isinstance(found[0], dict) else None
        if isinstance(values, list) and condition == one_of(values):
            return f"is one of {', '.join(_shown(v) for v in values)}"
        return None
    bound = condition.get("maximum")
    if (
        isinstance(bound, int | float)
        and not isinstance(bound, bool)
        and condition == at_most(bound)
    ):
        return f"is at most {_shown(bound)}"
    regex = condition.get("pattern")
    if not isinstance(regex, str):
        return None
    if condition == pattern(regex):
        return f"matches the pattern {regex}"
    folder = _folder_of(regex)
    if folder is not None and condition == _under_or_none(folder):
        return f"is in the folder {folder}"
    return None


def _folder_of(regex: str) -> str | None:
    """The folder ``under_folder`` made ``regex`` from (its escapes undone), if it can be."""
    if not (regex.startswith("^") and regex.endswith("(/|$)")):
        return None
    head = re.sub(r"\\(.)", r"\1", regex[1:-5])
    return head or "/"


def _under_or_none(folder: str) -> dict[str, JSONValue] | None:
    try:
        return under_folder(folder)
    except RuleConditionInvalid:
        return None


def _shown(value: JSONValue) -> str:
    """A value as a person reads it: a plain text bare, anything else as JSON."""
    if isinstance(value, str) and value and value == value.strip() and "," not in value:
        return value
    return canonical.dumps_text(value)
