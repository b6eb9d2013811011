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

from core.store import Store
from tests.conftest import run_signoff
from tests.host import proxy_session

FAKE_SERVER = Path(__file__).with_name("fake_server.py")


class Rig:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "SIGNOFF_HOME": str(home)}

    def signoff(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_signoff(*args, env=self.env, ok=check)

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
        """One command for all the tools, as an operator would (``TOOL=CLASS ...``)."""
        self.signoff("classify", name, *(f"{tool}={side}" for tool, side in classes.items()))

    def pending(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.signoff("pending").stdout.splitlines()]

    def store(self) -> Store:
        return Store.open(self.home / "signoff.db")

    @asynccontextmanager
    async def client(
        self,
        *names: str,
        hold: float = 0.3,
        client: tuple[str, str] | None = None,
        own_launcher: bool = False,
        drop: tuple[str, ...] = (),
    ) -> AsyncIterator[ClientSession]:
        """A host's session (``client``, ``own_launcher``: which host, ``drop``: variables it
        does not pass, as tests/host.py says)."""
        # The whole environment: the servers' passed variables, and PYTHONPATH (the tree).
        async with proxy_session(self.home, *names, hold=hold, env=self.env,
                                 errlog=self.home / "host-stderr.log", client=client,
                                 own_launcher=own_launcher, drop=drop) as session:  # fmt: skip
            yield session


NOTES_TOOLS = [
    {"name": "read_note", "description": "Read the notes",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "write_note", "description": "Append a line to the notes",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
]  # fmt: skip
