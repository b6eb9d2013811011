"""The tools the proxy offers the host, by the names the host calls them.

Rules:

1. Only tools that are pinned, unchanged, classified and free of annotation conflicts are
   offered (core/proxy/pins.py), under the configuration in force. With one server the tool
   names are unchanged; with several they are ``server__tool``, and a collision refuses the
   later tool. ``signoff_status`` (read-only, answered by the proxy) lists what waits; an
   upstream tool of that name is refused. A server no longer configured offers nothing.
2. Each offered tool is shown to the host as the server listed it (``listing``): its name (the
   exposed one), then its title, description, input schema (fixed and denied parameters
   removed), output schema, annotations, ``execution`` and ``_meta``, each only when the
   server sent it, in that order. The title and output schema are shown only when its pin
   covers them (core/proxy/pins.py rules 1 and 2); ``icons`` are never shown (rule 6 there).
3. The set is evaluated again, whole, when the configuration in force changes or a server's
   listing is read again (``retake``): a tool pinned and unchanged stays offered as it was, a
   new or changed one waits for the operator (core/proxy/review.py), and a tool the operator
   has since pinned and classified is offered. Whether the host's listing changed is said, so
   that the host is told (core/proxy/server.py rule 5).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

    @property
    def declares_output_schema(self) -> bool:
        """Whether the host is shown an output schema for it: a host's client then checks its
        answers' ``structuredContent`` against it, unless ``isError`` is true."""
        return self.state.output_schema is not None

    def shown(self) -> dict[str, Any]:
        """The tool as the host is shown it (rule 2): a JSON object, ready to be written."""
        state, tool = self.state, self.state.tool
        shown: dict[str, Any] = {"name": self.name}
        if state.title is not None:
            shown["title"] = state.title
        if "description" in tool.sent:
            shown["description"] = tool.description
        shown["inputSchema"] = state.exposed_schema
        for key, value in (
            ("outputSchema", state.output_schema),
            ("annotations", tool.annotations if "annotations" in tool.sent else None),
            ("execution", tool.execution),
            ("_meta", tool.meta),
        ):
            if value is not None:
                shown[key] = value
        return shown


class Offered:
    """The tools offered (``exposed``), and why each other name the host may call is not
    (``refused``), for the servers ``names``, as ``configured`` (rule 3: evaluated again)."""

    def __init__(self, names: list[str], configured: Mapping[str, ServerConfig]) -> None:
        self.names = names
        self.configured = configured
        self.exposed: dict[str, Exposed] = {}
        self.refused: dict[str, str] = {}  # why, by the name the host would call it

    def expose(self, listings: Mapping[str, Listing]) -> None:
        several = len(self.names) > 1
        for name in self.names:
            listing, server = listings.get(name), self.configured.get(name)
            if listing is None or server is None:
                continue
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

    def retake(
        self, configured: Mapping[str, ServerConfig], listings: Mapping[str, Listing]
    ) -> bool:
        """The set under ``configured``, from ``listings`` (rule 3): whether the host's
        listing changed."""
        before = self.listing()
        self.configured = configured
        self.exposed, self.refused = {}, {}
        self.expose(listings)
        return self.listing() != before

    def withdraw(self, server: str, listing: Listing, tool: str) -> str:
        """A restarted server's whole new listing checked against the pins: every offered tool
        of it that changed stops being offered, not only the one being called (a reworded
        tool could now say it is destructive). Why ``tool`` was withdrawn, or ""."""
        listed = {t.name: t for t in listing.tools}
        configured = self.configured[server].tools if server in self.configured else {}
        withdrawn = ""  # why the tool being called was, if it was
        for exposed in [e for e in self.exposed.values() if e.server == server]:
            name = exposed.state.tool.name
            now = listed.get(name)
            state = evaluate(now, configured.get(name)) if now is not None else None
            if state is None:
                why = "is no longer listed"
            elif state.status != "pinned":  # the pin in force now
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

    def listing(self) -> list[dict[str, Any]]:
        """The tools as the host is shown them, JSON objects ready to be written: Signoff's own
        status tool first, then each offered tool (rule 2)."""
        status = {
            "name": STATUS_TOOL,
            "description": "Lists the requests this host made that wait for the operator's"
            " decision, with their approval ids. Read-only.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True},
        }
        return [status, *(exposed.shown() for exposed in self.exposed.values())]
