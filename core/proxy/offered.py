"""The tools the proxy offers the host, by the names the host calls them.

Rules:

1. Only tools that are pinned, unchanged, classified and free of annotation conflicts are
   offered (core/proxy/pins.py); the set is fixed at start. With one server the tool names are
   unchanged; with several they are ``server__tool``, and a collision refuses the later tool.
   ``signoff_status`` (read-only, answered by the proxy) lists what waits; an upstream tool of
   that name is refused.
2. Results are flattened to text (core/proxy/answers.py: non-text content summarised) and
   capped at 64 KiB with a marker. No ``outputSchema`` is offered to the host, so no host
   raises on a prose answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import mcp_types as types

from core.proxy.answers import STATUS_TOOL
from core.proxy.config import ServerConfig
from core.proxy.pins import Listing, ToolState, evaluate

log = logging.getLogger("signoff.proxy")


@dataclass
class Exposed:
    """A tool offered to the host."""

    name: str  # as the host sees it
    server: str
    state: ToolState

    @property
    def gate_name(self) -> str:
        return f"{self.server}/{self.state.tool.name}"


class Offered:
    """The tools offered (``exposed``), and why each other name the host may call is not
    (``refused``), for the servers ``names``, as ``configured`` at start."""

    def __init__(self, names: list[str], configured: Mapping[str, ServerConfig]) -> None:
        self.names = names
        self.configured = configured
        self.exposed: dict[str, Exposed] = {}
        self.refused: dict[str, str] = {}  # why, by the name the host would call it

    def expose(self, listings: Mapping[str, Listing]) -> None:
        several = len(self.names) > 1
        for name in self.names:
            listing = listings.get(name)
            if listing is None:
                continue
            server = self.configured[name]
            for tool in listing.tools:
                state = evaluate(tool, server.tools.get(tool.name))
                exposed_name = f"{name}__{tool.name}" if several else tool.name
                if not state.available:
                    why = state.reason
                elif exposed_name == STATUS_TOOL:
                    why = f"{STATUS_TOOL} is Signoff's own tool"
                elif exposed_name in self.exposed:
                    why = f"another server's tool is already offered as {exposed_name}"
                else:
                    self.exposed[exposed_name] = Exposed(exposed_name, name, state)
                    continue
                self.refused.setdefault(exposed_name, why)
                log.warning("not offered: %s/%s: %s", name, tool.name, why)

    def withdraw(self, server: str, listing: Listing, tool: str) -> str:
        """A restarted server's whole new listing checked against the pins: every offered tool
        of it that changed stops being offered, not only the one being called (a reworded
        tool could now say it is destructive). Why ``tool`` was withdrawn, or ""."""
        listed = {t.name: t for t in listing.tools}
        configured = self.configured[server].tools
        withdrawn = ""  # why the tool being called was, if it was
        for exposed in [e for e in self.exposed.values() if e.server == server]:
            name = exposed.state.tool.name
            now = listed.get(name)
            state = evaluate(now, configured.get(name)) if now is not None else None
            if state is None:
                why = "is no longer listed"
            elif now is not None and now.pin != exposed.state.tool.pin:
                why = "changed since it was pinned"
            elif not state.available:
                why = state.reason
            else:
                continue
            del self.exposed[exposed.name]
            self.refused[exposed.name] = f"server {server} restarted, and {name} {why}"
            log.warning("no longer offered: %s", self.refused[exposed.name])
            if name == tool:
                withdrawn = self.refused[exposed.name]
        return withdrawn

    def why_not(self, name: str, problems: Mapping[str, str]) -> str:
        """Why ``name`` is not offered; ``problems``: why a server offers nothing."""
        if name in self.refused:
            return self.refused[name]
        server = name.split("__", 1)[0] if len(self.names) > 1 else self.names[0]
        if server in problems:
            return f"server {server} offers no tools: {problems[server]}"
        return "no such tool"

    def listing(self) -> list[types.Tool]:
        """The tools as the host is shown them: Signoff's own status tool first."""
        tools = [
            types.Tool(
                name=STATUS_TOOL,
                description="Lists the requests this host made that wait for the operator's"
                " decision, with their approval ids. Read-only.",
                input_schema={"type": "object", "properties": {}},
                annotations=types.ToolAnnotations(read_only_hint=True),
            )
        ]
        for exposed in self.exposed.values():
            tool = exposed.state.tool
            tools.append(
                types.Tool(
                    name=exposed.name,
                    description=tool.description,
                    input_schema=exposed.state.exposed_schema,
                )
            )
        return tools
