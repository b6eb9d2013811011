"""``signoff rule list|add|remove``: rules on a tool's arguments (core/policy/rules.py,
decision 0048).

``add`` makes one rule from ``--when JSON-SCHEMA`` and the shorthands, each on one argument
(``ARG=...``, all of them must hold): ``--equals`` (a JSON value, else the text), ``--one-of``
(a JSON array, else comma-separated texts: the value, or a list of nothing else), ``--prefix``
(an absolute folder: the value is that folder or inside it, with no ``.`` or ``..`` segment),
``--pattern`` (a regular expression the text must match: anchor it with ``^`` and ``$``),
``--at-most`` (a number). Without any, it is refused: ``--when '{}'`` is a rule for any
arguments. A change is recorded as ``policy.changed`` like every change of the rules.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from core import paths
from core.canonical import JSONValue, loads
from core.errors import SignoffError

EXIT_OK, EXIT_ERROR = 0, 2
SHORTHANDS = ("equals", "one_of", "prefix", "pattern", "at_most")


def register(commands: Any) -> None:
    rule = commands.add_parser(
        "rule", help="rules on a tool's arguments: always allow or reject it when they match"
    )
    actions = rule.add_subparsers(dest="rule_command", metavar="ACTION", required=True)
    p = actions.add_parser("list", help="the rules, with their ids, conditions and expiry")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=list_rules)
    p = actions.add_parser(
        "add",
        help="add a rule: --server S --tool T --allow|--reject and a condition",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
    )
    p.add_argument("--server", required=True, metavar="NAME")
    p.add_argument("--tool", required=True, metavar="TOOL")
    effect = p.add_mutually_exclusive_group(required=True)
    effect.add_argument("--allow", action="store_const", const="allow", dest="effect",
                        help="run a matching call without asking")  # fmt: skip
    effect.add_argument("--reject", "--deny", action="store_const", const="reject", dest="effect",
                        help="refuse a matching call")  # fmt: skip
    p.add_argument("--when", metavar="JSON-SCHEMA", help="the condition on the arguments")
    for name, meta in (("equals", "ARG=VALUE"), ("one-of", "ARG=V1,V2"),
                       ("prefix", "ARG=FOLDER"), ("pattern", "ARG=REGEX"),
                       ("at-most", "ARG=N")):  # fmt: skip
        p.add_argument(f"--{name}", action="append", default=[], metavar=meta)
    p.add_argument("--expires", metavar="DURATION|TIME",
                   help="30m, 2h, 7d, 1w, or a time such as 2026-12-31T18:00 (local)")  # fmt: skip
    p.add_argument("--note", default="", metavar="TEXT")
    p.add_argument("--yes-destructive", action="store_true",
                   help="confirm an allow rule on a destructive tool")  # fmt: skip
    p.set_defaults(func=add_rule)
    p = actions.add_parser("remove", help="remove a rule by its id")
    p.add_argument("rule", metavar="ID")
    p.set_defaults(func=remove_rule)


def condition(args: argparse.Namespace) -> dict[str, JSONValue]:
    """The one condition ``--when`` and the shorthands make together (``RuleConditionInvalid``
    when one cannot be read)."""
    from core.errors import JSONRefused, RuleConditionInvalid
    from core.policy import rules

    parts: list[dict[str, JSONValue]] = []
    if args.when is not None:
        try:
            when = loads(args.when)
        except JSONRefused as e:
            raise RuleConditionInvalid(f"--when: not JSON ({e})") from None
        parts.append(rules.check_condition(when))
    each: list[tuple[str, dict[str, JSONValue]]] = []
    for shorthand in SHORTHANDS:
        for item in getattr(args, shorthand):
            name, sep, text = item.partition("=")
            flag = "--" + shorthand.replace("_", "-")
            if not sep or not name:
                raise RuleConditionInvalid(f"{flag} takes ARG=..., not {item!r}")
            each.append((name, _shorthand(shorthand, text, flag)))
    if each:
        parts.append(rules.on_arguments(each))
    if not parts:
        raise RuleConditionInvalid(
            "give a condition (--when, --equals, --one-of, --prefix, --pattern, --at-most);"
            " --when '{}' is a rule for any arguments"
        )
    return rules.check_condition(parts[0] if len(parts) == 1 else {"allOf": list(parts)})


def _shorthand(kind: str, text: str, flag: str) -> dict[str, JSONValue]:
    from core.errors import JSONRefused, RuleConditionInvalid
    from core.policy import rules

    if kind == "equals":
        return rules.equals(_json_or_text(text))
    if kind == "one_of":
        values = _json_or_text(text)
        if not isinstance(values, list):  # comma-separated, each a JSON value or a text
            values = [_json_or_text(v.strip()) for v in text.split(",")]
        if not values:
            raise RuleConditionInvalid(f"{flag}: no value given")
        return rules.one_of(values)
    if kind == "prefix":
        return rules.under_folder(text)
    if kind == "pattern":
        return rules.pattern(text)
    try:
        bound = loads(text)
    except JSONRefused:
        bound = None
    if isinstance(bound, bool) or not isinstance(bound, int | float):
        raise RuleConditionInvalid(f"{flag} takes a number, not {text!r}")
    return rules.at_most(bound)


def _json_or_text(text: str) -> JSONValue:
    from core.errors import JSONRefused

    try:
        return loads(text)
    except JSONRefused:
        return text  # a bare word is a string


def add_rule(args: argparse.Namespace) -> int:
    from core.policy import rules
    from core.proxy import commands, manage

    path = paths.config_path()
    try:
        now = datetime.now(UTC)
        expires = None if args.expires is None else rules.expiry(args.expires, now)
        rule = rules.ArgumentRule.make(
            args.server, args.tool, rules.Effect(args.effect), condition(args),
            expires=expires, note=args.note,
        )  # fmt: skip
        before = manage.changing(path)
        after = manage.add_rule(path, rule, confirm_destructive=args.yes_destructive)
    except SignoffError as e:
        return _error(str(e), type(e).__name__)
    commands._record_policy(before, after)
    saved = next(r for r in after.rules() if r.id == rule.id)
    print(f"added rule {saved.id}: {_line(saved, now)}; recorded in the history")
    return EXIT_OK


def remove_rule(args: argparse.Namespace) -> int:
    from core.proxy import commands, manage

    path = paths.config_path()
    try:
        before = manage.changing(path)
        after = manage.remove_rule(path, args.rule)
    except SignoffError as e:
        return _error(str(e), type(e).__name__)
    commands._record_policy(before, after)
    print(f"removed rule {args.rule}; recorded in the history")
    return EXIT_OK


def list_rules(args: argparse.Namespace) -> int:
    from core.proxy import config_record
    from core.store import Store

    try:
        with Store.open(paths.database_path()) as store:
            state = config_record.state(store, paths.config_path())  # the rules in force
        found = state.config().rules()
    except SignoffError as e:
        return _error(str(e), type(e).__name__)
    now = datetime.now(UTC)
    for rule in found:
        if args.json:
            print(json.dumps({**rule.as_json(), "expired": rule.expired(now)}))
        else:
            print(f"{rule.id}  {_line(rule, now)}")
    if state.changed_outside:
        print(f"signoff: {state.why()}", file=sys.stderr)
    return EXIT_OK


def _line(rule: Any, now: datetime) -> str:
    from core.policy import rules

    expiry = ""
    if rule.expires is not None:
        word = "expired" if rule.expired(now) else "expires"
        expiry = f"  {word} {rules.when_text(rule.expires)}"
    note = f"  ({rule.note})" if rule.note else ""
    when = rules.words(rule)
    if when == rules.HAND_WRITTEN:  # said exactly, then
        when = json.dumps(rule.when, ensure_ascii=False)
    return f"{rule.effect.value} {rule.gate_name} when {when}{expiry}{note}"


def _error(message: str, name: str) -> int:
    print(f"signoff: {message} [{name}]", file=sys.stderr)
    return EXIT_ERROR
