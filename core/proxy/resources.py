"""Prompts, resources and completion through the proxy, for the servers whose operator turned
them on (decision 0055).

Rules:

1. A server's prompts are offered when the configuration in force says ``prompts = true`` and
   its handshake declared ``prompts``; its resources and resource templates when ``resources =
   true`` and it declared ``resources`` (core/proxy/catalog.py rule 4). The proxy's
   ``initialize`` declares each kind some server it serves declared, turned on or not
   (``capabilities``: a capability cannot be added once the host is greeted, and the operator
   may turn a kind on while the proxy runs, rule 7), with ``listChanged``, and ``completions``
   when one of those servers declared it. A kind declared but offered by no server now lists
   nothing, and a get or a read of it is refused (-32602); a kind no server declared is
   "method not found", as a server without it answers.
2. ``prompts/list`` and ``resources/templates/list`` ask each such server for its whole listing
   (every page) at each request, and offer only what is pinned and unchanged (core/proxy/
   catalog.py rule 3), in one page; with several servers a prompt's name is ``server__name``,
   as a tool's is (core/proxy/offered.py rule 1). ``resources/list`` is each server's resources
   as sent, in one page. A resource's URI is never renamed: the proxy sends a request for it to
   the server that listed it (or whose pinned template's fixed start begins it; with one
   server offering resources, to that one).
3. ``prompts/get`` and ``resources/read`` are each a run through the gate, as a tool call is
   (core/proxy/server.py rule 1): the gate knows them as the server's tools ``prompts/get``
   (arguments ``{name, arguments}``, the name as the server knows it) and ``resources/read``
   (``{uri}``), of class ``read_only`` unless the operator classified them otherwise. So the
   class's rule (read_only: allow), the operator's policy for that tool, and rules on its
   arguments (a prompt's name, a URI's pattern) decide, and each is recorded. A prompt not
   offered now is refused before the gate (-32602), naming why: the listing is asked again at
   each get, so a prompt reworded since it was pinned, or since the host's listing showed it,
   is ``PromptChanged``; one not listed or not pinned, ``PromptUnavailable``.
4. The answer is the server's result as it sent it, or its JSON-RPC error unchanged. A result
   larger than the server's result limit is refused (a prompt or a resource cut in part would be
   another one), and so is one Signoff cannot read exactly: the host gets an error, the run is
   recorded as failed. Signoff's own answers (refused, pending approval, ended) are an error
   ``REFUSED`` whose message says why, in the words a tool call's would.
5. A subscription and a completion pass the same checks as the reads they lead to
   (core/proxy/leads.py): the proxy's policy is asked about that read or get as the gate would
   ask it, and only an allow sends it on; a deny, or an approval a read would need (they have
   none of their own), refuses it with ``REFUSED`` saying why, and nothing reaches the server.
   Nothing is recorded: they are checks, not calls (the read they lead to is a run of its own).
   ``resources/subscribe`` of a URI is checked as a ``resources/read`` of it, then goes to the
   URI's server unchanged; ``unsubscribe`` goes unchecked (it stops a flow). A
   ``completion/complete`` goes to the server of an offered prompt (its name as the server
   knows it), checked as a ``prompts/get`` of it with ``{argument: value}``, or of an offered
   template (the ``ref/resource`` URI is the template), checked as a read of the template
   filled in with the value; any other reference is refused (-32602).
6. A server's ``notifications/prompts/list_changed``, ``notifications/resources/list_changed``
   and ``notifications/resources/updated`` reach the host when the server offers that kind
   (``forwards``): a changed prompt or template is still offered only once pinned again.
7. What is offered follows the configuration in force while the proxy runs (``take_up``, at
   each change core/proxy/live.py notices): a kind turned on or off, or a prompt or template
   pinned, unpinned or pinned anew, has the host told (``notifications/prompts/list_changed``,
   ``notifications/resources/list_changed``), and the gate's tools for gets and reads follow.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core import canonical
from core.errors import (
    ListingRefused,
    PromptChanged,
    PromptUnavailable,
    SignoffError,
    ToolFailed,
    UpstreamError,
    UpstreamRefused,
)
from core.policy.policy import Outcome
from core.proxy import catalog, leads, results
from core.proxy.cancel import current
from core.proxy.offered import Exposed
from core.proxy.pins import ListedTool, ToolState
from core.proxy.upstream import Answer, Upstream
from core.tools import SideEffect, Tool

if TYPE_CHECKING:
    import asyncio

    from core.proxy.host_identity import Host
    from core.proxy.server import Proxy

log = logging.getLogger("signoff.proxy")

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
REFUSED = -32000  # Signoff's own answer to a get or a read: refused, pending, ended (rule 4)
MAX_PAGES = 100

# The methods served here, by the kind a server must offer for them (None: either).
METHODS: dict[str, str | None] = {
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "completion/complete": None,
}
_NOTIFICATIONS = {
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
    "notifications/resources/updated": "resources",
}
# The gate's tools (rule 3): their description and the schema of their arguments.
GATED = {
    "prompts/get": ("prompts", "Get a prompt of this server: its messages, for the host", {
        "type": "object",
        "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["name"], "additionalProperties": False,
    }),
    "resources/read": ("resources", "Read a resource of this server, by its URI", {
        "type": "object", "properties": {"uri": {"type": "string"}},
        "required": ["uri"], "additionalProperties": False,
    }),
}  # fmt: skip


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class Resources:
    """What the proxy offers beside tools, for its ``proxy``'s servers (rules 1-6)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.prompts: dict[str, tuple[str, catalog.Item]] = {}  # by the host's name
        self.refused: dict[str, PromptUnavailable] = {}  # why a listed prompt is not offered
        self.templates: dict[str, str] = {}  # an offered URI template -> its server
        self.uris: dict[str, str] = {}  # a listed resource's URI -> its server
        self.gated: dict[tuple[str, str], Exposed] = {}  # (server, method) -> the gate's tool
        self.spec_hashes: dict[tuple[str, str], str] = {}  # and the spec hash of its Tool
        self.on_changed: Callable[[str], None] | None = None  # the host session's (rule 7)
        self._taken: dict[str, object] | None = None  # what was offered at the last take_up

    # --- what is offered ---------------------------------------------------------------------

    def offering(self, kind: str) -> list[str]:
        """The servers offering ``kind`` (prompts or resources) now (rule 1)."""
        found = []
        for name in self.proxy.names:
            upstream = self.proxy.upstreams.get(name)
            server = self.proxy.config.servers.get(name)
            on = server is not None and getattr(server, kind, False)
            if on and upstream is not None and kind in upstream.capabilities:
                found.append(name)
        return found

    def declaring(self, kind: str) -> list[str]:
        """The servers whose handshake declared ``kind``, turned on or not (rule 1)."""
        return [name for name in self.proxy.names
                if kind in getattr(self.proxy.upstreams.get(name), "capabilities", {})]  # fmt: skip

    def capabilities(self) -> dict[str, Any]:
        """What the proxy's ``initialize`` declares of prompts, resources and completions."""
        declared: dict[str, Any] = {}
        servers: set[str] = set()
        for kind in ("prompts", "resources"):
            names = self.declaring(kind)
            if not names:
                continue
            servers.update(names)
            # The proxy tells of changes itself (rule 7); a subscription is the server's: true
            # when one says true, absent when none says either.
            declared[kind] = {"listChanged": True}
            own = [self._declared(name, kind).get("subscribe") for name in names]
            said = [flag for flag in own if isinstance(flag, bool)]
            if kind == "resources" and said:
                declared[kind]["subscribe"] = any(said)
        if any("completions" in self.proxy.upstreams[name].capabilities for name in servers):
            declared["completions"] = {}
        return declared

    def _declared(self, server: str, kind: str) -> dict[str, Any]:
        own = self.proxy.upstreams[server].capabilities.get(kind)
        return own if isinstance(own, dict) else {}

    def forwards(self, server: str, method: str) -> bool:
        """Whether a server's notification ``method`` reaches the host (rule 6)."""
        kind = _NOTIFICATIONS.get(method)
        return kind is not None and server in self.offering(kind)

    def take_up(self) -> list[Tool]:
        """What is offered now under the configuration in force (rule 7): the gate's tools for
        gets and reads; the host told of a kind whose offer changed since the last take-up."""
        config = self.proxy.config.servers
        now: dict[str, object] = {
            "prompts": [(s, sorted(config[s].prompt_pins.items()))
                        for s in self.offering("prompts")],
            "resources": [(s, sorted(config[s].template_pins.items()))
                          for s in self.offering("resources")],
        }  # fmt: skip
        before, self._taken = self._taken, now
        if before is not None and self.on_changed is not None:
            for kind in ("prompts", "resources"):
                if before[kind] != now[kind]:
                    self.on_changed(f"notifications/{kind}/list_changed")
        return self.gate_tools()

    def gate_tools(self) -> list[Tool]:
        """The gate's tools for gets and reads (rule 3), one per server offering each."""
        tools = []
        self.gated, self.spec_hashes = {}, {}
        for method, (kind, description, schema) in GATED.items():
            for server in self.offering(kind):
                own = self.proxy.config.servers[server].tools.get(method)
                side_effect = (own.side_effect if own else None) or SideEffect.READ_ONLY
                text = json.dumps([method, description, schema]).encode()
                listed = ListedTool(method, description, schema, {},
                                    hashlib.sha256(text).hexdigest(), text)  # fmt: skip
                state = ToolState(listed, "pinned", side_effect, True, "", exposed_schema=schema)
                exposed = Exposed(method, server, state)
                tool = Tool(exposed.gate_name, description, schema, side_effect,
                            self._runner(server, method), terminal=True)  # fmt: skip
                self.gated[(server, method)] = exposed
                self.spec_hashes[(server, method)] = canonical.sha256_hex(tool.spec())
                tools.append(tool)
        return tools

    # --- the host's requests -------------------------------------------------------------------

    async def answer(
        self, method: str, params: dict[str, Any], host: Host, cancelled: asyncio.Event
    ) -> dict[str, Any]:
        """The answer to one of ``METHODS``: {"result": ...} or {"error": ...}; a server's own
        error is raised (``UpstreamRefused``), to reach the host unchanged."""
        kind = METHODS[method]
        kinds = [kind] if kind is not None else ["prompts", "resources"]
        if not any(self.declaring(k) for k in kinds):
            return _error(METHOD_NOT_FOUND, f"Method not found: {method}")
        if method in ("prompts/get", "resources/read", "resources/subscribe") and not any(
            self.offering(k) for k in kinds
        ):
            return _error(INVALID_PARAMS, f"{method}: no server's {kinds[0]} are turned on")
        if method == "prompts/list":
            return {"result": {"prompts": await self._list_prompts()}}
        if method == "resources/templates/list":
            return {"result": {"resourceTemplates": await self._list_templates()}}
        if method == "resources/list":
            return {"result": {"resources": await self._list_resources()}}
        if method == "prompts/get":
            return await self._get(params, host, cancelled)
        if method == "completion/complete":
            return await self._complete(params)
        uri = params.get("uri")
        if not isinstance(uri, str):
            return _error(INVALID_PARAMS, f"{method} needs a string uri")
        server = await self._route(uri)
        if server is None:
            return _error(INVALID_PARAMS, f"no server offering resources listed {uri}")
        if method == "resources/read":
            return await self._gated(server, method, {"uri": uri}, host, cancelled)
        if method == "resources/subscribe":  # checked as the reads it leads to (rule 5)
            refused = self._refused(server, "resources/read", {"uri": uri},
                                    "subscription", f"a read of {uri}")  # fmt: skip
            if refused is not None:
                return refused
        return {"result": (await self._ask(server, method, params)).result}

    async def _get(
        self, params: dict[str, Any], host: Host, cancelled: asyncio.Event
    ) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return _error(INVALID_PARAMS, "prompts/get needs a string name, arguments an object")
        await self._list_prompts()  # asked again: a prompt changed since is not offered
        found = self.prompts.get(name)
        if found is None:  # rule 3
            refused = self.refused.get(name) or PromptUnavailable(
                f"prompt {name} is not available: no server offering prompts lists it"
            )
            return _error(INVALID_PARAMS, f"Signoff: {refused} [{type(refused).__name__}]")
        server, item = found
        sent: dict[str, Any] = {"name": item.key}
        if arguments is not None:
            sent["arguments"] = arguments
        return await self._gated(server, "prompts/get", sent, host, cancelled)

    async def _complete(self, params: dict[str, Any]) -> dict[str, Any]:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(argument, dict) or not all(
            isinstance(argument.get(k), str) for k in ("name", "value")
        ):
            return _error(INVALID_PARAMS, "completion/complete needs an argument with a string"
                                          " name and value")  # fmt: skip
        name, value = argument["name"], argument["value"]
        # What the host already gave for the other arguments leads to the same read or get.
        context = params.get("context")
        given = context.get("arguments") if isinstance(context, dict) else None
        if given is not None and not (
            isinstance(given, dict) and all(isinstance(v, str) for v in given.values())
        ):
            return _error(INVALID_PARAMS, "completion/complete: context arguments are strings")
        values = {**(given or {}), name: value}
        kind = ref.get("type") if isinstance(ref, dict) else None
        server, refused = None, None
        if isinstance(ref, dict) and kind == "ref/prompt" and isinstance(ref.get("name"), str):
            await self._list_prompts()
            found = self.prompts.get(shown := ref["name"])
            if found is not None:
                server, ref = found[0], {**ref, "name": found[1].key}
                refused = self._refused(server, "prompts/get",
                                        {"name": ref["name"], "arguments": values},
                                        "completion", f"a get of prompt {shown}")  # fmt: skip
        elif isinstance(ref, dict) and kind == "ref/resource" and isinstance(ref.get("uri"), str):
            await self._list_templates()
            server = self.templates.get(ref["uri"])
            uri = leads.filled(ref["uri"], values)
            if server is not None:
                refused = self._refused(server, "resources/read", {"uri": uri},
                                        "completion", f"a read of {uri}")  # fmt: skip
        if server is None:
            return _error(INVALID_PARAMS, "completion is offered for an offered prompt or"
                                          " resource template only")  # fmt: skip
        if refused is not None:  # checked as the read or the get it leads to (rule 5)
            return refused
        return {"result": (await self._ask(server, "completion/complete",
                                           {**params, "ref": ref})).result}  # fmt: skip

    def _refused(
        self, server: str, method: str, arguments: dict[str, Any], what: str, lead: str
    ) -> dict[str, Any] | None:
        """The error refusing a ``what`` (a subscription, a completion) that leads to the gate's
        ``method`` with ``arguments`` (``lead``, in words), unless the policy allows that now;
        nothing is recorded (rule 5)."""
        self.proxy.reload_rules()  # a rule tightened applies now, as to a call
        if self.proxy.rules_problem:
            return _error(REFUSED, f"Signoff refused this {what}: the operator's rules cannot"
                                   f" be established: {self.proxy.rules_problem}")  # fmt: skip
        exposed = self.gated.get((server, method))
        if exposed is None:
            return _error(REFUSED, f"Signoff refused this {what}: {method} of server {server}"
                                   " is not offered")  # fmt: skip
        spec_hash = self.spec_hashes[(server, method)]
        decision = leads.asked(self.proxy.policy, exposed, spec_hash, arguments)
        if decision.outcome is Outcome.ALLOW:
            return None
        return _error(REFUSED, leads.said(decision, what, lead))

    async def _gated(
        self,
        server: str,
        method: str,
        arguments: dict[str, Any],
        host: Host,
        cancelled: asyncio.Event,
    ) -> dict[str, Any]:
        """A get or a read as a run through the gate (rules 3 and 4)."""
        exposed = self.gated[(server, method)]
        try:
            result = await self.proxy.serve_call(method, arguments, host, cancelled=cancelled,
                                                 exposed=exposed)  # fmt: skip
        except UpstreamRefused:
            raise
        except SignoffError as e:
            return _error(REFUSED, f"Signoff: {e} [{type(e).__name__}]")
        if set(result) == {"content", "isError"} and len(result["content"]) == 1:
            return _error(REFUSED, str(result["content"][0].get("text")))  # Signoff's own
        return {"result": result}

    def _runner(self, server: str, method: str) -> Any:
        async def run(arguments: dict[str, Any]) -> Any:
            """The server's answer, for the host (``HostCall.answer``), and its record."""
            call = current()
            upstream = self.proxy.upstreams.get(server)
            if upstream is None or not upstream.alive:
                upstream = await self.proxy.servers.restart(server, method)
            timeout = self.proxy.config.call_timeout(server, method)
            try:
                answer = await upstream.request(method, arguments, timeout,
                                                cancelled=call.cancelled)  # fmt: skip
            except UpstreamRefused as e:  # its JSON-RPC error reaches the host unchanged
                call.error = e.error
                raise ToolFailed(str(e), {"rpc_error": e.error}) from None
            except UpstreamError as e:
                raise ToolFailed(f"{e} [{type(e).__name__}]", {"error": type(e).__name__}) from None
            limit = self.proxy.config.result_limit(server)
            why = (
                answer.inexact
                and f"its answer is not JSON Signoff can read exactly: {answer.inexact}"
            )
            if not why and len(answer.raw) > limit:
                why = f"its answer is {len(answer.raw)} bytes, over the {limit} allowed"
            if why:
                call.error = {"code": REFUSED, "message": f"Signoff: server {server}: {why}"}
                raise ToolFailed(why, {"rpc_error": call.error})
            shaped = results.recorded(answer.result, len(answer.raw), None)
            call.answer, call.whole = shaped.result, shaped.whole
            return shaped.record

        return run

    # --- listings ------------------------------------------------------------------------------

    async def _listings(self, kind: str, method: str) -> list[tuple[str, list[Answer]]]:
        """Each offering server's whole listing, every page; a server that fails is left out
        and logged, unless it is the only one (its error is then the host's)."""
        servers = self.offering(kind)
        found = []
        for server in servers:
            try:
                found.append((server, await self._pages(server, method)))
            except (UpstreamError, ListingRefused) as e:
                if len(servers) == 1:
                    raise
                log.warning("server %s: %s not listed: %s", server, method, e)
        return found

    async def _pages(self, server: str, method: str) -> list[Answer]:
        pages: list[Answer] = []
        params: dict[str, Any] = {}
        for _ in range(MAX_PAGES):
            answer = await self._ask(server, method, params)
            pages.append(answer)
            if sum(len(p.raw) for p in pages) > catalog.MAX_LISTING_BYTES:
                raise ListingRefused(f"server {server}: its {method} answer is too large")
            cursor = answer.result.get("nextCursor")
            if not cursor:
                return pages
            params = {"cursor": cursor}
        raise ListingRefused(f"server {server}: a {method} answer of over {MAX_PAGES} pages")

    async def _ask(self, server: str, method: str, params: dict[str, Any]) -> Answer:
        upstream = self.proxy.upstreams.get(server)
        if upstream is None or not upstream.alive:  # died since: started again, as for a call
            upstream = await self.proxy.servers.restart(server, method)
        return await upstream.request(method, params, self.proxy.config.call_timeout_seconds)

    async def _list_prompts(self) -> list[dict[str, Any]]:
        several = len(self.proxy.names) > 1
        shown: list[dict[str, Any]] = []
        offered: dict[str, tuple[str, catalog.Item]] = {}
        refused: dict[str, PromptUnavailable] = {}
        for server, pages in await self._listings("prompts", "prompts/list"):
            listed = catalog.read([p.raw for p in pages], catalog.PROMPTS)
            pins = self.proxy.config.servers[server].prompt_pins
            for item in listed.items:
                name = f"{server}__{item.key}" if several else item.key
                status = catalog.status(item, pins)
                review = f"review it with `signoff pin {server}`"
                if status == "changed":
                    refused[name] = PromptChanged(
                        f"prompt {name} changed since it was pinned: {review}"
                    )
                elif status != "pinned":
                    refused[name] = PromptUnavailable(f"prompt {name} is not pinned: {review}")
                elif name in offered:
                    refused[name] = PromptUnavailable(
                        f"prompt {name}: another server's prompt is already offered as {name}"
                    )
                else:
                    offered[name] = (server, item)
                    shown.append({**item.value, "name": name})
            for what, why in listed.dropped:
                log.warning("server %s: dropped prompt %s: %s", server, what, why)
        self.prompts, self.refused = offered, refused
        return shown

    async def _list_templates(self) -> list[dict[str, Any]]:
        shown: list[dict[str, Any]] = []
        offered: dict[str, str] = {}
        for server, pages in await self._listings("resources", "resources/templates/list"):
            listed = catalog.read([p.raw for p in pages], catalog.TEMPLATES)
            pins = self.proxy.config.servers[server].template_pins
            for item in catalog.offered(listed, pins):
                if item.key not in offered:
                    offered[item.key] = server
                    shown.append(item.value)
        self.templates = offered
        return shown

    async def _list_resources(self) -> list[dict[str, Any]]:
        shown: list[dict[str, Any]] = []
        uris: dict[str, str] = {}
        for server, pages in await self._listings("resources", "resources/list"):
            for page in pages:
                listed = page.result.get("resources")
                if not isinstance(listed, list):
                    raise ListingRefused(f"server {server}: result.resources is not an array")
                for resource in listed:
                    if isinstance(resource, dict) and isinstance(resource.get("uri"), str):
                        uris.setdefault(resource["uri"], server)
                    shown.append(resource)
        self.uris = uris
        return shown

    async def _route(self, uri: str) -> str | None:
        """The server a request for ``uri`` goes to (rule 2)."""
        servers = self.offering("resources")
        if len(servers) == 1:
            return servers[0]
        if uri not in self.uris:
            await self._list_resources()
        if uri in self.uris:
            return self.uris[uri]
        await self._list_templates()
        for template, server in self.templates.items():
            start = template.split("{", 1)[0]
            if start and uri.startswith(start):
                return server
        return None


