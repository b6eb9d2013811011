"""What the tools page says of each tool and each server, in words, without Qt.

Rules:

1. A tool is *offered* when the proxy would serve it (``core.proxy.pins.evaluate``); a listed
   tool that is not is *waiting for you*: every reason it is not offered (not pinned, changed
   since pinned, no class, hints that disagree, a parameter setting the schema refuses) is the
   operator's to resolve.
2. A server's counts are those of its tools as listed in this window; without a listing here,
   as listed at its last connection (its status file, which keeps pins and hints, not schemas:
   a tool counted offered there may still be refused for its parameters); without either,
   unknown, and said so.
3. Why a tool is not offered is said in words, never as a command to type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.words import class_words
from core import paths
from core.proxy import status
from core.proxy.config import Config, ServerConfig
from core.proxy.pins import Listing, ToolState, conflict, evaluate
from core.tools import SideEffect


@dataclass(frozen=True)
class Tally:
    """A server's listed tools: how many are offered and how many wait for the operator."""

    listed: int
    offered: int
    unpinned: int  # new, or changed since pinned
    unclassified: int
    when: str = ""  # "" when listed in this window, else the last connection's time

    @property
    def waiting(self) -> int:
        return self.listed - self.offered

    def short(self) -> str:
        """For the server picker: ``3 offered, 11 waiting for you``."""
        return f"{self.offered} offered, {self.waiting} waiting for you"

    def long(self) -> str:
        """For the page's header: the counts, what the waiting tools need, and when seen."""
        needs = [
            f"{self.unpinned} not pinned" if self.unpinned else "",
            f"{self.unclassified} without a class" if self.unclassified else "",
        ]
        said = ", ".join(n for n in needs if n)
        seen = f" (as listed at its last connection, {self.when})" if self.when else ""
        return (
            f"{self.offered} of {self.listed} tools offered to hosts,"
            f" {self.waiting} waiting for you{f': {said}' if said else ''}{seen}."
        )


def from_listing(server: ServerConfig, listing: Listing) -> Tally:
    states = [evaluate(tool, server.tools.get(tool.name)) for tool in listing.tools]
    return Tally(
        listed=len(states),
        offered=sum(s.available for s in states),
        unpinned=sum(s.status != "pinned" for s in states),
        unclassified=sum(s.side_effect is None for s in states),
    )


def from_status(server: ServerConfig, last: status.ServerStatus) -> Tally:
    offered = unpinned = unclassified = 0
    for name, listed in last.tools.items():
        cfg = server.tools.get(name)
        pinned = cfg is not None and cfg.pin is not None and cfg.pin == listed.get("pin")
        side_effect = cfg.side_effect if cfg is not None else None
        unpinned += not pinned
        unclassified += side_effect is None
        hints = listed.get("annotations")
        clash = conflict(side_effect, hints) if side_effect and isinstance(hints, dict) else ""
        overruled = cfg is not None and cfg.overrule_annotations
        offered += pinned and side_effect is not None and (not clash or overruled)
    when = last.at[:19].replace("T", " ") + " UTC"
    return Tally(len(last.tools), offered, unpinned, unclassified, when)


def tally(
    server: ServerConfig, listing: Listing | None, last: status.ServerStatus | None
) -> Tally | None:
    """The server's counts (rule 2), or None when its tools were never listed."""
    if listing is not None:
        return from_listing(server, listing)
    if last is not None and last.tools:
        return from_status(server, last)
    return None


def of_server(config: Config, listings: Mapping[str, Listing], name: str) -> Tally | None:
    """The counts of server ``name``: from its listing here, else its last connection's."""
    server = config.servers.get(name)
    if server is None:
        return None
    listing = listings.get(name)
    last = None if listing else status.read(paths.data_dir() / "status", name)
    return tally(server, listing, last)


def offered_words(state: ToolState) -> str:
    """Whether the tool is offered, and if not why, in words (rules 1 and 3)."""
    if state.available:
        return "yes"
    if state.status == "new":
        return "no: not pinned yet"
    if state.status == "changed":
        return "no: changed since you pinned it; review the changes"
    if state.side_effect is None:
        return "no: it has no class yet"
    if state.conflict:
        return "no: the server's hints disagree with its class"
    return f"no: {state.reason}"


def class_text(side_effect: SideEffect | None) -> str:
    return class_words(side_effect) if side_effect is not None else "no class"
