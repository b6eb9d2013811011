"""Which class each tool of one ``signoff classify`` gets. Pure code.

``signoff classify NAME TOOL CLASS`` classifies one tool; ``signoff classify NAME TOOL=CLASS
[TOOL=CLASS ...] [--rest CLASS | --all CLASS]`` classifies many in one configuration write,
recorded once (core/proxy/config_record.py rule 1), as ``core.proxy.manage.classify`` does for
both forms (decision 0035).

Rules:

1. The words (``--rest CLASS`` and ``--all CLASS`` aside, wherever they stand) are ``TOOL
   CLASS`` (two words, the second without ``=`` or a leading ``-``: the one-tool form, which
   also takes a tool whose name holds ``=``), or each ``TOOL=CLASS``, split at the last ``=``
   (a class never holds one).
2. ``--rest CLASS`` classifies every tool the server has pinned that has no class yet and is
   not named; ``--all CLASS`` every tool it has pinned that is not named. A named tool's own
   class comes first.
3. The plan is taken whole or refused whole (``ClassificationRefused``, listing every problem,
   nothing written): no such server; a word that is not ``TOOL=CLASS``; a class that is not one
   of the four; a tool named twice; ``--rest`` with ``--all``; ``--rest`` or ``--all`` on a
   server with no pinned tool; nothing asked at all. ``--rest`` with every pinned tool already
   classified is no problem: nothing is left, nothing is written.
4. What one tool's classification allows, each tool of a plan may do: a tool not pinned yet can
   be classified (the class waits for its pin, as in the settings window), and a class the
   server's annotations contradict is kept while the tool stays refused until the operator
   resolves it (core/proxy/pins.py rules 4 and 5). Both are enforced where tools are served;
   ``notes`` tells the operator which tools of a plan are in either case, as far as Signoff saw
   the server at its last connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.errors import ClassificationRefused
from core.proxy.config import Config, ServerConfig
from core.proxy.pins import conflict
from core.tools import SideEffect

CLASSES = tuple(s.value for s in SideEffect)
OPTIONS = ("--rest", "--all")


def read_words(
    words: Sequence[str],
) -> tuple[list[tuple[str, str]], list[str], dict[str, list[str]]]:
    """The (tool, class) entries the words name, the words that name none (rule 1), and the
    values of ``--rest`` and ``--all`` given among them (``--rest CLASS`` or ``--rest=CLASS``)."""
    options: dict[str, list[str]] = {option: [] for option in OPTIONS}
    left: list[str] = []
    rest = list(words)
    while rest:
        word = rest.pop(0)
        option, sep, value = word.partition("=")
        if option in options and (sep or rest):
            options[option].append(value if sep else rest.pop(0))
        else:
            left.append(word)
    if len(left) == 2 and "=" not in left[1] and not left[1].startswith("-"):
        return [(left[0], left[1])], [], options
    entries: list[tuple[str, str]] = []
    unread: list[str] = []
    for word in left:
        tool, sep, side_effect = word.rpartition("=")
        if sep and tool:
            entries.append((tool, side_effect))
        else:
            unread.append(word)
    return entries, unread, options


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
    unread: Sequence[str] = (),
) -> dict[str, SideEffect]:
    """Each tool's class under ``config`` (rules 2 and 3), in the order named, then pinned."""
    found = config.servers.get(server)
    if found is None:
        raise ClassificationRefused(f"no server {server}", (f"no server {server}",))
    problems = [f"{word!r} is not TOOL=CLASS" for word in unread]
    named = [tool for tool, _ in entries]
    classes: dict[str, SideEffect] = {}
    for tool, text in entries:
        if named.count(tool) > 1:
            twice = f"{tool} is named more than once"
            if twice not in problems:
                problems.append(twice)
            continue
        side_effect = _side_effect(text)
        if side_effect is None:
            problems.append(_not_a_class(text, tool))
        else:
            classes[tool] = side_effect
    if rest is not None and every is not None:
        problems.append("--rest and --all cannot be given together")
    elif rest is not None or every is not None:
        option, text = ("--all", every) if every is not None else ("--rest", rest or "")
        fill = _side_effect(text)
        pinned = [tool for tool, cfg in found.tools.items() if cfg.pin is not None]
        if fill is None:
            problems.append(_not_a_class(text, option))
        if not pinned:
            problems.append(f"{option}: {server} has no pinned tool (`signoff pin {server}` first)")
        for tool in pinned:
            left = every is not None or found.tools[tool].side_effect is None
            if fill is not None and left and tool not in named:
                classes[tool] = fill
    elif not entries and not unread:
        problems.append("nothing to classify: give TOOL=CLASS, or --rest CLASS, or --all CLASS")
    if problems:
        raise ClassificationRefused(
            f"nothing classified ({len(problems)} problem{'s' if len(problems) > 1 else ''}):"
            f" {'; '.join(problems)}",
            tuple(problems),
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
