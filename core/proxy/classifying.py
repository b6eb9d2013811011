"""Which class each tool of one ``signoff classify`` gets. Pure code.

``signoff classify NAME TOOL CLASS`` classifies one tool; ``signoff classify NAME TOOL... CLASS``
several tools the same; ``signoff classify NAME TOOL=CLASS [TOOL=CLASS ...]`` each its own, and
``--all-unclassified CLASS`` (``--rest``, its older name) or ``--all CLASS`` the server's other
pinned tools; each command is one configuration write, recorded once
(core/proxy/config_record.py rule 1), as ``core.proxy.manage.classify`` does for every form
(decisions 0035 and 0042). The settings window classifies the tools selected the same way.

Rules:

1. The words (``--all-unclassified CLASS``, ``--rest CLASS`` and ``--all CLASS`` aside,
   wherever they stand) are read one of two ways:

   a. ``TOOL... CLASS``: two words or more, the last one a class, or a word holding no ``=``
      nor a leading ``-`` when no word is ``TOOL=CLASS``. Each word before it is a tool name
      (a tool whose name holds ``=`` is named so, as ``x=y read_only``).
   b. otherwise each word is ``TOOL=CLASS``, split at the last ``=`` (a class never holds one).

   A word of ``TOOL... CLASS`` that also reads as ``TOOL=CLASS`` (what follows its last ``=``
   is a class: ``classify S x=read_only destructive``) is **ambiguous**, and refused: is
   ``x`` read only, or is ``x=read_only`` a tool to make destructive? A tool with such a name is
   named ``x=read_only=destructive``.
2. ``--all-unclassified CLASS`` (``--rest``) classifies every tool the server has pinned that
   has no class yet and is not named; ``--all CLASS`` every tool it has pinned that is not
   named. A named tool's own class comes first.
3. The plan is taken whole or refused whole (``ClassificationRefused``, listing every problem,
   nothing written): no such server; a word that is neither form, or is ambiguous; a class that
   is not one of the four; a tool named twice; ``--all-unclassified`` with ``--all``; either on
   a server with no pinned tool; nothing asked at all. ``--all-unclassified`` with every pinned
   tool already classified is no problem: nothing is left, nothing is written.
4. What one tool's classification allows, each tool of a plan may do: a tool not pinned yet can
   be classified (the class waits for its pin, as in the settings window), and a class the
   server's annotations contradict is kept while the tool stays refused until the operator
   resolves it (core/proxy/pins.py rules 4 and 5). Both are enforced where tools are served;
   ``notes`` tells the operator which tools of a plan are in either case, as far as Signoff saw
   the server at its last connection.
5. The server's annotations suggest a class (``suggested``), never set one: a hint is the
   server's claim, offered to the operator to confirm. ``readOnlyHint: true`` suggests
   ``read_only``, ``destructiveHint: true`` ``destructive``, ``destructiveHint: false`` with an
   explicit ``openWorldHint`` ``remote_mutation`` (true) or ``local_mutation`` (false); anything
   else suggests nothing. A suggestion never contradicts the hints (``pins.conflict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import ClassificationRefused
from core.proxy.config import Config, ServerConfig
from core.proxy.pins import conflict
from core.tools import SideEffect

CLASSES = tuple(s.value for s in SideEffect)
UNCLASSIFIED, EVERY = "--all-unclassified", "--all"
OPTIONS = (UNCLASSIFIED, EVERY)
ALIASES = {"--rest": UNCLASSIFIED}  # the older name, kept


@dataclass(frozen=True)
class Words:
    """What the words of one ``classify`` say (rule 1): the (tool, class) entries, each word
    that cannot be read said as a problem, and the values of the options given among them."""

    entries: list[tuple[str, str]]
    problems: list[str]
    options: dict[str, list[str]]


def _pair(word: str) -> tuple[str, str] | None:
    """``word`` as TOOL=CLASS when what follows its last ``=`` is a class."""
    tool, sep, side_effect = word.rpartition("=")
    return (tool, side_effect) if sep and tool and side_effect in CLASSES else None


def ambiguous(word: str, side_effect: str) -> str:
    """Why ``word`` before ``side_effect`` cannot be read (rule 1)."""
    tool, _, theirs = word.rpartition("=")
    return (
        f"{word} before {side_effect} is ambiguous: {tool} made {theirs}, or a tool named {word}"
        f" made {side_effect}? Give every tool as TOOL=CLASS (the tool named {word}:"
        f" {word}={side_effect}), or tool names only, then one class"
    )


def read_words(words: Sequence[str]) -> Words:
    """The (tool, class) entries the words name (rule 1), the problems of those that name none,
    and the values of ``--all-unclassified`` (or ``--rest``) and ``--all`` given among them
    (``--all CLASS`` or ``--all=CLASS``)."""
    options: dict[str, list[str]] = {option: [] for option in OPTIONS}
    left: list[str] = []
    rest = list(words)
    while rest:
        word = rest.pop(0)
        option, sep, value = word.partition("=")
        option = ALIASES.get(option, option)
        if option in options and (sep or rest):
            options[option].append(value if sep else rest.pop(0))
        else:
            left.append(word)
    entries: list[tuple[str, str]] = []
    problems: list[str] = []
    last = left[-1] if left else ""
    bare = "=" not in last and not last.startswith("-")
    if len(left) > 1 and bare and (last in CLASSES or not any(map(_pair, left[:-1]))):
        for word in left[:-1]:  # TOOL... CLASS
            if _pair(word) is not None:
                problems.append(ambiguous(word, last))
            elif word.startswith("-"):
                problems.append(f"{word!r} is not an option of classify")
            else:
                entries.append((word, last))
        return Words(entries, problems, options)
    for word in left:  # TOOL=CLASS...
        tool, sep, side_effect = word.rpartition("=")
        if sep and tool:
            entries.append((tool, side_effect))
        else:
            problems.append(f"{word!r} is not TOOL=CLASS (a class for several tools goes last)")
    return Words(entries, problems, options)


def suggested(annotations: Mapping[str, Any]) -> SideEffect | None:
    """The class the server's hints suggest, or None (rule 5)."""
    if annotations.get("readOnlyHint") is True:
        return SideEffect.READ_ONLY
    if annotations.get("destructiveHint") is True:
        return SideEffect.DESTRUCTIVE
    if annotations.get("destructiveHint") is False:
        world = annotations.get("openWorldHint")
        if world is True:
            return SideEffect.REMOTE_MUTATION
        if world is False:
            return SideEffect.LOCAL_MUTATION
    return None


