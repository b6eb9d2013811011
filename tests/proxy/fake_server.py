"""A small MCP server speaking raw newline-delimited JSON-RPC, scripted to misbehave on demand.

    python fake_server.py SCRIPT.json

SCRIPT holds:
  "listing": the exact text of the ``tools`` array to send (raw bytes matter for pins),
  "notes": a file the ``write_note`` tool appends to (its side effect, visible outside),
  "before_listing": lines to print before the tools/list answer (garbage, non-UTF-8 as hex),
  "on_call": {tool: "die" | "hang" | "error" | "ok" | "oversize" | "not_object" |
  "write_then_hang" | "inexact" | "inexact_error" | "raw" | "progress" | "roots" | "log" |
  "error_echo" | "failed_echo"}
  (default ok): "error_echo" answers a JSON-RPC error, and "failed_echo" a result marked
  isError, each repeating the call's arguments; "die", "oversize", "not_object", "inexact",
  "inexact_error" and "write_then_hang" perform write_note first, then die, answer with a line
  of "oversize_bytes"
  (default 9 MiB), answer a result that is not an object, answer an integer beyond 2^53,
  answer an error holding a lone surrogate, or never answer; "raw" answers the text
  "results"[tool] as its result, byte for byte; "progress" sends notifications/progress for the
  call's progress token ("steps" of them, "step_seconds" apart) before answering, then one
  for the token "not-a-call" and each of "foreign_tokens"; "roots" asks the client for
  roots/list and answers with what it got; "log" sends a notifications/message first,
  "list_changed": true to send notifications/tools/list_changed after listing; the on_call
  behaviour "list_changed" sends it before answering (the script is read again at each
  tools/list: a listing changed in it is what the running server lists next),
  "late": write_note acts, then answers after "delay" seconds (default 2) whether or not the
  call was cancelled meanwhile (with "late_bytes" of text when that is set); "cancellable":
  write_note acts, then waits "delay" seconds
  for a cancellation, and answers only when none came; both keep reading requests meanwhile
  (ping is answered),
  "cancels": a file each notifications/cancelled received is appended to (its params as JSON),
  "starts": a file a line is appended to at each initialize (how often the server started),
  "calls": a file each tools/call line is appended to exactly as received (what reached it),
  "greetings": a file each initialize's params are appended to, "levels": each
  logging/setLevel's, "roots_changed": a line for each notifications/roots/list_changed,
  "capabilities": what it declares, "instructions": its instructions,
  "prompts": a file holding the exact text of the ``prompts`` array to list (read at each
  prompts/list, so a test can reword one); prompts/get answers one user message naming the
  prompt and its arguments.
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

WRITES_THEN_ANSWERS = ("oversize", "not_object", "write_then_hang", "inexact", "inexact_error")

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


def slow(mid: object, reply: str, delay: float, cancellable: bool) -> None:
    """Answers ``reply`` after ``delay`` s; a cancellable call told it is cancelled never
    answers."""
    if _cancelled[mid].wait(delay) and cancellable:
        return
    answer_text(mid, reply)


def main() -> None:
    script = json.loads(Path(sys.argv[1]).read_text())
    notes = Path(script.get("notes", os.devnull))
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, mid = message.get("method"), message.get("id")
        if method == "notifications/roots/list_changed":
            append(script.get("roots_changed"), "changed")
            continue
        if method == "notifications/cancelled":
            params = message.get("params") or {}
            append(script.get("cancels"), json.dumps(params))
            _cancelled.setdefault(params.get("requestId"), threading.Event()).set()
            continue
        if mid is None:
            continue
        if method == "initialize":
            append(script.get("starts"), str(os.getpid()))
            append(script.get("greetings"), json.dumps(message["params"]))
            send(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": script.get(
                            "capabilities", {"tools": {"listChanged": True}}
                        ),
                        "serverInfo": {"name": "fake", "version": "1"},
                        **(
                            {"instructions": script["instructions"]}
                            if "instructions" in script
                            else {}
                        ),
                    },
                }
            )
        elif method == "tools/list":
            script = json.loads(Path(sys.argv[1]).read_text())  # a tool added at run time
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
            if behaviour in WRITES_THEN_ANSWERS and (name == "write_note"):
                with notes.open("a") as f:
                    f.write(args.get("text", "") + "\n")
            if behaviour == "oversize":
                send_raw(
                    b'{"jsonrpc":"2.0","id":'
                    + json.dumps(mid).encode()
                    + b',"result":'
                    + b'{"content":[{"type":"text","text":"'
                    + b"x" * int(script.get("oversize_bytes", 9 << 20))
                    + b'"}]}}'
                )
                continue
            if behaviour == "inexact":
                send_raw(
                    b'{"jsonrpc":"2.0","id":'
                    + json.dumps(mid).encode()
                    + b',"result":{"content":[],"structuredContent":{"n":9007199254740993}}}'
                )
                continue
            if behaviour == "inexact_error":  # an error with a lone surrogate: not exact
                send_raw(
                    b'{"jsonrpc":"2.0","id":'
                    + json.dumps(mid).encode()
                    + b',"error":{"code":-32000,"message":"bad \\ud800 char"}}'
                )
                continue
            if behaviour == "raw":
                send_raw(
                    b'{"jsonrpc":"2.0","id":'
                    + json.dumps(mid).encode()
                    + b',"result":'
                    + script["results"][name].encode()
                    + b"}"
                )
                continue
            if behaviour == "progress":
                token = (message["params"].get("_meta") or {}).get("progressToken")
                for step in range(int(script.get("steps", 3))):
                    time.sleep(float(script.get("step_seconds", 0)))
                    if token is not None:
                        send(
                            {
                                "jsonrpc": "2.0",
                                "method": "notifications/progress",
                                "params": {
                                    "progressToken": token,
                                    "progress": step + 1,
                                    "total": 3,
                                    "message": f"step {step + 1}",
                                },
                            }
                        )
                for foreign in ("not-a-call", *script.get("foreign_tokens", [])):
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": foreign, "progress": 1},
                        }
                    )
            if behaviour == "list_changed":
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            if behaviour == "log":
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "logger": "fake", "data": "a log line"},
                    }
                )
            if behaviour == "roots":
                send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
                for reply in sys.stdin.buffer:
                    answer = json.loads(reply)
                    if answer.get("id") == "roots-1":
                        break
                answer_text(mid, json.dumps({k: answer[k] for k in answer if k != "jsonrpc"}))
                continue
            if behaviour in ("late", "cancellable") and name == "write_note":
                append(str(notes), args.get("text", ""))
                _cancelled.setdefault(mid, threading.Event())
                delay = float(script.get("delay", 2))
                reply = f"wrote {args.get('text', '')!r}"
                if script.get("late_bytes"):  # a large answer
                    reply = "".join(f"{n:07d} " for n in range(script["late_bytes"] // 8))
                threading.Thread(target=slow, args=(mid, reply, delay,
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
                        "error": {
                            "code": -32000,
                            "message": "the fake server refuses",
                            "data": {"why": "scripted", "n": 1.5},
                        },
                    }
                )
                continue
            if behaviour == "error_echo":  # a refusal that repeats what it was given
                echo = json.dumps(args)
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": mid,
                        "error": {"code": -32000, "message": f"cannot take {echo}", "data": args},
                    }
                )
                continue
            if behaviour == "failed_echo":  # a tool that failed, saying what it was given
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": f"failed on {json.dumps(args)}"}],
                    "isError": True}})  # fmt: skip
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
        elif method == "prompts/list" and script.get("prompts"):
            listed = Path(script["prompts"]).read_bytes()
            send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode()
                     + b',"result":{"prompts":' + listed + b"}}")  # fmt: skip
        elif method == "prompts/get" and script.get("prompts"):
            said = {"type": "text", "text": f"got {json.dumps(message['params'])}"}
            send({"jsonrpc": "2.0", "id": mid,
                  "result": {"messages": [{"role": "user", "content": said}]}})  # fmt: skip
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "logging/setLevel":  # recorded even when logging was not declared
            append(script.get("levels"), json.dumps(message["params"]))
            if "logging" in script.get("capabilities", {}):
                send({"jsonrpc": "2.0", "id": mid, "result": {}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})


if __name__ == "__main__":
    main()
