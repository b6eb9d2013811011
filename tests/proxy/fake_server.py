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
  "list_changed": true to send notifications/tools/list_changed after listing,
  "late": write_note acts, then answers after "delay" seconds (default 2) whether or not the
  call was cancelled meanwhile; "cancellable": write_note acts, then waits "delay" seconds
  for a cancellation, and answers only when none came; both keep reading requests meanwhile
  (ping is answered),
  "cancels": a file each notifications/cancelled received is appended to (its params as JSON),
  "starts": a file a line is appended to at each initialize (how often the server started),
  "calls": a file each tools/call line is appended to exactly as received (what reached it),
  "instructions": the ``instructions`` its initialize answer carries (none when absent).
Tools it answers: read_note (returns the notes), write_note(text) (appends), anything else
echoes its arguments.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

_writing = threading.Lock()  # answers of slow calls come from their own threads
_cancelled: dict[object, threading.Event] = {}


def send(obj: object) -> None:
    send_raw(json.dumps(obj).encode())


def send_raw(data: bytes) -> None:
    with _writing:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.buffer.flush()


def append(path: str | None, line: str) -> None:
    if path:
        with Path(path).open("a") as f:
            f.write(line + "\n")


def answer_text(mid: object, text: str) -> None:
    send({"jsonrpc": "2.0", "id": mid,
          "result": {"content": [{"type": "text", "text": text}], "isError": False}})  # fmt: skip


def slow(mid: object, text: str, delay: float, cancellable: bool) -> None:
    """Answers after ``delay`` s; a cancellable call told it is cancelled never answers."""
    if _cancelled[mid].wait(delay) and cancellable:
        return
    answer_text(mid, f"wrote {text!r}")


def main() -> None:
    script = json.loads(Path(sys.argv[1]).read_text())
    notes = Path(script.get("notes", os.devnull))
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, mid = message.get("method"), message.get("id")
        if method == "notifications/cancelled":
            params = message.get("params") or {}
            append(script.get("cancels"), json.dumps(params))
            _cancelled.setdefault(params.get("requestId"), threading.Event()).set()
            continue
        if mid is None:
            continue
        if method == "initialize":
            append(script.get("starts"), str(os.getpid()))
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
            if "instructions" in script:
                result["instructions"] = script["instructions"]
            send({"jsonrpc": "2.0", "id": mid, "result": result})
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
            if script.get("calls"):
                with Path(script["calls"]).open("ab") as f:
                    f.write(line.rstrip(b"\n") + b"\n")
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
            if behaviour in ("late", "cancellable") and name == "write_note":
                append(str(notes), args.get("text", ""))
                _cancelled.setdefault(mid, threading.Event())
                delay = float(script.get("delay", 2))
                threading.Thread(target=slow, args=(mid, args.get("text", ""), delay,
                                 behaviour == "cancellable"), daemon=True).start()  # fmt: skip
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
