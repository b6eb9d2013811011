"""The script run by the mcp SDK's client over one connection, observed on the wire.

``ClientSession`` (the handshake era) declares roots, answers the server's ``roots/list`` from
the target's roots, asks for progress on the long call, and sets the log level; each step's
observation is what the server sent back, as it arrived (tests/conformance/wire.py). One
``Client`` in its default mode "auto" (discover first, then the handshake) runs a short script.

Nothing here sleeps: a message the server sends on its own (its ``roots/list`` request) is
waited for as a message, for at most ``EVENT_WAIT`` seconds; its effect (the directories the
server allows) is read back by asking again, at most ``POLLS`` times.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.conformance.script import Step, fill
from tests.conformance.targets import Target
from tests.conformance.wire import Message, Wire, recorded
from tests.mcp_servers import ServerCommand

SESSION_WITHIN = 180  # seconds for a whole script: far above its time; a hang fails the test
EVENT_WAIT = 2.0  # seconds for a request or notification the server sends on its own
POLLS = 40  # times a probe is asked again until the server shows it took up new roots
OWN_METHODS = ("notifications/progress", "notifications/message")


def answer(wire: Wire, method: str, since: int) -> dict[str, Any]:
    """The server's answer to the client's last ``method`` request since ``since``."""
    request, response = wire.exchange(method, since)
    if request is None:
        return {"not sent": True}  # the client refused it itself
    if response is None:
        return {"no answer": True}
    return {"error": response["error"]} if "error" in response else {"result": response["result"]}


async def quietly(request: Any) -> None:
    """Await a request; an error answer the SDK raises is on the wire, which is compared."""
    with contextlib.suppress(Exception):
        await request


def text_of(observed: dict[str, Any]) -> str:
    result = observed.get("result") or {}
    return "\n".join(
        str(b.get("text", "")) for b in result.get("content") or [] if isinstance(b, dict)
    )


class Script:
    """One connection's steps; ``roots`` is what the client answers ``roots/list`` with."""

    def __init__(self, session: ClientSession, wire: Wire, target: Target) -> None:
        self.session = session
        self.wire = wire
        self.target = target
        self.roots = list(target.roots_initial)

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root(uri=path.as_uri(), name=path.name) for path in self.roots]
        )

    async def request(self, method: str, send: Any) -> dict[str, Any]:
        mark = self.wire.mark()
        await quietly(send)
        return answer(self.wire, method, mark)

    async def call(self, step: Step, progress: bool = False) -> dict[str, Any]:
        arguments = fill(step.arguments, self.target.places)
        mark = self.wire.mark()
        seen: list[Any] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        observed = await self.request(
            "tools/call",
            self.session.call_tool(
                step.tool, arguments, progress_callback=on_progress if progress else None
            ),
        )
        if not progress:
            return observed
        request, _ = self.wire.exchange("tools/call", mark)
        token = (((request or {}).get("params") or {}).get("_meta") or {}).get("progressToken")
        notes = [m["params"] for m in self.wire.notifications("notifications/progress", mark)]
        return {
            "response": observed,
            "progress": [{k: v for k, v in n.items() if k != "progressToken"} for n in notes],
            "tokens": sorted(
                {"the call's own" if n.get("progressToken") == token else "another" for n in notes}
            ),
        }

    async def roots_step(self, step: Step, changed: bool) -> dict[str, Any]:
        """Whether the server asked for the roots, and what it makes of them (its probe)."""
        mark = 0
        before = ""
        if changed:
            before = text_of(await self.call(step))
            self.roots = list(self.target.roots_changed)
            mark = self.wire.mark()
            await self.session.send_notification(types.RootsListChangedNotification())
        asked = await self.wire.wait_for(
            lambda: bool(self.wire.requests("roots/list", mark)), EVENT_WAIT
        )
        probe = await self.call(step)
        for _ in range(POLLS if asked else 0):
            shown = text_of(probe)
            if all(str(p) in shown for p in self.roots) and (not changed or shown != before):
                break
            probe = await self.call(step)
        return {"asked": asked, "probe": probe}

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """A request of prompts, resources or completion, as the SDK's session sends it."""
        s = self.session
        if method == "prompts/list":
            return await s.list_prompts()
        if method == "prompts/get":
            return await s.get_prompt(params["name"], params.get("arguments"))
        if method == "resources/list":
            return await s.list_resources()
        if method == "resources/templates/list":
            return await s.list_resource_templates()
        if method == "resources/read":
            return await s.read_resource(params["uri"])
        if method == "completion/complete":
            ref = params["ref"]
            kind = (
                types.PromptReference
                if ref["type"] == "ref/prompt"
                else types.ResourceTemplateReference
            )
            return await s.complete(kind.model_validate(ref), params["argument"])
        # Gone from the 2026-07-28 era, which the SDK warns of; the handshake era has them.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if method == "resources/subscribe":
                return await s.subscribe_resource(params["uri"])
            return await s.unsubscribe_resource(params["uri"])

    async def observe(self, step: Step, handshake: Message) -> Any:
        s = self.session
        if step.kind == "initialize":
            if "error" in handshake:
                return {"error": handshake["error"]}
            return handshake["result"].get(step.aspect)
        if step.kind == "list":
            return await self.request("tools/list", s.list_tools())
        if step.kind == "call":
            return await self.call(step, progress=step.progress)
        if step.kind == "ping":
            return await self.request("ping", s.send_ping())
        if step.kind == "set-level":
            level = types.SetLevelRequest(params=types.SetLevelRequestParams(**step.arguments))
            return await self.request("logging/setLevel", s.send_request(level, types.EmptyResult))
        if step.kind in ("roots-initial", "roots-changed"):
            return await self.roots_step(step, changed=step.kind == "roots-changed")
        if step.kind == "request":
            return await self.request(step.tool, self.ask(step.tool, step.arguments))
        if step.kind == "log":
            return [m["params"] for m in self.wire.notifications("notifications/message")]
        if step.kind == "notes":
            return sorted(
                m["method"]
                for m in self.wire.received()
                if "id" not in m and "method" in m and m["method"] not in OWN_METHODS
            )
        raise ValueError(f"unknown step kind {step.kind}")


