"""An upstream MCP server that answers one request with bytes it is given, then exits.

    python replay_server.py SCRIPT.json

SCRIPT holds:
  "phase": the method whose answer is replaced ("initialize" or "tools/list"); the requests
           before it are answered as a plain MCP server would,
  "chunks": hex strings written in order, with a flush after each (a line can arrive in several
            reads),
  "then": "exit" (close the output at once: the default) or "wait" (read on, answering
          nothing, until the input closes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    script = json.loads(Path(sys.argv[1]).read_text())
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, mid = message.get("method"), message.get("id")
        if mid is None:
            continue
        if method == script["phase"]:
            for chunk in script["chunks"]:
                out.write(bytes.fromhex(chunk))
                out.flush()
            if script.get("then") == "wait":
                sys.stdin.buffer.read()
            return
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "replay", "version": "1"},
            }
            out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}).encode() + b"\n")
            out.flush()


if __name__ == "__main__":
    main()
