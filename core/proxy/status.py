"""The last time each server was connected to, and what it listed or why it failed.

A proxy launched by a host has no window: when its server fails to start, the operator would
never see why. The proxy and ``signoff servers test`` write the outcome of each connection here
(one small JSON file per server under ``<data dir>/status/``); the settings dialog reads it to
show each server's state without starting it.

Rules:

1. Best effort: a status that cannot be written is logged, never raised (the call it
   describes matters more than the note about it).
2. A status file that cannot be read is treated as absent.
3. It holds the tools' names, pins and annotations as listed, and the pin of the server's
   instructions when the connection's handshake was given: enough to tell new, pinned and
   changed tools and instructions and annotation conflicts apart against the configuration,
   not their texts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import private_files
from core.errors import UnsafePermissions
from core.proxy import instructions
from core.proxy.config import ServerConfig
from core.proxy.pins import Listing, conflict
from core.store import utc_now

log = logging.getLogger("signoff.proxy")


@dataclass(frozen=True)
class ServerStatus:
    at: str
    error: str = ""  # "" when the connection worked
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> pin, annotations
    instructions: str | None = None  # the pin of the instructions sent; None: none, or unknown

    def summary(self, server: ServerConfig) -> dict[str, int]:
        """Counts of the listed tools by state under ``server``'s configuration, and whether its
        instructions need reviewing (1: new or changed)."""
        counts = {"pinned": 0, "new": 0, "changed": 0, "unclassified": 0, "conflicts": 0}
        counts["instructions"] = int(self.instructions not in (None, server.instructions_pin))
        for name, listed in self.tools.items():
            cfg = server.tools.get(name)
            if cfg is None or cfg.pin is None:
                counts["new"] += 1
            elif cfg.pin == listed.get("pin"):
                counts["pinned"] += 1
            else:
                counts["changed"] += 1
            if cfg is None or cfg.side_effect is None:
                counts["unclassified"] += 1
            elif (
                conflict(cfg.side_effect, listed.get("annotations") or {})
                and not cfg.overrule_annotations
            ):
                counts["conflicts"] += 1
        return counts


def _path(directory: Path, server: str) -> Path:
    return directory / f"{server}.json"


def record(
    directory: Path,
    server: str,
    listing: Listing | None,
    error: str = "",
    handshake: Mapping[str, Any] | None = None,
) -> None:
    """The outcome of a connection (``handshake``: its ``initialize`` result, when known); a
    failed one keeps what the last good one listed, and so does one without a handshake for the
    instructions."""
    before = read(directory, server) if listing is None or handshake is None else None
    if listing is not None:
        tools = {t.name: {"pin": t.pin, "annotations": t.annotations} for t in listing.tools}
    else:
        tools = before.tools if before else {}
    if handshake is not None:
        pin = instructions.evaluate(handshake, None).pin
    else:
        pin = before.instructions if before else None
    status = {"at": utc_now(), "error": error, "tools": tools, "instructions": pin}
    try:
        private_files.write_text(_path(directory, server), json.dumps(status, ensure_ascii=False))
    except (OSError, UnsafePermissions) as e:
        log.warning("could not record the status of server %s: %s", server, e)


def read(directory: Path, server: str) -> ServerStatus | None:
    try:
        text = private_files.read_text(_path(directory, server), "server status")
        if text is None:
            return None
        value = json.loads(text)
        pin = value.get("instructions")
        return ServerStatus(str(value["at"]), str(value.get("error", "")), dict(value["tools"]),
                            pin if isinstance(pin, str) else None)  # fmt: skip
    except (OSError, UnsafePermissions, ValueError, KeyError, TypeError):
        return None