def _params(command: ServerCommand) -> StdioServerParameters:
    return StdioServerParameters(command=command.command, args=command.args, env=command.env_extra)


async def _session(
    command: ServerCommand, target: Target, steps: list[Step], errlog: Path
) -> dict[str, Any]:
    wire = Wire()
    observed: dict[str, Any] = {}
    with anyio.fail_after(SESSION_WITHIN), errlog.open("a") as log:
        transport = recorded(stdio_client(_params(command), errlog=log), wire)
        async with transport as (read, write):
            script: Script | None = None

            async def list_roots(context: ClientRequestContext) -> types.ListRootsResult:
                assert script is not None
                return await script.list_roots(context)

            async with ClientSession(read, write, list_roots_callback=list_roots) as session:
                script = Script(session, wire, target)
                await session.initialize()
                _, handshake = wire.exchange("initialize", 0)
                assert handshake is not None
                for step in steps:
                    observed[step.id] = await script.observe(step, handshake)
    return observed


async def _auto(
    command: ServerCommand, target: Target, steps: list[Step], errlog: Path
) -> dict[str, Any]:
    wire = Wire()
    observed: dict[str, Any] = {}
    with anyio.fail_after(SESSION_WITHIN), errlog.open("a") as log:
        transport = recorded(stdio_client(_params(command), errlog=log), wire)
        async with Client(transport, mode="auto") as client:
            opening = [
                {"method": m["method"], "answer": "error" if "error" in r else "result"}
                for m in wire.sent()
                if "id" in m and m.get("method") in ("server/discover", "initialize")
                for r in wire.received()
                if r.get("id") == m["id"]
            ]
            for step in steps:
                if step.kind == "initialize":
                    observed[step.id] = {"negotiated": client.protocol_version, "opening": opening}
                elif step.kind == "list":
                    mark = wire.mark()
                    await quietly(client.list_tools())
                    observed[step.id] = answer(wire, "tools/list", mark)
                elif step.kind == "call":
                    mark = wire.mark()
                    await quietly(client.call_tool(step.tool, fill(step.arguments, target.places)))
                    observed[step.id] = answer(wire, "tools/call", mark)
                else:
                    raise ValueError(f"the auto-mode script has no {step.kind} step")
    return observed


def run(
    command: ServerCommand, target: Target, steps: list[Step], errlog: Path, auto: bool = False
) -> dict[str, Any]:
    """Each step's observation, by step id, from one connection to ``command``."""
    if not steps:
        return {}
    return anyio.run(_auto if auto else _session, command, target, steps, errlog)
