"""A host's side of ``signoff proxy``: the mcp SDK's client starting it as an MCP host does, and
reading what it answers. Every suite opens its proxy sessions here."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from tests.conftest import SIGNOFF

KEYRING_VARIABLES = ("DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND", "XDG_DATA_HOME")
# A launching process of its own: a process that starts the proxy as its child and waits for it.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def tree_under_test() -> dict[str, str]:
    """PYTHONPATH, when set: the tree under test (a mutation's copy, tests/test_mutations.py),
    which the proxy must run too; and the keyring the tests use (the session bus of the test
    command's Secret Service, or the backend a test chose), which a proxy on a desktop finds at
    the user's own session bus. The SDK passes a server only a few variables of its own."""
    names = ("PYTHONPATH", *KEYRING_VARIABLES)
    return {name: os.environ[name] for name in names if os.environ.get(name)}


@asynccontextmanager
async def proxy_session(
    home: Path,
    *names: str,
    hold: float | str | None = None,
    env: Mapping[str, str] | None = None,
    notifications: list[Any] | None = None,
    errlog: Path | None = None,
    client: tuple[str, str] | None = None,
    own_launcher: bool = False,
    drop: tuple[str, ...] = (),
) -> AsyncIterator[ClientSession]:
    """``signoff proxy NAMES [--hold HOLD]`` for ``home``, initialized. ``env``: more variables
    (the proxy's servers get only those named in the configuration); ``notifications``: where
    the server's notifications are kept; ``errlog``: where the proxy's stderr goes; ``client``:
    the clientInfo (name, version) the host sends in ``initialize`` (the SDK's own when None);
    ``own_launcher``: the proxy is started by a process of its own rather than by this one (as
    another window of the same application would start it: another host to Signoff); ``drop``:
    variables the proxy does not get, whatever ``env`` says (a host that passes none of them)."""
    hold_args = [] if hold is None else ["--hold", str(hold)]
    command = [str(SIGNOFF), "proxy", *names, *hold_args]
    if own_launcher:
        command = [sys.executable, "-c", LAUNCHER, *command]
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env={name: value for name, value in
             {"SIGNOFF_HOME": str(home), **tree_under_test(), **(env or {})}.items()
             if name not in drop},
    )  # fmt: skip
    info = None if client is None else Implementation(name=client[0], version=client[1])

    async def keep(message: Any) -> None:
        if notifications is not None:
            notifications.append(message)

    with (errlog or home.parent / f"{home.name}-proxy-stderr.txt").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, message_handler=keep, client_info=info) as session,
        ):
            await session.initialize()
            yield session


def text(result: Any) -> str:
    """The text of a tool's answer, its text parts joined by newlines: the SDK client's result,
    or the JSON object a proxy driven directly answers."""
    if isinstance(result, dict):
        return "\n".join(c["text"] for c in result.get("content", []) if "text" in c)
    return "\n".join(c.text for c in result.content if hasattr(c, "text"))


class RawHost:
    """A host writing raw lines on ``signoff proxy``'s stdin, so that no client library's own
    encoder or validation stands between the test's bytes and the proxy; answers read by id.

    ``others``: every line the proxy wrote that was not the answer awaited (parsed)."""

    ANSWER_WITHIN = 60  # seconds: far above any answer's time; a hang fails the test, not CI

    def __init__(self, home: Path, *args: str) -> None:
        """``signoff proxy ARGS`` for ``home``, its stderr in ``home``/proxy-stderr.txt."""
        self.stderr_path = home / "proxy-stderr.txt"
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [str(SIGNOFF), "proxy", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "SIGNOFF_HOME": str(home)},
        )
        self.buffer = b""
        self.next_id = 0
        self.others: list[dict[str, Any]] = []

    def initialize(
        self, version: str = "2025-06-18", capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The proxy's answer to ``initialize``; then ``notifications/initialized``."""
        params = {"protocolVersion": version, "capabilities": capabilities or {},
                  "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
        answer = self.request("initialize", json.dumps(params).encode())
        assert "result" in answer, answer
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return answer

    def respond(self, request_id: Any, answer: dict[str, Any]) -> None:
        """Answer a request the proxy sent the host (``answer``: its result or error)."""
        self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, **answer}).encode())

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.alive()
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def alive(self) -> None:
        code = self.process.poll()
        assert code is None, f"the proxy exited (code {code}); its stderr ends:\n{self.stderr()}"

    def stderr(self) -> str:
        return self.stderr_path.read_bytes()[-3000:].decode(errors="replace")

    def request(self, method: str, params: bytes) -> dict[str, Any]:
        self.next_id += 1
        self.send(b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}'
                  % (self.next_id, method.encode(), params))  # fmt: skip
        return self.answer(self.next_id)

    def call(self, tool: str, arguments: bytes) -> dict[str, Any]:
        params = b'{"name":"%s","arguments":%s}' % (tool.encode(), arguments)
        return self.request("tools/call", params)

    def answer(self, request_id: int | str) -> dict[str, Any]:
        """The answer to ``request_id``; other lines are kept in ``others``."""
        return self.next(lambda m: m.get("id") == request_id and "method" not in m,
                         f"an answer to request {request_id}")  # fmt: skip

    def next(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """The next message the proxy writes that is ``wanted``; others are kept in
        ``others``."""
        deadline = time.monotonic() + self.ANSWER_WITHIN
        while True:
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                assert self.process.stdout is not None
                ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, left))
                assert ready, f"no {what} within {self.ANSWER_WITHIN} s"
                chunk = os.read(self.process.stdout.fileno(), 1 << 16)
                if not chunk:
                    self.process.wait(timeout=30)
                    self.alive()
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if wanted(message):
                return message
            self.others.append(message)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()
        self._stderr.close()
