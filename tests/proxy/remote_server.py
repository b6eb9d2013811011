"""A remote MCP server for the tests: the mcp SDK's own Streamable HTTP app, served by uvicorn on
127.0.0.1 at a free port, which it writes to PORT_FILE once it listens.

    python remote_server.py PORT_FILE NOTES_FILE [PORT]

It answers only requests carrying ``Authorization: Bearer $REMOTE_TOKEN`` (401 otherwise), or,
with $REMOTE_API_KEY set, only requests whose URL's query has ``api_key=$REMOTE_API_KEY``.
Tools: read_note (read-only: the notes; its description is $NOTES_DESCRIPTION when set, to
reword it after pinning) and write_note(text) (appends a line to the notes). With
$REMOTE_JSON=1 it answers each request with a JSON body rather than an event stream.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def build(notes: Path) -> Any:
    server = MCPServer("remote-notes")

    @server.tool(
        description=os.environ.get("NOTES_DESCRIPTION", "Read the notes"),
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    def read_note() -> str:
        return notes.read_text()

    @server.tool(description="Append a line to the notes")
    def write_note(text: str) -> str:
        with notes.open("a") as f:
            f.write(text + "\n")
        return f"wrote {text!r}"

    return server.streamable_http_app(json_response=os.environ.get("REMOTE_JSON") == "1")


def bearer_only(app: Any, token: str) -> Any:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b"no"})
            return
        await app(scope, receive, send)

    return guarded


def key_only(app: Any, key: str) -> Any:
    expected = f"api_key={key}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and expected not in scope["query_string"].split(b"&"):
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b"no"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    port_file, notes = Path(sys.argv[1]), Path(sys.argv[2])
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # again at the same: its sessions gone
    key = os.environ.get("REMOTE_API_KEY")
    app = (
        key_only(build(notes), key)
        if key
        else bearer_only(build(notes), os.environ["REMOTE_TOKEN"])
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    written = port_file.with_suffix(".tmp")
    written.write_text(str(sock.getsockname()[1]))

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        written.rename(port_file)  # whole, and only once it listens
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
