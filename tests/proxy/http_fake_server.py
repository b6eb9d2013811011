"""A remote MCP server over HTTP that misbehaves on demand: the HTTP counterpart of
fake_server.py, answering with bytes the test chose.

    python http_fake_server.py PORT_FILE SCRIPT.json

SCRIPT holds:
  "listing": the exact bytes (as text) of the tools/list answer's JSON-RPC message, sent as one
  SSE event whose data lines are its lines (so a pretty-printed message spans several);
  "notes": a file write_note appends its text to (its side effect, visible outside);
  "on_call" (read at each request): {tool: "ok" | "cut" | "html" | "accepted" | "oversize" |
  "oversize_events"}: answer; perform the call, then end the
  event stream with no answer; answer 200 with a web page; answer 202 Accepted; answer with
  17 MiB, as a JSON body or as one event.
  "own_stream": a message sent as the one event of the server's own stream (GET), which then
  ends; without it GET is answered 405.
initialize is answered with a JSON body and a session id; notifications and answers with 202;
DELETE with 200.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn

SESSION = "fake-session-1"


def main() -> None:
    port_file, script_path = Path(sys.argv[1]), Path(sys.argv[2])

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            part = await receive()
            body += part.get("body", b"")
            if not part.get("more_body"):
                break

        async def answer(
            status: int, kind: bytes, data: bytes, *extra: tuple[bytes, bytes]
        ) -> None:
            headers = [(b"content-type", kind), *extra] if kind else list(extra)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": data})

        script = json.loads(script_path.read_text())  # read at each request: changed by tests
        notes = Path(script["notes"])
        if scope["method"] == "GET" and "own_stream" in script:
            data = json.dumps(script["own_stream"]).encode()
            await answer(200, b"text/event-stream", b"data: " + data + b"\n\n")
            return
        if scope["method"] != "POST":
            await answer(200 if scope["method"] == "DELETE" else 405, b"", b"")
            return
        message = json.loads(body)
        method = message.get("method")
        if "id" not in message or method is None:
            await answer(202, b"", b"")
            return
        events = b"text/event-stream"
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "http-fake", "version": "1"}}  # fmt: skip
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            await answer(200, b"application/json", json.dumps(reply).encode(),
                         (b"mcp-session-id", SESSION.encode()))  # fmt: skip
            return
        if method == "tools/list":
            raw = script["listing"].replace('"id": 0', f'"id": {message["id"]}').encode()
            data = b"".join(b"data: " + line + b"\n" for line in raw.split(b"\n"))
            await answer(200, events, b"event: message\n" + data + b"\n")
            return
        name = message["params"]["name"]
        behaviour = script.get("on_call", {}).get(name, "ok")
        if name == "write_note":
            with notes.open("a") as f:
                f.write(message["params"]["arguments"]["text"] + "\n")
        if behaviour == "cut":
            await answer(200, events, b": the answer never comes\n\n")
            return
        if behaviour == "html":
            await answer(200, b"text/html", b"<html><body>Sign in</body></html>")
            return
        if behaviour == "accepted":
            await answer(202, b"", b"")
            return
        if behaviour.startswith("oversize"):  # 17 MiB of text, over the 16 MiB Signoff reads
            result = {"content": [{"type": "text", "text": "x" * (17 << 20)}]}
            reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            if behaviour == "oversize_events":
                await answer(200, events, b"data: " + reply + b"\n\n")
            else:
                await answer(200, b"application/json", reply)
            return
        text = notes.read_text() if name == "read_note" else f"wrote {name}"
        result = {"content": [{"type": "text", "text": text}]}
        reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        await answer(200, events, b"data: " + reply + b"\n\n")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    written = port_file.with_suffix(".tmp")
    written.write_text(str(sock.getsockname()[1]))

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        written.rename(port_file)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
