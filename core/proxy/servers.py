"""The upstream servers as the proxy uses them: started, called, and started again.

Rules:

1. Each configured server is started with our own client (core/proxy/upstream.py), its tools
   pinned over the raw bytes they were listed with (core/proxy/pins.py).
2. An upstream call that times out, is cancelled or is cut off has an unknown outcome: a
   mutating tool's run waits for the operator (interrupted side effect), never re-run. A
   request that could not even be written to a server that died between calls was never made:
   the server is started again and it is sent.
3. A call past its timeout (its tool's, its server's, or the top-level one) is cancelled the
   same way as a host's (core/proxy/server.py rule 3), and the server is stopped only when it
   no longer answers a ping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.errors import (
    OutcomeUnknown,
    UpstreamAnswerUnreadable,
    UpstreamCancelled,
    UpstreamError,
    UpstreamGone,
    UpstreamNotDelivered,
    UpstreamProtocolError,
    UpstreamTimeout,
)
from core.proxy import answers, status
from core.proxy.cancel import HOST_CANCEL, host_gave_up
from core.proxy.config import ServerConfig
from core.proxy.offered import Offered
from core.proxy.pins import Listing, read_listing
from core.proxy.upstream import Upstream

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
    ) -> None:
        self.configured = configured
        self.log_dir = log_dir
        self.status_dir = status_dir
        self.upstreams: dict[str, Upstream] = {}
        self.listings: dict[str, Listing] = {}
        self.problems: dict[str, str] = {}  # server -> why it offers nothing
        self._offered = offered
        self._timeout = timeout
        self._grace = grace

    async def start(self, names: list[str]) -> None:
        for name in names:
            server = self.configured[name]
            try:
                upstream, listing = await self.connect(server)
            except Exception as e:  # one bad server never takes the others down
                self.problems[name] = f"{e} [{type(e).__name__}]"
                log.error("server %s offers nothing: %s", name, self.problems[name])
                status.record(self.status_dir, name, None, self.problems[name])
                continue
            status.record(self.status_dir, name, listing)
            self.upstreams[name] = upstream
            self.listings[name] = listing
            for what, why in listing.dropped:
                log.warning("server %s: dropped %s: %s", name, what, why)

    async def connect(self, server: ServerConfig) -> tuple[Upstream, Listing]:
        upstream = Upstream(server, self.log_dir / f"{server.name}.log")
        await upstream.start(START_TIMEOUT)
        try:
            pages = await upstream.list_tools(START_TIMEOUT)
            return upstream, read_listing(pages)
        except BaseException:
            await upstream.close()
            raise

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        upstream = self.upstreams.get(server)
        if upstream is None or not upstream.alive:
            upstream = await self.restart(server, tool)
        if host_gave_up():
            raise RuntimeError("the host cancelled the call before it was sent to the server")
        cancelled = HOST_CANCEL.get()
        timeout = self._timeout(server, tool)
        grace = self._grace()
        try:
            try:
                result = await upstream.call_tool(tool, arguments, timeout, grace=grace,
                                                  cancelled=cancelled)  # fmt: skip
            except UpstreamNotDelivered:
                # It died between calls before we noticed: this call was never made.
                upstream = await self.restart(server, tool)
                result = await upstream.call_tool(tool, arguments, timeout, grace=grace,
                                                  cancelled=cancelled)  # fmt: skip
        except UpstreamTimeout as e:
            # Cancelled at the server, and not answered. One that still answers a ping keeps
            # running, with its session's state; one that does not is stopped, and the next
            # call starts it again.
            if not await upstream.answers_ping(max(grace, 1.0)):
                await upstream.close()
            raise OutcomeUnknown(str(e)) from None
        except UpstreamNotDelivered as e:  # twice: it was not made, and did not run
            raise RuntimeError(str(e)) from None
        except (UpstreamGone, UpstreamAnswerUnreadable, UpstreamCancelled) as e:
            raise OutcomeUnknown(str(e)) from None  # it reached the server
        except UpstreamProtocolError as e:  # a JSON-RPC error: the server's own refusal
            raise RuntimeError(f"the server refused the call: {e}") from None
        return answers.flatten(result)

    async def restart(self, server: str, tool: str) -> Upstream:
        """Start a server that died between calls, withdrawing what its new listing no longer
        lets it offer (``Offered.withdraw``); refused when that includes ``tool``."""
        old = self.upstreams.pop(server, None)
        if old is not None:
            await old.close()
        try:
            upstream, listing = await self.connect(self.configured[server])
        except UpstreamError as e:
            raise RuntimeError(f"server {server} is not running and did not restart: {e}") from None
        withdrawn = self._offered.withdraw(server, listing, tool)
        status.record(self.status_dir, server, listing)
        if withdrawn:
            await upstream.close()
            raise RuntimeError(withdrawn)
        self.upstreams[server] = upstream
        return upstream

    async def close(self) -> None:
        for upstream in self.upstreams.values():
            await upstream.close()
