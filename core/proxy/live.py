"""The tool set kept live: a server's listing read again, and the configuration in force watched.

The proxy offers what its servers listed under the configuration in force
(core/proxy/offered.py rule 3). Both can change while it runs; this module notices and asks
the proxy to take the change up (``retool``, core/proxy/server.py rule 5).

Rules:

1. A server's ``notifications/tools/list_changed`` has its listing read again (``relist``),
   pinned over the raw bytes as at start (core/proxy/pins.py). Notifications that come while
   a listing is being read are one more listing after it, not one each: a server that keeps
   saying its tools changed is listed again at most once each ``RELIST_SPACING`` seconds.
2. A listing read again that is refused, or that the server does not answer, leaves the server
   offering nothing until it lists soundly again: what it offers now is unknown.
3. Each listing read again is written to the server's status (core/proxy/status.py) and the
   app is woken: the tools that wait for the operator are shown there (core/proxy/review.py).
4. The configuration in force is looked at each ``RULES_POLL`` seconds (the file's stamp and
   the chain's latest record, core/proxy/config_record.py), and at each call: a pin, class or
   rule recorded through Signoff reaches the running proxy without a call to bring it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from core import wake
from core.errors import SignoffError
from core.proxy import status
from core.proxy.pins import Listing, read_listing
from core.proxy.servers import Servers

log = logging.getLogger("signoff.proxy")

RELIST_WAIT = 60.0  # seconds a listing read again may take
RELIST_SPACING = 1.0  # rule 1
RULES_POLL = 1.0  # rule 4
NOTHING = Listing((), (), "")


class Live:
    """Reads listings again for ``servers`` and watches the rules; ``retool`` takes up what
    changed, ``reload`` the configuration in force when it changed."""

    def __init__(
        self,
        servers: Servers,
        status_dir: Path,
        retool: Callable[[], None],
        reload: Callable[[], bool],
    ) -> None:
        self.servers = servers
        self.status_dir = status_dir
        self._retool = retool
        self._reload = reload
        self._listing: dict[str, asyncio.Task[None]] = {}  # a server's listing being read
        self._again: set[str] = set()  # servers that said so again meanwhile
        self._watch: asyncio.Task[None] | None = None

    def listed_changed(self, server: str) -> None:
        """A server's ``notifications/tools/list_changed`` (rule 1)."""
        if server in self._listing:
            self._again.add(server)
            return
        self._listing[server] = asyncio.ensure_future(self._relist_while_said(server))

    async def _relist_while_said(self, server: str) -> None:
        try:
            while True:
                self._again.discard(server)
                await self.relist(server)
                if server not in self._again:
                    return
                await asyncio.sleep(RELIST_SPACING)
        except Exception:  # a fault of Signoff's: logged, the proxy goes on serving
            log.exception("the tools of server %s could not be listed again", server)
        finally:
            del self._listing[server]

    async def relist(self, server: str) -> None:
        """Read ``server``'s listing again and have the proxy take it up (rules 1-3)."""
        upstream = self.servers.upstreams.get(server)
        if upstream is None or not upstream.alive:
            return  # a server started again is listed as it starts (core/proxy/servers.py)
        listing, why = NOTHING, ""
        try:
            listing = read_listing(await upstream.list_tools(RELIST_WAIT))
        except SignoffError as e:  # rule 2
            why = f"its tools were listed again and refused: {e} [{type(e).__name__}]"
        if self.servers.upstreams.get(server) is not upstream:
            return  # started again meanwhile, and listed then
        self.servers.listings[server] = listing
        if why:
            log.error("server %s offers nothing: %s", server, why)
            self.servers.problems[server] = why
            status.record(self.status_dir, server, None, why)
        else:
            self.servers.problems.pop(server, None)
            status.record(self.status_dir, server, listing, handshake=upstream.initialize_result)
            for what, dropped in listing.dropped:
                log.warning("server %s: dropped %s: %s", server, what, dropped)
            log.info("server %s listed its tools again: %d", server, len(listing.tools))
        self._retool()
        wake.wake("tools")  # rule 3

    def watch(self) -> None:
        """Start looking at the configuration in force (rule 4)."""
        if self._watch is None:
            self._watch = asyncio.ensure_future(self._watching())

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(RULES_POLL)
            try:
                self._reload()
            except Exception:  # a store busy or gone for a moment: looked at again next time
                log.exception("the configuration in force could not be looked at")

    async def close(self) -> None:
        tasks = [t for t in (self._watch, *self._listing.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
