"""What a host keeps of a server's tools once it is wired to ``signoff proxy`` (decision 0043).

Today the host talks to the real server and has every tool it lists. Once wired it has only the
tools Signoff offers (core/proxy/offered.py): pinned, unchanged, classified, and free of hints
that contradict their class. This module says, per server, which tools those are and which the
host would lose, from what Signoff already knows: it starts no server.

Rules:

1. The tools the host has today are, in this order of preference: the server's listing as
   Signoff last saw it (core/proxy/status.py: written by the proxy, by a connection test in the
   window and by ``signoff servers test``), else the tools pinned in the configuration, else
   unknown. Unknown is said as unknown, never as "none".
2. A tool of that listing is offered when its configured pin is the one listed (with the pins
   alone: when it is pinned), it has a class, and (with the listing's hints) the hints do not
   contradict the class unless the operator overruled them. Every other tool waits, with why:
   not pinned, changed since pinned, not classified, or hints that disagree.
3. The host loses tools when a tool of today's listing would not be offered, and also when the
   listing is unknown: a server with nothing pinned offers nothing, whatever it lists.
4. Pure: ``judge`` takes the configuration and the listing; ``of_server`` reads the status file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.hosts import HostConfigError
from core.proxy import status
from core.proxy.config import Config, ServerConfig
from core.proxy.pins import conflict


class ToolsWouldBeLost(HostConfigError):
    """Wiring would take tools away from the host (rule 3) and the operator did not confirm
    it; nothing was written. The message names the tools and what makes them offered."""


# Why a tool waits, as (one tool, several tools), in the order they are said.
UNPINNED = "unpinned"
CHANGED = "changed"
UNCLASSIFIED = "unclassified"
HINTS = "hints"
WAITS = {
    UNPINNED: ("waits for you to pin it", "wait for you to pin them"),
    CHANGED: ("changed since you pinned it", "changed since you pinned them"),
    UNCLASSIFIED: ("waits for you to classify it", "wait for you to classify them"),
    HINTS: (
        "has server hints that disagree with its class",
        "have server hints that disagree with their class",
    ),
}


@dataclass(frozen=True)
class ServerTools:
    """One host entry being wired, and what its host keeps of the server's tools."""

    key: str  # the host's entry
    server: str  # the Signoff server it will launch
    in_signoff: bool  # False: wiring imports it now
    today: tuple[str, ...] | None  # the tools the host has today; None: unknown (rule 1)
    seen: str = ""  # where ``today`` comes from, for the operator
    offered: tuple[str, ...] = ()
    waiting: dict[str, tuple[str, ...]] = field(default_factory=dict)  # why -> tools
    classless: tuple[str, ...] = ()  # the tools of ``today`` with no class, pinned or not

    @property
    def lost(self) -> tuple[str, ...]:
        """The tools the host has today that Signoff would not offer."""
        return tuple(t for t in self.today or () if t not in self.offered)

    @property
    def loses(self) -> bool:
        """Whether wiring takes tools away from the host (rule 3)."""
        return self.today is None or bool(self.lost)

    def sentence(self, names: bool = True) -> str:
        """What wiring does to the host's tools, in plain words and no commands (``names``: the
        waiting tools named too, not only counted)."""
        if self.today is None:
            why = (
                "Signoff has not listed or pinned this server's tools yet"
                if self.in_signoff
                else "Signoff does not have this server yet"
            )
            return (
                f"{why}, so it cannot tell which tools the host has today; through Signoff, the"
                " host is offered none of them until you pin and classify them"
            )
        count = len(self.today)
        parts = [f"the host has {_count(count, 'tool')} today ({self.seen})"]
        if not self.today:
            return parts[0]
        if len(self.offered) == count:
            parts.append(f"Signoff will offer all of them ({_names(self.offered)})")
        elif self.offered:
            parts.append(f"Signoff will offer {len(self.offered)} ({_names(self.offered)})")
        else:
            parts.append("Signoff will offer none of them")
        for why, (one, several) in WAITS.items():
            tools = self.waiting.get(why, ())
            if tools:
                said = one if len(tools) == 1 else several
                parts.append(f"{len(tools)} {said}" + (f" ({_names(tools)})" if names else ""))
        return "; ".join(parts)


def judge(
    key: str,
    name: str,
    server: ServerConfig | None,
    listed: Mapping[str, Mapping[str, Any]] | None,
    at: str = "",
) -> ServerTools:
    """What the host keeps of ``server``'s tools (None: not in Signoff yet), given its listing
    as last seen at ``at`` (``listed``: tool name -> pin and annotations; None: never seen)."""
    if server is None:
        return ServerTools(key, name, False, None)
    waiting: dict[str, list[str]] = {why: [] for why in WAITS}
    offered: list[str] = []
    if listed is not None:
        today = tuple(listed)
        seen = f"as {name} listed them at {at[:16].replace('T', ' ')} UTC" if at else "as listed"
        for tool, listing in listed.items():
            why = _waits(server, tool, listing)
            (waiting[why] if why else offered).append(tool)
    else:
        today = tuple(t for t, cfg in server.tools.items() if cfg.pin is not None)
        if not today:
            return ServerTools(key, name, True, None)
        seen = "as you pinned them"
        for tool in today:
            cfg = server.tools[tool]
            (offered if cfg.side_effect is not None else waiting[UNCLASSIFIED]).append(tool)
    classless = tuple(t for t in today if getattr(server.tools.get(t), "side_effect", None) is None)
    waits = {why: tuple(tools) for why, tools in waiting.items() if tools}
    return ServerTools(key, name, True, today, seen, tuple(offered), waits, classless)


def _waits(server: ServerConfig, tool: str, listing: Any) -> str:
    """Why a listed tool is not offered (rule 2), or ""."""
    listing = listing if isinstance(listing, Mapping) else {}  # a status file is best effort
    cfg = server.tools.get(tool)
    if cfg is None or cfg.pin is None:
        return UNPINNED
    if cfg.pin != listing.get("pin"):
        return CHANGED
    if cfg.side_effect is None:
        return UNCLASSIFIED
    hints = listing.get("annotations")
    if isinstance(hints, dict) and conflict(cfg.side_effect, hints):
        return "" if cfg.overrule_annotations else HINTS
    return ""


def of_server(key: str, name: str, config: Config, status_dir: Path) -> ServerTools:
    """``judge`` with the server's listing as last seen (rule 1)."""
    server = config.servers.get(name)
    last = status.read(status_dir, name) if server is not None else None
    if last is None or (last.error and not last.tools):
        return judge(key, name, server, None)
    return judge(key, name, server, last.tools, last.at)


def after_wiring(wired: Mapping[str, str], config: Config, status_dir: Path) -> list[ServerTools]:
    """For each host entry being wired (entry key -> Signoff server), what its host keeps."""
    return [of_server(key, name, config, status_dir) for key, name in wired.items()]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _names(tools: tuple[str, ...]) -> str:
    return ", ".join(tools)
