"""A transport that keeps every JSON-RPC message each way, as a JSON value, in order.

The mcp SDK's session parses what it receives into typed results (dropping what its models do
not know); the suite compares what arrived on the wire instead: the stdio transport's messages
before the session reads them, each ``result`` and ``params`` the object the server wrote.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from mcp.shared.message import SessionMessage

Message = dict[str, Any]
Streams = tuple[Any, Any]


def _value(item: SessionMessage) -> Message:
    dumped = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
    assert isinstance(dumped, dict)
    return dumped


class Wire:
    """The messages of one connection: ``("in", message)`` from the server, ``("out", …)`` to it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Message]] = []
        self._grew = anyio.Event()

    def add(self, direction: str, message: Message) -> None:
        self.log.append((direction, message))
        self._grew.set()
        self._grew = anyio.Event()

    def mark(self) -> int:
        return len(self.log)

    def received(self, since: int = 0) -> list[Message]:
        return [m for d, m in self.log[since:] if d == "in"]

    def sent(self, since: int = 0) -> list[Message]:
        return [m for d, m in self.log[since:] if d == "out"]

    def notifications(self, method: str, since: int = 0) -> list[Message]:
        return [m for m in self.received(since) if m.get("method") == method and "id" not in m]

    def requests(self, method: str, since: int = 0) -> list[Message]:
        """Requests the server sent the client."""
        return [m for m in self.received(since) if m.get("method") == method and "id" in m]

    def exchange(self, method: str, since: int) -> tuple[Message | None, Message | None]:
        """The last ``method`` request the client sent since ``since`` (None when the client
        sent none) and the server's answer to it (None when none arrived)."""
        sent = [m for m in self.sent(since) if m.get("method") == method and "id" in m]
        if not sent:
            return None, None
        request = sent[-1]
        for m in self.received(since):
            if m.get("id") == request["id"] and ("result" in m or "error" in m):
                return request, m
        return request, None

    async def wait_for(self, found: Callable[[], bool], seconds: float) -> bool:
        """Until ``found()`` holds, on each message received, for at most ``seconds``."""
        with anyio.move_on_after(seconds):
            while not found():
                await self._grew.wait()
        return found()


@asynccontextmanager
async def recorded(
    transport: AbstractAsyncContextManager[Streams], wire: Wire
) -> AsyncIterator[Streams]:
    """``transport``'s streams, each message kept in ``wire`` as it passes."""
    async with transport as (read, write):
        to_session, session_reads = anyio.create_memory_object_stream[Any](0)
        session_writes, from_session = anyio.create_memory_object_stream[Any](0)

        async def inbound() -> None:
            async with to_session:
                async for item in read:
                    if isinstance(item, SessionMessage):
                        wire.add("in", _value(item))
                    await to_session.send(item)

        async def outbound() -> None:
            async with from_session:
                async for item in from_session:
                    wire.add("out", _value(item))
                    await write.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(inbound)
            tasks.start_soon(outbound)
            try:
                yield session_reads, session_writes
            finally:
                tasks.cancel_scope.cancel()
                for stream in (session_reads, session_writes):
                    await stream.aclose()
