"""A host's side of ``signoff proxy``: the mcp SDK's client starting it as an MCP host does, and
reading what it answers. Every suite opens its proxy sessions here."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import SIGNOFF

KEYRING_VARIABLES = ("DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND", "XDG_DATA_HOME")


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
) -> AsyncIterator[ClientSession]:
    """``signoff proxy NAMES [--hold HOLD]`` for ``home``, initialized. ``env``: more variables
    (the proxy's servers get only those named in the configuration); ``notifications``: where
    the server's notifications are kept; ``errlog``: where the proxy's stderr goes."""
    hold_args = [] if hold is None else ["--hold", str(hold)]
    params = StdioServerParameters(
        command=str(SIGNOFF),
        args=["proxy", *names, *hold_args],
        env={"SIGNOFF_HOME": str(home), **tree_under_test(), **(env or {})},
    )

    async def keep(message: Any) -> None:
        if notifications is not None:
            notifications.append(message)

    with (errlog or home.parent / f"{home.name}-proxy-stderr.txt").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, message_handler=keep) as session,
        ):
            await session.initialize()
            yield session


def text(result: Any) -> str:
    """The text of a tool's answer, its text parts joined by newlines."""
    return "\n".join(c.text for c in result.content if hasattr(c, "text"))
