"""A server asking the user (elicitation) or the host's model (sampling), through the proxy.

These are the server's own channels to the person and the model at the host, never Signoff's:
Signoff asks for approvals outside the host only (decision 0057, seed 000 decision 8).

Rules:

1. The servers are greeted with the host's ``roots`` and ``elicitation`` capabilities as the
   host declared them (``greeting``). ``sampling`` is declared only to a server whose
   configuration says ``sampling = true``, and only when the host declared it
   (core/proxy/upstream.py ``Greeting.capabilities_for``); off by default. ``signoff pin``
   declares elicitation, and sampling to a server allowed it, so that it sees the tools a
   server lists to such a host (``listing``).
2. A server's ``elicitation/create`` is asked of the host once the host said it is initialized,
   its message marked with the server's name (``[NAME] ...``: the host shows every request as
   Signoff's, and a server's question must never read as Signoff's own); the host's answer
   (result or error) is handed back unchanged. To a host that declared no elicitation it is
   "method not found", as such a client answers. A server's
   ``notifications/elicitation/complete`` (a URL-mode elicitation done) reaches such a host.
3. A server's ``sampling/createMessage`` is forwarded, unchanged, only when the server was
   greeted with sampling (rule 1) and the configuration in force still allows it
   (core/proxy/config_record.py); otherwise it is refused with a JSON-RPC error naming why
   (``SamplingRefused``), and the host never sees it.
4. Each is recorded in the chain as an event of no run, once the host answered or the proxy
   refused: ``elicitation.asked`` {server, host, mode, message_sha256, outcome, fields} (the
   action accepted/declined/cancelled, or ``error`` and its code, ``not offered`` or
   ``withdrawn``; the names of the fields the user filled in, never their values). A sampling
   request is recorded before it is forwarded (``sampling.asked`` {server, host,
   request_sha256, request_bytes, outcome: forwarded | refused, why}; one that cannot be
   recorded is not forwarded), and its answer once the host gave it (``sampling.answered``
   {server, request_sha256, outcome: result | error | withdrawn, answer_sha256}). Hashes are
   SHA-256 over the canonical JSON (RFC 8785) of the request's ``params`` and of the answer. An
   answer that cannot be recorded is not handed back: the server gets an error instead.
5. Each waits for the host at most the longest call timeout of the server's (the request is
   made within one of its calls; no answer counts after every call could have ended); then
   the host is told it is cancelled, and the server gets an error.
6. A server's ``notifications/cancelled`` for a request of its own still waiting on the host
   withdraws it: the host is told (``notifications/cancelled``), the server gets no answer
   (JSON-RPC), and it is recorded with the outcome ``withdrawn``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from core import canonical
from core.errors import SamplingRefused, SignoffError
from core.proxy import config_record
from core.proxy.config import Config, ServerConfig
from core.proxy.upstream import LISTING, Greeting, Upstream
from core.store import Store, utc_now

log = logging.getLogger("signoff.proxy")

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
METHODS = (ELICIT, SAMPLE)
COMPLETE = "notifications/elicitation/complete"  # a URL-mode elicitation done: passed on
METHOD_NOT_FOUND = -32601
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
ACTIONS = ("accept", "decline", "cancel")

Ask = Callable[[str, dict[str, Any] | None, float], Awaitable[dict[str, Any]]]


def greeting(
    version: str, host: Mapping[str, Any], servers: Mapping[str, ServerConfig]
) -> Greeting:
    """What the servers are told of the client (rule 1)."""
    declared = {k: host[k] for k in ("roots", "elicitation") if host.get(k) is not None}
    sampling = host.get("sampling")
    allowed = frozenset(name for name, server in servers.items() if server.sampling)
    return Greeting(version, declared, sampling=sampling if isinstance(sampling, dict) else None,
                    sampling_for=allowed)  # fmt: skip


def listing(server: ServerConfig) -> Greeting:
    """What ``signoff pin`` and ``servers test`` declare (core/proxy/upstream.py ``LISTING``),
    with elicitation, and sampling to a server allowed it: a server lists some tools only to a
    client that can answer them (server-everything's elicitation and sampling tools), and a
    tool not seen when pinning is never offered."""
    capabilities = {**LISTING.capabilities, "elicitation": {"form": {}, "url": {}}}
    allowed = frozenset({server.name} if server.sampling else ())
    return Greeting(capabilities=capabilities, sampling={}, sampling_for=allowed)


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _digest(value: Any) -> tuple[str, int]:
    """SHA-256 and size of the canonical form (the message was parsed exactly upstream)."""
    try:
        data = canonical.dumps(value)
    except SignoffError:  # unreachable for what Signoff's parser read; recorded as such
        return "", 0
    return hashlib.sha256(data).hexdigest(), len(data)


def wait_for(config: Config, server: str) -> float:
    """The longest call timeout of the server's (rule 5)."""
    entry = config.servers.get(server)
    tools = list(entry.tools) if entry is not None else []
    return max([config.call_timeout(server, ""), *(config.call_timeout(server, t) for t in tools)])


class Asks:
    """A host session's answers to its servers' elicitation and sampling (rules 2-5).

    ``config_path``: the configuration the database governs (None: ``config`` alone is in
    force); ``ask`` asks the host and returns its answer; ``ready`` is set once the host said
    it is initialized; ``capabilities`` gives what the host declared; ``host`` who it is."""

    def __init__(
        self,
        store: Store,
        config: Config,
        config_path: Path | None,
        *,
        ask: Ask,
        ready: asyncio.Event,
        capabilities: Callable[[], Mapping[str, Any]],
        host: Callable[[], str],
    ) -> None:
        self.store = store
        self.config = config
        self.config_path = config_path
        self._ask = ask
        self._ready = ready
        self._capabilities = capabilities
        self._host = host
        self._waiting: dict[tuple[str, str], asyncio.Task[Any]] = {}  # (server, its id as JSON)

    async def answer(
        self, upstream: Upstream, request_id: Any, method: str, params: dict[str, Any]
    ) -> Any:
        """The answer to the server's request ``request_id`` (its task is withdrawn, rule 6)."""
        key = (upstream.server.name, json.dumps(request_id))
        task = asyncio.current_task()
        if task is not None:
            self._waiting[key] = task
        try:
            if method == ELICIT:
                return await self._elicit(upstream, params)
            return await self._sample(upstream, params)
        finally:
            if self._waiting.get(key) is task:
                del self._waiting[key]

    def withdraw(self, upstream: Upstream, request_id: Any) -> None:
        """The server cancelled its request ``request_id`` (rule 6)."""
        task = self._waiting.pop((upstream.server.name, json.dumps(request_id)), None)
        if task is not None:
            task.cancel()

    async def _withdrawable(
        self, kind: str, event: dict[str, Any], method: str, params: dict[str, Any]
    ) -> Any:
        """The host's answer; a request the server withdrew is recorded so (rule 6)."""
        try:
            return await self._host_answer(event["server"], method, params)
        except asyncio.CancelledError:
            self._record(kind, {**event, "outcome": "withdrawn"})
            raise

    async def _host_answer(self, server: str, method: str, params: dict[str, Any]) -> Any:
        wait = wait_for(self.config, server)
        try:
            await asyncio.wait_for(self._ready.wait(), wait)
        except TimeoutError:
            why = f"the host did not say it was initialized within {wait:g} s"
            return _error(INTERNAL_ERROR, why)
        return await self._ask(method, params, wait)

    async def _elicit(self, upstream: Upstream, params: dict[str, Any]) -> Any:
        server = upstream.server.name
        mode = params.get("mode", "form")
        sha, _ = _digest(params.get("message"))
        event: dict[str, Any] = {"server": server, "host": self._host(), "message_sha256": sha,
                                 "mode": mode if isinstance(mode, str) else ""}  # fmt: skip
        if self._capabilities().get("elicitation") is None:
            self._record("elicitation.asked", {**event, "outcome": "not offered"})
            return _error(METHOD_NOT_FOUND, "Method not found: the host declared no elicitation")
        message = params.get("message")
        shown = params
        if isinstance(message, str):  # never read as Signoff's own question (rule 2)
            shown = {**params, "message": f"[{server}] {message}"}
        answer = await self._withdrawable("elicitation.asked", event, ELICIT, shown)
        result = answer.get("result")
        if isinstance(result, dict):
            action = result.get("action")
            content = result.get("content")
            event["outcome"] = action if action in ACTIONS else "unreadable"
            event["fields"] = sorted(content) if isinstance(content, dict) else []
        else:
            error = answer.get("error")
            event["outcome"] = "error"
            event["code"] = error.get("code") if isinstance(error, dict) else None
        return self._recorded("elicitation.asked", event, answer)

    async def _sample(self, upstream: Upstream, params: dict[str, Any]) -> Any:
        server = upstream.server.name
        sha, size = _digest(params)
        event: dict[str, Any] = {"server": server, "host": self._host(),
                                 "request_sha256": sha, "request_bytes": size}  # fmt: skip
        why = self._refusal(upstream)
        if why:
            refused = SamplingRefused(why)
            event.update(outcome="refused", why=why)
            self._record("sampling.asked", event)
            return _error(INVALID_REQUEST, f"Signoff: {refused} [{type(refused).__name__}]")
        if not self._record("sampling.asked", {**event, "outcome": "forwarded"}):
            return _error(INTERNAL_ERROR, "Signoff could not record this request: not forwarded")
        answered: dict[str, Any] = {"server": server, "request_sha256": sha}
        answer = await self._withdrawable("sampling.answered", answered, SAMPLE, params)
        answered["outcome"] = "result" if isinstance(answer.get("result"), dict) else "error"
        answered["answer_sha256"] = _digest(answer)[0]
        return self._recorded("sampling.answered", answered, answer)

    def _refusal(self, upstream: Upstream) -> str:
        """Why this server may not sample now, or "" (rules 1 and 3)."""
        server = upstream.server.name
        greeted = upstream.greeting
        if server not in greeted.sampling_for:
            return (f"server {server} is not allowed to ask the host's model: sampling is off"
                    " for it (`signoff servers sampling NAME on`)")  # fmt: skip
        if greeted.sampling is None:
            return f"the host did not declare sampling, so server {server} cannot use it"
        try:
            still = self._allowed(server)
        except SignoffError as e:
            return f"the configuration in force cannot be read: {e} [{type(e).__name__}]"
        if not still:
            return f"sampling was turned off for server {server} since the proxy started"
        return ""

    def _allowed(self, server: str) -> bool:
        """Whether the configuration in force lets ``server`` sample (rule 3)."""
        config = self.config
        if self.config_path is not None:
            config = config_record.state(self.store, self.config_path).config()
        entry = config.servers.get(server)
        return entry is not None and entry.sampling

    def _recorded(self, kind: str, event: dict[str, Any], answer: Any) -> Any:
        """The answer, once its event is recorded; an error when it could not be (rule 4)."""
        if self._record(kind, event):
            return answer
        return _error(INTERNAL_ERROR, "Signoff could not record this answer, so it withholds it")

    def _record(self, kind: str, event: dict[str, Any]) -> bool:
        try:
            with self.store.transaction(kind) as tx:
                tx.append_event(kind=kind, payload=event, at=utc_now())
        except SignoffError as e:
            log.error("a %s of server %s could not be recorded: %s", kind, event["server"], e)
            return False
        return True
