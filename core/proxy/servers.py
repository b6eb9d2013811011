"""The upstream servers as the proxy uses them: started, called, and started again.

Rules:

1. Each configured server is started with our own client (core/proxy/upstream.py; over HTTP
   for a ``url``, core/proxy/http_upstream.py), its tools pinned over the raw bytes they were
   listed with (core/proxy/pins.py).
2. An upstream call that times out, is cancelled or is cut off has an unknown outcome: a
   mutating tool's run waits for the operator (interrupted side effect), never re-run. A
   request that could not even be written to a server that died between calls was never made:
   the server is started again and it is sent.
3. A call past its timeout (its tool's, its server's, or the top-level one) is cancelled the
   same way as a host's (core/proxy/server.py rule 3), and the server is stopped only when it
   no longer answers a ping.
4. A server that answered a call ran it, whatever its answer: one too large to read, one
   Signoff cannot read exactly, or a result that is not an object is the call's answer
   (``UpstreamAnswerUnreadable``, passed up), never an unknown outcome. Only a call whose answer
   never came, or whose answer's id could not be read, has an unknown outcome.
5. The servers' processes are started as soon as the proxy is (``spawn``), and greeted when the
   host has said who it is (``start`` with the host's ``Greeting``); a restart greets the same.
6. A host's progress token is the server's to use while the call is at the server, and only
   then (``at_server``): a held call, or one answered, has no progress to report.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.errors import (
    OutcomeUnknown,
    UpstreamCancelled,
    UpstreamError,
    UpstreamGone,
    UpstreamNotDelivered,
    UpstreamTimeout,
)
from core.proxy import status
from core.proxy.cancel import current, host_gave_up
from core.proxy.config import ServerConfig
from core.proxy.http_upstream import upstream_for  # stdio or Streamable HTTP, by the configuration
from core.proxy.offered import Offered
from core.proxy.pins import Listing, read_listing
from core.proxy.upstream import Answer, Greeting, OnMessage, Upstream

log = logging.getLogger("signoff.proxy")

START_TIMEOUT = 60.0


class Servers:
    """The configured servers, each run by our own client (core/proxy/upstream.py).

    ``offered`` is what the proxy offers the host, from which a restart withdraws what the
    server no longer may offer. ``timeout`` and ``grace`` read the call timeouts and the cancel
    grace as the proxy's configuration says at the time of the call."""

    def __init__(
        self,
        configured: Mapping[str, ServerConfig],
        *,
        log_dir: Path,
        status_dir: Path,
        offered: Offered,
        timeout: Callable[[str, str], float],
        grace: Callable[[], float],
        on_message: OnMessage | None = None,
        ceiling: Callable[[str], int] | None = None,
        withdrew: Callable[[], None] | None = None,
    ) -> None:
        self.configured = configured
        self.log_dir = log_dir
        self.status_dir = status_dir
        self.upstreams: dict[str, Upstream] = {}
        self.listings: dict[str, Listing] = {}
        self.problems: dict[str, str] = {}  # server -> why it offers nothing
        self.greeting = Greeting()
        self._offered = offered
        self._timeout = timeout
        self._grace = grace
        self._on_message = on_message
        self._ceiling = ceiling
        self._withdrew = withdrew  # told when a restart took tools away (the host is told)
        self._spawned: dict[str, Upstream] = {}
        self.at_server: dict[str, str] = {}  # a call's progress token (as JSON) -> its server

    def _upstream(self, server: ServerConfig) -> Upstream:
        kwargs = {} if self._ceiling is None else {"ceiling": self._ceiling(server.name)}
        return upstream_for(server, self.log_dir / f"{server.name}.log",
                            on_message=self._on_message, **kwargs)  # fmt: skip

    async def spawn(self, names: list[str]) -> None:
        """Start the servers' processes, to be greeted by ``start`` (rule 5); one that cannot
        start is tried again there, and its failure reported then."""
        for name in names:
            upstream = self._upstream(self.configured[name])
            try:
                await upstream.spawn()
            except UpstreamError:
                continue
            self._spawned[name] = upstream

    async def start(self, names: list[str], greeting: Greeting | None = None) -> None:
        """Greet each server (started now if ``spawn`` did not), all at once, and pin its
        listing; one that fails offers nothing and is reported, never taking the others down."""
        self.greeting = greeting or Greeting()
        connected = await asyncio.gather(
            *(self.connect(self.configured[name], self._spawned.pop(name, None))
              for name in names),
            return_exceptions=True,
        )  # fmt: skip
        for name, outcome in zip(names, connected, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                self.problems[name] = f"{outcome} [{type(outcome).__name__}]"
                log.error("server %s offers nothing: %s", name, self.problems[name])
                status.record(self.status_dir, name, None, self.problems[name])
                continue
            upstream, listing = outcome
            status.record(self.status_dir, name, listing, handshake=upstream.initialize_result)
            self.upstreams[name] = upstream
            self.listings[name] = listing
            for what, why in listing.dropped:
                log.warning("server %s: dropped %s: %s", name, what, why)

    async def connect(
        self, server: ServerConfig, upstream: Upstream | None = None
    ) -> tuple[Upstream, Listing]:
        if upstream is None:
            upstream = self._upstream(server)
            await upstream.spawn()
        try:
            await upstream.handshake(START_TIMEOUT, self.greeting)
            pages = await upstream.list_tools(START_TIMEOUT)
            return upstream, read_listing(pages)
        except BaseException:
            await upstream.close()
            raise

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Answer:
        """The server's answer to the call (rule 4); the host's progress token, when it gave
        one, goes with it (core/proxy/cancel.py)."""
        upstream = self.upstreams.get(server)
        if upstream is None or not upstream.alive:
            upstream = await self.restart(server, tool)
        if host_gave_up():
            raise RuntimeError("the host cancelled the call before it was sent to the server")
        call = current()
        timeout = self._timeout(server, tool)
        grace = self._grace()
        meta = None if call.progress is None else {"progressToken": call.progress}

        async def send(upstream: Upstream) -> Answer:
            return await upstream.call_tool(tool, arguments, timeout, grace=grace,
                                            cancelled=call.cancelled, meta=meta)  # fmt: skip

        token = None if call.progress is None else json.dumps(call.progress)
        if token is not None:
            self.at_server[token] = server  # rule 6
        try:
            try:
                return await send(upstream)
            except UpstreamNotDelivered:
                # It died between calls before we noticed: this call was never made.
                upstream = await self.restart(server, tool)
                return await send(upstream)
        except UpstreamTimeout as e:
            # Cancelled at the server, and not answered. One that still answers a ping keeps
            # running, with its session's state; one that does not is stopped, and the next
            # call starts it again.
            if not await upstream.answers_ping(max(grace, 1.0)):
                await upstream.close()
            raise OutcomeUnknown(str(e)) from None
        except UpstreamNotDelivered as e:  # twice: it was not made, and did not run
            raise RuntimeError(str(e)) from None
        except (UpstreamGone, UpstreamCancelled) as e:
            raise OutcomeUnknown(str(e)) from None  # it reached the server
        finally:
            if token is not None and self.at_server.get(token) == server:
                del self.at_server[token]

    async def restart(self, server: str, tool: str) -> Upstream:
        """Start a server that died between calls, withdrawing what its new listing no longer
        lets it offer (``Offered.withdraw``, and ``withdrew`` told); refused when that includes
        ``tool``."""
        old = self.upstreams.pop(server, None)
        if old is not None:
            await old.close()
        try:
            upstream, listing = await self.connect(self.configured[server])
        except UpstreamError as e:
            raise RuntimeError(f"server {server} is not running and did not restart: {e}") from None
        offered = len(self._offered.exposed)
        withdrawn = self._offered.withdraw(server, listing, tool)
        self.listings[server] = listing  # what the tool set is evaluated from next (live.py)
        if len(self._offered.exposed) != offered and self._withdrew is not None:
            self._withdrew()
        status.record(self.status_dir, server, listing, handshake=upstream.initialize_result)
        if withdrawn:
            await upstream.close()
            raise RuntimeError(withdrawn)
        self.upstreams[server] = upstream
        return upstream

    async def close(self) -> None:
        """Stop every server, those spawned but never greeted (a host that left before its
        ``initialize``) too."""
        for upstream in [*self.upstreams.values(), *self._spawned.values()]:
            await upstream.close()
        self._spawned.clear()