def _side_effect(text: str) -> SideEffect | None:
    return SideEffect(text) if text in CLASSES else None


def _not_a_class(text: str, where: str) -> str:
    return f"{where}: {text!r} is not a class (one of: {', '.join(CLASSES)})"


def plan(
    config: Config,
    server: str,
    entries: Sequence[tuple[str, str]],
    *,
    rest: str | None = None,
    every: str | None = None,
    problems: Sequence[str] = (),
) -> dict[str, SideEffect]:
    """Each tool's class under ``config`` (rules 2 and 3), in the order named, then pinned;
    ``problems``: those ``read_words`` found in the words, refused with the rest."""
    found = config.servers.get(server)
    if found is None:
        raise ClassificationRefused(f"no server {server}", (f"no server {server}",))
    refused = list(problems)
    named = [tool for tool, _ in entries]
    classes: dict[str, SideEffect] = {}
    for tool, text in entries:
        if named.count(tool) > 1:
            twice = f"{tool} is named more than once"
            if twice not in refused:
                refused.append(twice)
            continue
        side_effect = _side_effect(text)
        if side_effect is None:
            refused.append(_not_a_class(text, tool))
        else:
            classes[tool] = side_effect
    if rest is not None and every is not None:
        refused.append(f"{UNCLASSIFIED} and {EVERY} cannot be given together")
    elif rest is not None or every is not None:
        option, text = (EVERY, every) if every is not None else (UNCLASSIFIED, rest or "")
        fill = _side_effect(text)
        pinned = [tool for tool, cfg in found.tools.items() if cfg.pin is not None]
        if fill is None:
            refused.append(_not_a_class(text, option))
        if not pinned:
            refused.append(f"{option}: {server} has no pinned tool (`signoff pin {server}` first)")
        for tool in pinned:
            left = every is not None or found.tools[tool].side_effect is None
            if fill is not None and left and tool not in named:
                classes[tool] = fill
    elif not entries and not refused:
        refused.append(
            f"nothing to classify: give TOOL... CLASS, or TOOL=CLASS..., or {UNCLASSIFIED} CLASS,"
            f" or {EVERY} CLASS"
        )
    if refused:
        raise ClassificationRefused(
            f"nothing classified ({len(refused)} problem{'s' if len(refused) > 1 else ''}):"
            f" {'; '.join(refused)}",
            tuple(refused),
        )
    return classes


def notes(
    name: str,
    server: ServerConfig,
    classes: Mapping[str, SideEffect],
    listed: Mapping[str, Mapping[str, Any]] | None,
    at: str = "",
) -> list[str]:
    """What the operator should know of the classified tools (rule 4): those not pinned yet, and
    those whose annotations, as ``listed`` at the server's last connection (``at``), contradict
    their new class."""
    said: list[str] = []
    for tool, side_effect in classes.items():
        cfg = server.tools.get(tool)
        if cfg is None or cfg.pin is None:
            seen = listed is not None and tool in listed
            said.append(
                f"{tool} is not pinned{'' if seen or listed is None else ', nor listed by ' + name}"
                f": it is offered once you pin it (`signoff pin {name}`)"
            )
            continue
        hints = (listed or {}).get(tool, {}).get("annotations") or {}
        clash = conflict(side_effect, hints) if isinstance(hints, dict) else ""
        if clash and not cfg.overrule_annotations:
            said.append(
                f"{tool}: {clash} (as {name} listed it at {at}): it is not offered until you"
                f" classify it as the server says or keep yours (`signoff tool {name} {tool}"
                " --overrule-annotations yes`)"
            )
    return said
