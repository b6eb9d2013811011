"""The tools that wait for the operator's review, server by server: what the tray tells.

A running proxy offers only what the operator pinned and classified; a tool a server added or
changed while it runs waits (core/proxy/offered.py rule 3). The operator learns of it here.

Rules:

1. A tool waits when the server's last listing (its status, core/proxy/status.py: written by
   the proxy as it starts and each time it lists again, and by ``signoff servers test``) holds
   it and the configuration does not let it be offered for a reason a review settles: not
   pinned, changed since it was pinned, not classified, or its annotations contradict its class
   and are not overruled.
2. Read from the status files and the configuration alone: no server is started, nothing is
   written. A server with no status, or one that cannot be read, has nothing shown waiting.
3. Once the operator pins and classifies the tools, nothing waits: the notice is gone at the
   next reading, with no listing needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.proxy import status
from core.proxy.config import Config, ServerConfig
from core.proxy.pins import conflict


@dataclass(frozen=True)
class Waiting:
    """A server whose listed ``tools`` wait for the operator's review."""

    server: str
    tools: tuple[str, ...]

    def words(self) -> str:
        count = len(self.tools)
        return f"{self.server} has {count} tool{'s' if count != 1 else ''} to review"


def waiting_tools(listed: status.ServerStatus, server: ServerConfig) -> tuple[str, ...]:
    """The tools of the last listing that wait (rule 1), in the order listed."""
    found = []
    for name, seen in listed.tools.items():
        cfg = server.tools.get(name)
        pin = seen.get("pin") if isinstance(seen, dict) else None
        hints = seen.get("annotations") if isinstance(seen, dict) else None
        if cfg is None or cfg.pin is None or cfg.pin != pin or cfg.side_effect is None:
            found.append(name)
            continue
        clash = conflict(cfg.side_effect, hints if isinstance(hints, dict) else {})
        if clash and not cfg.overrule_annotations:
            found.append(name)
    return tuple(found)


def waiting(status_dir: Path, config: Config) -> tuple[Waiting, ...]:
    """The configured servers with tools waiting (rules 1-2), in the configuration's order."""
    found = []
    for name, server in config.servers.items():
        listed = status.read(status_dir, name)
        tools = waiting_tools(listed, server) if listed is not None else ()
        if tools:
            found.append(Waiting(name, tools))
    return tuple(found)
