"""Whether a rule's condition holds for a request, judged on what its values mean, failing
closed by direction (decision 0064). Pure code but for core/policy/meaning.py's look at links.

Rules:

1. A condition is a JSON Schema over the arguments (core/policy/rules.py). The arguments it
   names at its top (``properties``, through ``allOf``/``anyOf``/``oneOf``/``not``) are the
   ones it judges; a condition that can look at arguments it does not name
   (``additionalProperties`` with a schema, ``patternProperties``, ``propertyNames``,
   ``dependentSchemas``, ``if``, ``$ref``...) judges them all.
2. Each argument it judges is read in a domain (core/policy/meaning.py rule 7), taken from the
   literals the condition holds for it: its values (``const``, ``enum``), a folder, the fixed
   start of a pattern. All of one domain: that domain; none or mixed: text. The condition's
   own values in a path, URI or address domain are compared by their meaning too, and a folder
   condition, or a pattern that is only a fixed start ending in ``/``, holds it as written and
   as it means (``^file://localhost/a/`` is also ``^file:///a/``; a link, where it leads).
3. ``reject``: the rule matches when the condition holds for any reading of the request: each
   string judged replaced by anything it could be taken for (``meaning.readings``), each list
   or object also by each of its members alone (a reject rule on recipients matches a list
   holding one), in every combination (a list too long for that: its elements alone and all
   in their first, second... reading), against the condition as written and with its values
   compared by meaning (rule 2). When none holds, a string it judges as a path, URI or
   address that has no one meaning there (a relative path with no known folder, a ``file:``
   URL naming another machine...) leaves the rule not ruled out: its doubt is said, and the
   request is asked. Text means itself: every reading of it was tried.
4. ``allow``: the rule matches only when every string it judges has a meaning in its domain
   (no doubt) and the condition holds for every combination of those meanings. The keys of an
   object it judges are judged as its values are, at any depth and in a list too (a server
   may take a key for a path: ``{"files": {"a.md": "text"}}``), and two keys of one object
   meaning one thing are a doubt. A string it does not judge, or judges as text, that holds a
   ``.`` or ``..`` segment (spelled or escaped) is a doubt, and so is such a key anywhere, an
   argument's name included: a condition comparing text would read ``/notes/../secrets`` as
   inside ``/notes``.
5. Past ``MOST_COMBINATIONS`` combinations, nothing is decided: the request is asked, and the
   doubt says why. So no request buys its way past a reject rule with many readings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.canonical import JSONValue
from core.policy import meaning
from core.policy.meaning import Domain, Reading, Where

MOST_COMBINATIONS = 512
# Keywords through which a condition sees arguments it does not name (rule 1).
_SEES_UNNAMED = frozenset({
    "patternProperties", "propertyNames", "dependentSchemas", "dependencies", "if", "then",
    "else", "$ref", "$dynamicRef", "unevaluatedProperties", "contains", "items", "prefixItems",
})  # fmt: skip
_COMBINERS = ("allOf", "anyOf", "oneOf")
TOO_MANY = "has more readings than Signoff checks in one request"
SAME_KEY = "means what another key of its object means, so one value would hide the other"


@dataclass(frozen=True)
class Verdict:
    matches: bool
    doubts: tuple[Reading, ...] = ()  # why the rule could not decide
    judged: bool = False  # a doubt is about a value the rule judges (not a dot in another)


class _TooMany(Exception):
    pass


class _Doubt(Exception):
    def __init__(self, reading: Reading) -> None:
        self.reading = reading


Valid = Callable[[JSONValue], bool]


def reject(
    condition: Mapping[str, Any], valid: Valid, normalized: Valid | None, arguments: JSONValue,
    where: Where,
) -> Verdict:  # fmt: skip
    """Rule 3. ``valid``: the condition as written; ``normalized``: with its values compared by
    meaning (``normalize``), None when that changes nothing."""
    judged = _judged(condition, arguments)
    try:
        for document in _documents(arguments, judged, lambda _, v: _any_reading(v, where)):
            if valid(document) or (normalized is not None and normalized(document)):
                return Verdict(True)
    except _TooMany:
        return Verdict(False, (Reading("(the arguments)", (), TOO_MANY),))
    return Verdict(False, tuple(_unread(condition, arguments, judged, where)))


def allow(
    condition: Mapping[str, Any], normalized: Valid, arguments: JSONValue, where: Where
) -> Verdict:
    """Rule 4. ``normalized``: the condition with its values compared by meaning."""
    judged = _judged(condition, arguments)
    domains = domains_of(condition)
    doubts: list[Reading] = []
    if isinstance(arguments, dict):  # the argument's name is a key like any other
        for name, value in arguments.items():
            doubts.extend(_text_doubts({name: value}, with_keys=True,
                                       values=name not in judged))  # fmt: skip
    if doubts:
        return Verdict(False, tuple(doubts))
    try:
        documents = list(
            _documents(
                arguments,
                judged,
                lambda name, v: _meanings(v, domains.get(name or "", Domain.TEXT), where),
            )
        )
    except _Doubt as e:
        return Verdict(False, (e.reading,), judged=True)
    except _TooMany:
        return Verdict(False, (Reading("(the arguments)", (), TOO_MANY),), judged=True)
    return Verdict(all(normalized(d) for d in documents))


# --- which arguments, in which domain (rules 1 and 2) ------------------------------------------


def _judged(condition: Mapping[str, Any], arguments: JSONValue) -> tuple[str, ...]:
    if not isinstance(arguments, dict):
        return ()
    named = _named(condition)
    return tuple(arguments) if named is None else tuple(n for n in arguments if n in named)


def _named(condition: Any) -> set[str] | None:
    """The top-level arguments ``condition`` looks at; None: it may look at any."""
    if not isinstance(condition, dict):
        return set()
    if _SEES_UNNAMED & set(condition):
        return None
    extra = condition.get("additionalProperties")
    if extra is not None and not isinstance(extra, bool):
        return None
    found = set(condition.get("properties") or {})
    for key in (*_COMBINERS, "not"):
        parts = condition.get(key)
        for part in parts if isinstance(parts, list) else [parts] if parts is not None else []:
            more = _named(part)
            if more is None:
                return None
            found |= more
    return found


def domains_of(condition: Mapping[str, Any]) -> dict[str, Domain]:
    """Each named argument's domain (rule 2)."""
    literals: dict[str, list[str]] = {}
    for name, part in _properties(condition):
        literals.setdefault(name, []).extend(_literals(part))
    found = {}
    for name, each in literals.items():
        domains = {meaning.domain_of(s) for s in each}
        found[name] = domains.pop() if len(domains) == 1 else Domain.TEXT
    return found


