"""A server as Signoff knows it, for the wiring tests: its listing, what is pinned and classified,
and what it listed at its last connection."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.proxy import manage, status
from core.proxy.pins import Listing, read_listing
from core.tools import SideEffect

# The filesystem server's fourteen tools, as in the issue that asked for the wiring's warning.
FILESYSTEM_TOOLS = (
    "read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file",
    "edit_file", "create_directory", "list_directory", "list_directory_with_sizes",
    "directory_tree", "move_file", "search_files", "get_file_info", "list_allowed_directories",
)  # fmt: skip


def listing(names: Sequence[str], hints: Mapping[str, dict[str, Any]] | None = None) -> Listing:
    """A server's listing of ``names``, each with ``hints`` (its annotations) when given."""
    tools = []
    for name in names:
        tool: dict[str, Any] = {
            "name": name,
            "description": f"The {name} tool",
            "inputSchema": {"type": "object", "properties": {}},
        }
        if hints and name in hints:
            tool["annotations"] = hints[name]
        tools.append(tool)
    page = {"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}}
    return read_listing([json.dumps(page).encode()])


def set_up(
    config_path: Path,
    name: str,
    argv: Sequence[str],
    pinned: Listing | None = None,
    classes: Mapping[str, SideEffect] | None = None,
) -> None:
    """Add the server, pin the tools of ``pinned`` and give the tools of ``classes`` a class, as
    ``signoff servers add``, ``signoff pin --accept`` and ``signoff classify`` do."""
    manage.add_server(config_path, name, argv[0], argv[1:])
    if pinned is not None:
        manage.pin(config_path, name, pinned.tools)
    for tool, side_effect in (classes or {}).items():
        manage.set_tool(config_path, name, tool, side_effect=side_effect)


def last_listed(home: Path, name: str, seen: Listing) -> None:
    """What the server listed at its last connection, as the proxy records it."""
    status.record(home / "status", name, seen)
