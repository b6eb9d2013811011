"""A host's side of ``signoff proxy``: the mcp SDK's client starting it as an MCP host does, and
reading what it answers. Every suite opens its proxy sessions here."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
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
) -> AsyncIterator[ClientSession]:
    """``signoff proxy NAMES [--hold HOLD]`` for ``home``, initialized. ``env``: more variables
    (the proxy's servers get only those named in the configuration); ``notifications``: where
    the server's notifications are kept; ``errlog``: where the proxy's stderr goes; ``client``:
    the clientInfo (name, version) the host sends in ``initialize`` (the SDK's own when None);
    ``own_launcher``: the proxy is started by a process of its own rather than by this one (as
    another window of the same application would start it: another host to Signoff)."""
    hold_args = [] if hold is None else ["--hold", str(hold)]
    command = [str(SIGNOFF), "proxy", *names, *hold_args]
    if own_launcher:
        command = [sys.executable, "-c", LAUNCHER, *command]
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env={"SIGNOFF_HOME": str(home), **tree_under_test(), **(env or {})},
    )
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
    """The text of a tool's answer, its text parts joined by newlines."""
    return "\n".join(c.text for c in result.content if hasattr(c, "text"))
