"""The proxy's MCP session with its host: Signoff's own JSON-RPC layer over the host's stdio.

A faithful proxy passes on what it does not decide: the SDK's server re-validates every result
against its models (dropping what they do not know) and answers the session's requests itself,
so the proxy speaks to its host directly (decision 0030), with the messages
core/proxy/hostline.py read exactly.

Rules:

1. ``initialize`` is negotiated as the SDK negotiates it: the host's protocol version when it is
   one of the handshake's, else the latest. The servers are greeted with that version and with
   the host's ``roots`` and ``elicitation`` as the host declared them, ``sampling`` only to a
   server allowed it (core/proxy/asks.py rule 1; core/proxy/upstream.py rule 2). The
   answer names Signoff, declares ``tools`` (and ``logging`` when a server declares it, and
   ``prompts``, ``resources`` and ``completions`` as core/proxy/resources.py rule 1 says), and
   carries the servers' pinned instructions (core/proxy/instructions.py).
2. ``server/discover`` (the 2026-07-28 era's opening) is answered "method not found", as a
   server of the handshake era answers it: the host falls back to ``initialize``, which roots,
   progress and logging need. Before ``initialize``, a request other than ``ping`` is refused.
3. ``tools/list`` is the offered tools in one page. ``tools/call`` runs in a task of its own
   (``Proxy.serve_call``): its answer is the result as the server sent it, or the JSON-RPC
   error the server answered with. A host's ``notifications/cancelled`` sets the call's
   cancellation; a cancelled request gets no answer (JSON-RPC), its outcome is recorded.
   A request whose id is a request's still in flight is refused (-32600). When the tools
   offered change (core/proxy/server.py rule 5), an initialized host is sent
   ``notifications/tools/list_changed``; the answer to ``initialize`` declares ``listChanged``.
4. ``ping`` is answered by Signoff. ``logging/setLevel`` goes to every running server that
   declared ``logging`` (when none did, to every running server, so each answers for itself):
   with one, the host gets its answer unchanged; with several, success when one took it, else
   the first error. Prompts, resources and completion are core/proxy/resources.py's to answer,
   and the kinds its servers offer are declared. Any other method: "method not found".
5. A server's ``roots/list`` is asked of the host once the host said it is initialized, and its
   answer (result or error) handed back unchanged, each wait ``ROOTS_WAIT`` at most; to a host
   that declared no roots it is "method not found", as such a client answers. The roots each
   server was last given are kept (``Proxy.roots``) and recorded with each run. A server's
   ``notifications/progress`` reaches the host when its token is the token of a call of the
   host's at that server now (core/proxy/servers.py rule 6); its ``notifications/message`` is
   written to the server's log and passed on (with several servers, its ``logger`` is prefixed
   with the server's name). The host's ``notifications/roots/list_changed`` goes to every server
   greeted with roots, in a task of its own. A server's ``elicitation/create`` and
   ``sampling/createMessage`` are core/proxy/asks.py's to answer, forward and record; its
   ``notifications/elicitation/complete`` reaches a host that declared elicitation, and its
   ``notifications/cancelled`` withdraws the request it names from the host.
6. When the host closes its input, or a write to it fails (core/proxy/hoststdio.py), every call
   in flight is given up (its outcome is still recorded), the requests still open get
   ``cancel_grace_seconds`` + 1 to end (``settle``), and the proxy closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from core.errors import SignoffError, UpstreamRefused
from core.proxy import answers, asks, telemetry
from core.proxy.config import Config
from core.proxy.hostline import INVALID_REQUEST, Message
from core.proxy.resources import METHODS
from core.proxy.server import Proxy
from core.proxy.upstream import Upstream
from core.store import Store

log = logging.getLogger("signoff.proxy")

# The versions the initialize handshake reaches, oldest first (mcp_types.version's
# HANDSHAKE_PROTOCOL_VERSIONS; tests/proxy/test_faithful.py holds them equal).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SERVER_INFO = {"name": "signoff", "version": "0.1"}
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
ROOTS_WAIT = 30.0  # seconds a server's roots/list waits for the host's answer


def _key(value: Any) -> str:
    """A JSON-RPC id or progress token as a dictionary key: 1 and "1" stay apart."""
    return json.dumps(value)


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class HostSession:
    """One host's connection to the proxy (rules 1-6). ``send`` puts a message on the wire."""

    def __init__(self, proxy: Proxy, send: Callable[[Message], Awaitable[None]]) -> None:
        self.proxy = proxy
        self._send = send
        self.version = ""
        self.host_capabilities: dict[str, Any] = {}
        self._started: asyncio.Future[None] | None = None
        self._host_ready = asyncio.Event()  # the host's notifications/initialized
        self._calls: dict[str, asyncio.Event] = {}  # the host's requests in flight: cancelled
        self._asked: dict[int, asyncio.Future[dict[str, Any]]] = {}  # our requests to the host
        self._next_id = 0
        self._tasks: set[asyncio.Task[None]] = set()
        proxy.on_server_message = self.from_server
        proxy.on_tools_changed = self._tools_changed
        proxy.resources.on_changed = self._tools_changed  # prompts', resources' (resources.py)
        self.asks = asks.Asks(proxy.store, proxy.config, proxy.config_path, ask=self.ask,
                              ready=self._host_ready, capabilities=lambda: self.host_capabilities,
                              host=lambda: self.proxy.host.label)  # fmt: skip

    # --- from the host --------------------------------------------------------------------

    async def receive(self, message: Message) -> None:
        """One message the host sent, read exactly (core/proxy/hostline.py)."""
        if "method" not in message:
            self._answered(message)
        elif "id" in message:
            key = _key(message["id"])
            if key in self._calls:  # its cancellation would be ambiguous, its answer too
                why = f"request id {message['id']!r} is already in use by a request in flight"
                await self._deliver({"jsonrpc": "2.0", "id": message["id"],
                                     **_error(INVALID_REQUEST, why)})  # fmt: skip
                return
            cancelled = asyncio.Event()
            self._calls[key] = cancelled
            self._spawn(self._request(message, cancelled))
        else:
            await self._notification(message)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, message: Message) -> None:
        """Put a message on the wire; once the host is gone, it is dropped (rule 6)."""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._send(message)

    async def _request(self, message: Message, cancelled: asyncio.Event) -> None:
        request_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        try:
            answer = await self._answer(method, params, cancelled)
        except UpstreamRefused as e:  # the server's own error, unchanged
            answer = {"error": e.error}
        except Exception as e:  # a fault of Signoff's answers the host; it never hangs it
            log.exception("a %s request could not be answered", method)
            answer = _error(INTERNAL_ERROR, f"Signoff's proxy failed: {e} [{type(e).__name__}]")
        finally:
            self._calls.pop(_key(request_id), None)
        if cancelled.is_set():
            return  # rule 3: a cancelled request gets no answer
        await self._deliver({"jsonrpc": "2.0", "id": request_id, **answer})

    async def _answer(
        self, method: str, params: dict[str, Any], cancelled: asyncio.Event
    ) -> dict[str, Any]:
        if method == "ping":
            return {"result": {}}
        if method == "initialize":
            return await self._initialize(params)
        if method == "server/discover":
            return _error(METHOD_NOT_FOUND, "Method not found: this server speaks the handshake")
        if self._started is None:
            return _error(INVALID_REQUEST, f"{method} before initialize: initialize first")
        await asyncio.shield(self._started)
        if method == "tools/list":
            return {"result": {"tools": self.proxy.list_tools()}}
        if method == "tools/call":
            return await self._call(params, cancelled)
        if method == "logging/setLevel":
            return await self._set_level(params)
        if method in METHODS:  # prompts, resources, completion (core/proxy/resources.py)
            return await self.proxy.resources.answer(method, params, self.proxy.host, cancelled)
        return _error(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        if self._started is not None:
            return _error(INVALID_REQUEST, "initialize was already received")
        requested = params.get("protocolVersion")
        self.version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        capabilities = params.get("capabilities")
        self.host_capabilities = capabilities if isinstance(capabilities, dict) else {}
        greeting = asks.greeting(self.version, self.host_capabilities, self.proxy.config.servers)
        self.proxy.host = self.proxy.host_of(params.get("clientInfo"))
        self._started = asyncio.ensure_future(self.proxy.start(greeting))
        await asyncio.shield(self._started)
        result: dict[str, Any] = {
            "protocolVersion": self.version,
            "capabilities": self._capabilities(),
            "serverInfo": SERVER_INFO,
        }
        instructions = self.proxy.instructions()
        if instructions is not None:
            result["instructions"] = instructions
        return {"result": result}

    def _capabilities(self) -> dict[str, Any]:
        declared: dict[str, Any] = {"tools": {"listChanged": True}}  # rule 3
        if any("logging" in u.capabilities for u in self.proxy.upstreams.values()):
            declared["logging"] = {}
        declared.update(self.proxy.resources.capabilities())  # only what servers offer
        return declared

    async def _call(self, params: dict[str, Any], cancelled: asyncio.Event) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            why = "tools/call needs a string name and arguments that are an object"
            return {"error": {"code": -32602, "message": why}}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if type(token) not in (str, int):
            token = None
        try:
            result = await self.proxy.serve_call(
                name, arguments, self.proxy.host, cancelled=cancelled, progress=token
            )
        except SignoffError as e:
            if isinstance(e, UpstreamRefused):
                raise
            result = answers.text(f"Signoff: {e} [{type(e).__name__}]", error=True)
        return {"result": result}

    async def _set_level(self, params: dict[str, Any]) -> dict[str, Any]:
        alive = [u for u in self.proxy.upstreams.values() if u.alive]
        # The servers that declared logging; when none did, each answers for itself, as it
        # would directly (their "method not found" differ: some add the method as data).
        running = [u for u in alive if "logging" in u.capabilities] or alive
        if not running:
            return _error(METHOD_NOT_FOUND, "Method not found")
        outcomes = await asyncio.gather(
            *(u.request("logging/setLevel", params, 30.0) for u in running),
            return_exceptions=True,
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if len(errors) < len(outcomes):
            took = next(o for o in outcomes if not isinstance(o, BaseException))
            return {"result": took.result if len(running) == 1 else {}}
        first = errors[0]
        if isinstance(first, UpstreamRefused):
            return {"error": first.error}
        return _error(INTERNAL_ERROR, f"{first} [{type(first).__name__}]")

    async def _notification(self, message: Message) -> None:
        method, params = message["method"], message.get("params") or {}
        if method == "notifications/initialized":
            self._host_ready.set()
        elif method == "notifications/cancelled":
            cancelled = self._calls.get(_key(params.get("requestId")))
            if cancelled is not None:
                cancelled.set()
        elif method == "notifications/roots/list_changed":
            self._spawn(self._roots_changed(params))  # never holds up the host's next message

    def _tools_changed(self, method: str = "notifications/tools/list_changed") -> None:
        if self._started is not None:  # rule 3: before initialize, the host has not listed
            notice: Message = {"jsonrpc": "2.0", "method": method}
            self._spawn(self._deliver(notice))

    async def _roots_changed(self, params: dict[str, Any]) -> None:
        method = "notifications/roots/list_changed"
        try:
            if self._started is not None:
                await asyncio.wait_for(asyncio.shield(self._started), ROOTS_WAIT)
            for upstream in list(self.proxy.upstreams.values()):
                if "roots" in upstream.greeting.capabilities:
                    await asyncio.wait_for(upstream.notify(method, params or None), ROOTS_WAIT)
        except Exception as e:  # the servers' start failed or a server does not read: noted
            log.warning("the host's roots/list_changed was not passed on: %r", e)

    def _answered(self, message: Message) -> None:
        """The host's answer to a request of the proxy's (a server's roots/list, passed on)."""
        request_id = message.get("id")
        future = self._asked.get(request_id) if type(request_id) is int else None
        if future is None or future.done():
            log.warning("an answer from the host to no request of ours: %r", request_id)
            return
        future.set_result({k: message[k] for k in ("result", "error") if k in message})

    # --- from the servers -------------------------------------------------------------------

    async def from_server(self, upstream: Upstream, message: dict[str, Any]) -> Any:
        """A server's own request (its answer returned) or notification (rule 5)."""
        method = message["method"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" in message:
            if method == "roots/list":
                return await self._roots(upstream, params)
            if method in asks.METHODS:  # elicitation and sampling (core/proxy/asks.py)
                return await self.asks.answer(upstream, message["id"], method, params)
            return None  # ping answered by the upstream client; the rest "method not found"
        if method == "notifications/progress":
            token = params.get("progressToken")
            if self.proxy.servers.at_server.get(_key(token)) == upstream.server.name:
                await self._deliver({"jsonrpc": "2.0", "method": method, "params": params})
            else:
                upstream.note(b"dropped a progress notification for no call in flight")
        elif method == "notifications/message":
            upstream.note(b"log: " + json.dumps(params, ensure_ascii=False).encode()[:4096])
            if len(self.proxy.names) > 1:
                logger = params.get("logger")
                named = upstream.server.name + (f"/{logger}" if isinstance(logger, str) else "")
                params = {**params, "logger": named}
            await self._deliver({"jsonrpc": "2.0", "method": method, "params": params})
        elif method == "notifications/cancelled":  # a request of the server's it withdrew
            self.asks.withdraw(upstream, params.get("requestId"))
        elif method == asks.COMPLETE and "elicitation" in self.host_capabilities:
            await self._deliver({"jsonrpc": "2.0", "method": method, "params": params})
        elif self.proxy.resources.forwards(upstream.server.name, method):
            sent = {"params": message["params"]} if isinstance(message.get("params"), dict) else {}
            await self._deliver({"jsonrpc": "2.0", "method": method, **sent})
        else:
            upstream.note(f"{method} not passed on".encode()[:300])
        return None

    async def _roots(self, upstream: Upstream, params: dict[str, Any]) -> dict[str, Any]:
        if "roots" not in self.host_capabilities:
            return _error(METHOD_NOT_FOUND, "Method not found: the host declared no roots")
        try:
            await asyncio.wait_for(self._host_ready.wait(), ROOTS_WAIT)
        except TimeoutError:
            why = f"the host did not say it was initialized within {ROOTS_WAIT:g} s"
            return _error(INTERNAL_ERROR, why)
        answer = await self.ask("roots/list", params or None, ROOTS_WAIT)
        if isinstance(answer.get("result"), dict):  # recorded with each run (rule 5)
            self.proxy.roots[upstream.server.name] = answer["result"].get("roots")
        return answer

    async def ask(self, method: str, params: dict[str, Any] | None, wait: float) -> dict[str, Any]:
        """Ask the host, and its answer: {"result": ...} or {"error": ...}."""
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[request_id] = future
        message: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._deliver(message)
            return await asyncio.wait_for(future, wait)
        except (TimeoutError, asyncio.CancelledError) as e:
            # Given up, or withdrawn (core/proxy/asks.py rule 6): the host is told, so that it
            # stops asking its user for an answer nobody will read.
            await self._deliver({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": request_id}})  # fmt: skip
            if isinstance(e, asyncio.CancelledError):
                raise
            return _error(INTERNAL_ERROR, f"the host did not answer {method} within {wait:g} s")
        finally:
            self._asked.pop(request_id, None)

    # --- closing ------------------------------------------------------------------------

    def host_gone(self) -> None:
        """The host closed its input: each call in flight is given up by it (rule 6)."""
        for cancelled in self._calls.values():
            cancelled.set()
        for future in self._asked.values():
            if not future.done():
                future.set_result(_error(INTERNAL_ERROR, "the host is gone"))

    async def settle(self, wait: float) -> None:
        """Wait up to ``wait`` seconds for the requests in flight to end, then cancel the rest
        (a call's cancellation is then set: core/proxy/server.py ``serve_call``)."""
        if not self._tasks:
            return
        _, late = await asyncio.wait(set(self._tasks), timeout=wait)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)


async def serve(
    config: Config,
    names: list[str],
    store: Store,
    *,
    log_dir: Path,
    hold_seconds: float | None = None,
    config_path: Path | None = None,
    rules_problem: str = "",
) -> None:
    """Run the proxy over this process's stdin and stdout until the host closes them."""
    from core.proxy.hoststdio import host_stdio

    proxy = Proxy(
        config, names, store, log_dir=log_dir, hold_seconds=hold_seconds,
        config_path=config_path, rules_problem=rules_problem,
    )  # fmt: skip
    await proxy.spawn()  # the servers boot while the host gets ready to greet
    spans = telemetry.start(config.telemetry_otlp, store)  # None unless configured
    try:
        # The host's lines are read by Signoff's parser first (core/proxy/hostline.py): a
        # line it refuses is answered by name and never reaches the session.
        async with host_stdio() as (read, write):
            session = HostSession(proxy, write.send)
            try:
                async with read:
                    async for message in read:
                        await session.receive(message)
            finally:
                session.host_gone()
            await session.settle(proxy.config.cancel_grace_seconds + 1)
            await write.aclose()  # the writer ends once what it holds is written
    finally:
        with contextlib.suppress(Exception):
            await proxy.close()
        telemetry.stop(spans, store)
