"""A small MCP server speaking raw newline-delimited JSON-RPC, scripted to misbehave on demand.

    python fake_server.py SCRIPT.json

SCRIPT holds:
  "listing": the exact text of the ``tools`` array to send (raw bytes matter for pins),
  "notes": a file the ``write_note`` tool appends to (its side effect, visible outside),
  "before_listing": lines to print before the tools/list answer (garbage, non-UTF-8 as hex),
  "on_call": {tool: "die" | "hang" | "error" | "ok" | "oversize" | "not_object" |
  "write_then_hang"} (default ok): "die", "oversize", "not_object" and "write_then_hang"
  perform write_note first, then die, answer with a line over 8 MiB, answer a result that is
  not an object, or never answer,
  "list_changed": true to send notifications/tools/list_changed after listing.
Tools it answers: read_note (returns the notes), write_note(text) (appends), anything else
echoes its arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def send(obj: object) -> None:
    sys.stdout.buffer.write(json.dumps(obj).encode() + b"\n")
    sys.stdout.buffer.flush()


def send_raw(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    script = json.loads(Path(sys.argv[1]).read_text())
    notes = Path(script.get("notes", os.devnull))
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, mid = message.get("method"), message.get("id")
        if mid is None:
            continue
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "fake", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            for hexline in script.get("before_listing", []):
                send_raw(bytes.fromhex(hexline))
            send_raw(
                b'{"jsonrpc":"2.0","id":'
                + json.dumps(mid).encode()
                + b',"result":{"tools":'
                + script["listing"].encode()
                + b"}}"
            )
            if script.get("list_changed"):
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif method == "tools/call":
            name = message["params"]["name"]
            args = message["params"].get("arguments") or {}
            behaviour = script.get("on_call", {}).get(name, "ok")
            if behaviour == "die":
                if name == "write_note":
                    with notes.open("a") as f:
                        f.write(args.get("text", "") + "\n")
                os._exit(3)
            if behaviour in ("oversize", "not_object", "write_then_hang") and name == "write_note":
                with notes.open("a") as f:
                    f.write(args.get("text", "") + "\n")
            if behaviour == "oversize":
                send_raw(
                    b'{"jsonrpc":"2.0","id":'
                    + json.dumps(mid).encode()
                    + b',"result":'
                    + b'{"content":[{"type":"text","text":"'
                    + b"x" * (9 << 20)
                    + b'"}]}}'
                )
                continue
            if behaviour == "not_object":
                send({"jsonrpc": "2.0", "id": mid, "result": "done"})
                continue
            if behaviour in ("hang", "write_then_hang"):
                time.sleep(3600)
            if behaviour == "error":
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": mid,
                        "error": {"code": -32000, "message": "the fake server refuses"},
                    }
                )
                continue
            if name == "read_note":
                text = notes.read_text() if notes.exists() else ""
            elif name == "write_note":
                with notes.open("a") as f:
                    f.write(args.get("text", "") + "\n")
                text = f"wrote {args.get('text', '')!r}"
            else:
                text = json.dumps(args)
            send(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {"content": [{"type": "text", "text": text}], "isError": False},
                }
            )
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})


if __name__ == "__main__":
    main()