async def catalogs(upstream: Any, timeout: float) -> dict[str, catalog.Catalog]:
    """A server's prompts and resource templates as listed now, for ``signoff pin``: by the
    configuration table their pins go in (prompt_pins, template_pins), each only when the
    server declared its kind and listed it (a refused listing pins nothing of it, and is
    logged)."""
    found = {}
    kinds = (("prompts", "prompts/list", catalog.PROMPTS),
             ("resources", "resources/templates/list", catalog.TEMPLATES))  # fmt: skip
    for kind, method, what in kinds:
        if kind not in upstream.capabilities:
            continue
        try:
            found[what[2]] = catalog.read(await listed_pages(upstream, method, timeout), what)
        except UpstreamError as e:  # its tools are still pinned; nothing of this kind is
            log.warning("server %s: %s not listed: %s", upstream.server.name, method, e)
    return found


async def listed_pages(upstream: Upstream, method: str, timeout: float) -> list[bytes]:
    """The raw bytes of each page of a listing, following ``nextCursor`` for at most
    ``MAX_PAGES`` pages (``UpstreamError`` when the server refuses one)."""
    pages: list[bytes] = []
    params: dict[str, Any] = {}
    for _ in range(MAX_PAGES):
        answer = await upstream.request(method, params, timeout)
        pages.append(answer.raw)
        cursor = answer.result.get("nextCursor")
        if not cursor:
            break
        params = {"cursor": cursor}
    return pages
