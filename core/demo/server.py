"""The demo's MCP server: notes in one folder, over stdio.

Run as ``python -m core.demo.server FOLDER``. Tools:

- ``list_notes()`` and ``read_note(name)``: read-only (``readOnlyHint: true``);
- ``write_note(name, text)``: creates or replaces a note (``readOnlyHint: false``,
  ``destructiveHint: false``);
- ``delete_note(name)``: removes a note (``destructiveHint: true``).

A note's name stays inside the folder: a name with a path separator, a NUL, ``..``, a leading
dot, or one that is a symbolic link is refused with an error result, and nothing is touched.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import mcp_types as types

MAX_NAME = 128
MAX_TEXT = 64 * 1024

_NAME = {"type": "string", "description": "the note's file name, e.g. ideas.md"}

TOOLS = [
    types.Tool(
        name="list_notes",
        description="Lists the notes in the notes folder, one name a line.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="read_note",
        description="Returns the text of one note.",
        input_schema={
            "type": "object",
            "properties": {"name": _NAME},
            "required": ["name"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="write_note",
        description="Writes a note: creates it, or replaces its text if it exists.",
        input_schema={
            "type": "object",
            "properties": {"name": _NAME, "text": {"type": "string"}},
            "required": ["name", "text"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
    types.Tool(
        name="delete_note",
        description="Deletes a note. It cannot be undone.",
        input_schema={
            "type": "object",
            "properties": {"name": _NAME},
            "required": ["name"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
    ),
]


class Refused(Exception):
    """A call the server will not do; its message is the error result."""


class Notes:
    """The tools, without MCP: each call is ``(text, is_error)``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()

    def call(self, tool: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        args = arguments or {}
        try:
            if tool == "list_notes":
                return self.list_notes(), False
            if tool == "read_note":
                return self.read_note(_string(args, "name")), False
            if tool == "write_note":
                return self.write_note(_string(args, "name"), _string(args, "text")), False
            if tool == "delete_note":
                return self.delete_note(_string(args, "name")), False
            raise Refused(f"there is no tool {tool!r}")
        except Refused as e:
            return str(e), True
        except OSError as e:
            return f"{tool} failed: {e.strerror or e}", True

    def path(self, name: str) -> Path:
        """The note's path, or ``Refused`` when the name would leave the folder."""
        if not name or len(name) > MAX_NAME:
            raise Refused(f"a note's name is 1 to {MAX_NAME} characters")
        if "/" in name or "\\" in name or "\0" in name or ".." in name or name.startswith("."):
            raise Refused(
                f"refused {name!r}: a note's name is a plain file name, with no path"
                " separator, no '..' and no leading dot"
            )
        path = self.folder / name
        if path.is_symlink() or path.parent != self.folder:
            raise Refused(f"refused {name!r}: it is not a note inside the notes folder")
        return path

    def list_notes(self) -> str:
        names = sorted(
            p.name
            for p in self.folder.iterdir()
            if p.is_file() and not p.is_symlink() and not p.name.startswith(".")
        )
        return "\n".join(names) if names else "(no notes)"

    def read_note(self, name: str) -> str:
        path = self.path(name)
        if not path.is_file():
            raise Refused(f"there is no note {name!r}")
        return path.read_text(encoding="utf-8", errors="replace")

    def write_note(self, name: str, text: str) -> str:
        path = self.path(name)
        data = text.encode("utf-8")
        if len(data) > MAX_TEXT:
            raise Refused(f"a note is at most {MAX_TEXT} bytes")
        existed = path.exists()
        path.write_bytes(data)
        return f"{'replaced' if existed else 'wrote'} {name} ({len(data)} bytes)"

    def delete_note(self, name: str) -> str:
        path = self.path(name)
        if not path.is_file():
            raise Refused(f"there is no note {name!r}")
        path.unlink()
        return f"deleted {name}"


def _string(arguments: dict[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise Refused(f"{key} must be a string")
    return value


async def serve(folder: Path) -> None:
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    notes = Notes(folder)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text, error = notes.call(params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=error
        )

    server: Server[Any] = Server(
        "signoff-demo-notes",
        version="0.1",
        instructions="Notes in one folder, for the Signoff demo.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m core.demo.server FOLDER", file=sys.stderr)
        return 2
    folder = Path(args[0])
    if not folder.is_dir():
        print(f"{folder} is not a folder", file=sys.stderr)
        return 2
    asyncio.run(serve(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
