"""A proxy set up as an operator would: the signoff commands, then an MCP client of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from core.store import Store
from tests.conftest import SIGNOFF

FAKE_SERVER = Path(__file__).with_name("fake_server.py")


class Rig:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "SIGNOFF_HOME": str(home)}

    def signoff(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(SIGNOFF), *args], capture_output=True, text=True,
                              env=self.env, timeout=120, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"signoff {' '.join(args)} failed: {done.stderr}")
        return done

    def add(self, name: str, command: str, args: list[str], env: dict[str, str] | None = None,
            passed: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.env.update(env or {})
        flags = [f for var in [*passed, *(env or {})] for f in ("--env", var)]
        self.signoff("servers", "add", name, *flags, "--", command, *args)

    def add_fake(self, name: str, listing: list[dict[str, Any]] | str, **script: Any) -> Path:
        text = listing if isinstance(listing, str) else json.dumps(listing)
        path = self.home / f"{name}-script.json"
        path.write_text(json.dumps({"listing": text, **script}))
        self.add(name, sys.executable, [str(FAKE_SERVER), str(path)])
        return path

    def pin(self, name: str) -> dict[str, Any]:
        self.signoff("pin", name, "--accept")
        return json.loads(self.signoff("pin", name, "--json").stdout)

    def classify(self, name: str, **classes: str) -> None:
        for tool, side_effect in classes.items():
            self.signoff("classify", name, tool, side_effect)

    def pending(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.signoff("pending").stdout.splitlines()]

    def store(self) -> Store:
        return Store.open(self.home / "signoff.db")

    @asynccontextmanager
    async def client(self, *names: str, hold: float = 0.3) -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(
            command=str(SIGNOFF), args=["proxy", *names, "--hold", str(hold)],
            # The whole environment, PYTHONPATH too: under tests/test_mutations.py the proxy
            # must run the mutated copy of the tree, as every other command the test starts.
            env=self.env,
        )  # fmt: skip
        with (self.home / "host-stderr.log").open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session


def text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


NOTES_TOOLS = [
    {"name": "read_note", "description": "Read the notes",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "write_note", "description": "Append a line to the notes",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
]  # fmt: skip