def _properties(condition: Any) -> Iterator[tuple[str, Any]]:
    if not isinstance(condition, dict):
        return
    properties = condition.get("properties")
    if isinstance(properties, dict):
        yield from properties.items()
    for key in (*_COMBINERS, "not"):
        parts = condition.get(key)
        for part in parts if isinstance(parts, list) else [parts] if parts is not None else []:
            yield from _properties(part)


def _literals(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            if key == "const" and isinstance(value, str):
                yield value
            elif key == "enum" and isinstance(value, list):
                yield from (v for v in value if isinstance(v, str))
            elif key == "pattern" and isinstance(value, str):
                start = meaning.pattern_start(value)
                if start:
                    yield start
            elif key != "not" and isinstance(value, dict | list):
                stack.append(value)


def normalize(condition: dict[str, Any], where: Where) -> dict[str, Any]:
    """The condition with its values in a path, URI or address domain replaced by what they
    mean, and each folder held as written and as it resolves (rule 2)."""
    domains = {n: d for n, d in domains_of(condition).items() if d is not Domain.TEXT}
    if not domains:
        return condition
    out: dict[str, Any] = _at_top(condition, domains, where)
    return out


def _at_top(node: Any, domains: Mapping[str, Domain], where: Where) -> Any:
    if not isinstance(node, dict):
        return node
    out = dict(node)
    properties = node.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {
            name: _in_domain(part, domains[name], where) if name in domains else part
            for name, part in properties.items()
        }
    for key in (*_COMBINERS, "not"):
        parts = node.get(key)
        if isinstance(parts, list):
            out[key] = [_at_top(p, domains, where) for p in parts]
        elif isinstance(parts, dict):
            out[key] = _at_top(parts, domains, where)
    return out


def _in_domain(node: Any, domain: Domain, where: Where) -> Any:
    if isinstance(node, list):
        return [_in_domain(n, domain, where) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "const" and isinstance(value, str):
            out[key] = _meant(value, domain, where)[0]
        elif key == "enum" and isinstance(value, list):
            out[key] = list(dict.fromkeys(m for v in value for m in (
                _meant(v, domain, where) if isinstance(v, str) else [v])))  # fmt: skip
        elif key == "pattern" and isinstance(value, str) and domain is Domain.PATH:
            out[key] = _start_pattern(_folder_pattern(value, where), domain, where)
        elif key == "pattern" and isinstance(value, str) and domain is Domain.URI:
            out[key] = _start_pattern(value, domain, where)
        elif isinstance(value, dict | list):  # in an exception (``not``) too
            out[key] = _in_domain(value, domain, where)
        else:
            out[key] = value
    return out


def _meant(literal: str, domain: Domain, where: Where) -> list[str]:
    reading = (meaning.path(literal, where, forms=False) if domain is Domain.PATH
               else meaning.read(literal, domain, where))  # fmt: skip
    return list(reading.meanings) if reading.meanings and not reading.doubt else [literal]


_FOLDER = re.compile(r"^\^(.*)\(/\|\$\)$", re.DOTALL)
_FIXED = re.compile(r"\^(?:[^\\.^$*+?{}\[\]|()]|\\[^A-Za-z0-9])*/")  # ^ and a fixed text, to a /


def _start_pattern(regex: str, domain: Domain, where: Where) -> str:
    """A pattern that is only a fixed start ending in ``/`` (``^file:///home/me/notes/``)
    holding it as written and as it means; any other pattern as it is."""
    start = meaning.pattern_start(regex)
    if not start or not _FIXED.fullmatch(regex):
        return regex
    reading = (meaning.path(start, where, forms=False) if domain is Domain.PATH
               else meaning.read(start, domain, where))  # fmt: skip
    if reading.doubt:
        return regex
    heads = [start, *(m.rstrip("/") + "/" for m in reading.meanings)]
    return f"^(?:{'|'.join(re.escape(h) for h in dict.fromkeys(heads))})"


def _folder_pattern(regex: str, where: Where) -> str:
    """A folder condition's pattern (``^FOLDER(/|$)``) holding the folder as written and as it
    resolves; any other pattern as it is."""
    found = _FOLDER.fullmatch(regex)
    start = meaning.pattern_start(regex)
    if found is None or start is None or re.escape(start) != found[1]:
        return regex
    folder = start or "/"
    forms = [folder, *meaning.path(folder, where, forms=False).meanings]
    heads = [re.escape(f.rstrip("/")) for f in dict.fromkeys(forms)]
    return f"^(?:{'|'.join(heads)})(/|$)"


# --- the documents a condition is asked about (rules 3 to 5) -------------------------------


def _documents(
    arguments: JSONValue,
    judged: tuple[str, ...],
    variants: Callable[[str | None, JSONValue], list[Any]],
) -> Iterator[JSONValue]:
    if not isinstance(arguments, dict):
        yield from variants(None, arguments)
        return
    names = list(judged)
    choices = [variants(n, arguments[n]) for n in names]
    if sum(len(c) > 1 for c in choices) > 1:  # one argument alone is read in a line, uncapped
        _count(choices)
    for chosen in itertools.product(*choices):
        yield {**arguments, **dict(zip(names, chosen, strict=True))}


def _count(choices: list[list[Any]]) -> None:
    total = 1
    for each in choices:
        total *= max(len(each), 1)
        if total > MOST_COMBINATIONS:
            raise _TooMany


def _any_reading(value: JSONValue, where: Where) -> list[Any]:
    """Rule 3: every value ``value`` could be taken for."""
    if isinstance(value, str):
        return list(meaning.readings(value, where))
    if isinstance(value, list):
        each = [_any_reading(v, where) for v in value]
        alone = [v for found in each for v in found]
        try:
            _count(each)
            whole = [list(c) for c in itertools.product(*each)]
        except _TooMany:  # a long list: its elements alone, and each k-th reading of all
            longest = max(len(found) for found in each)
            whole = [[found[min(k, len(found) - 1)] for found in each] for k in range(longest)]
        return [*whole, *alone]
    if isinstance(value, dict):
        keys = list(value)
        each = [_any_reading(value[k], where) for k in keys]
        _count(each)
        whole_object = [dict(zip(keys, c, strict=True)) for c in itertools.product(*each)]
        return [*whole_object, *(v for found in each for v in found)]
    return [value]


def _unread(
    condition: Mapping[str, Any], arguments: JSONValue, judged: tuple[str, ...], where: Where
) -> Iterator[Reading]:
    """Rule 3: each string judged that has no one meaning in its domain; a reject rule that
    did not match its readings is not ruled out by them."""
    if not isinstance(arguments, dict):
        return
    domains = domains_of(condition)
    for name in judged:
        domain = domains.get(name, Domain.TEXT)
        if domain is Domain.TEXT:  # text means itself, every reading of it already tried
            continue
        stack: list[Any] = [arguments[name]]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                reading = meaning.read(item, domain, where)
                if reading.doubt:
                    yield reading
            elif isinstance(item, dict | list):
                stack.extend(item.values() if isinstance(item, dict) else item)


def _meanings(value: JSONValue, domain: Domain, where: Where) -> list[Any]:
    """Rule 4: every combination of what the strings in ``value`` mean in ``domain``, an
    object's keys included."""
    if isinstance(value, str):
        reading = meaning.read(value, domain, where)
        if reading.doubt or not reading.meanings:
            raise _Doubt(reading)
        return list(reading.meanings)
    if isinstance(value, list):
        each = [_meanings(v, domain, where) for v in value]
        _count(each)
        return [list(c) for c in itertools.product(*each)]
    if isinstance(value, dict):  # its keys are judged as its values are: a path can be one
        keys = list(value)
        names = [_meanings(k, domain, where) for k in keys]
        each = [_meanings(value[k], domain, where) for k in keys]
        _count([*names, *each])
        found: list[Any] = []
        for named in itertools.product(*names):
            if len(set(named)) < len(named):  # two keys meaning one: a value would be lost
                key, meant = next((k, n) for k, n in zip(keys, named, strict=True)
                                  if named.count(n) > 1)  # fmt: skip
                raise _Doubt(Reading(key, (meant,), SAME_KEY))
            found += [dict(zip(named, c, strict=True)) for c in itertools.product(*each)]
        return found
    return [value]


def _text_doubts(value: Any, *, with_keys: bool, values: bool = True) -> Iterator[Reading]:
    """Rule 4: a string holding a dot segment, read as text (``with_keys``: keys too)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and values:
            reading = meaning.read(item, Domain.TEXT, Where())
            if reading.doubt:
                yield reading
        elif isinstance(item, dict):
            for key, member in item.items():
                if with_keys:
                    reading = meaning.read(key, Domain.TEXT, Where())
                    if reading.doubt:
                        yield reading
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(item)
