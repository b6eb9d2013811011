"""A subscription and a completion through a real ``signoff proxy`` pass the same checks as the
reads they lead to (core/proxy/resources.py rule 5, core/proxy/leads.py): one toward a read or a
get the operator's rules reject, or that would wait for the operator, is refused saying why and
never reaches the server; an allowed one does; neither is recorded as a run.

The server is server-everything behind a tap: a process passing its stdio through and writing
down each message the proxy sends it, so what reached the server is read, not guessed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from core.proxy.leads import filled
from core.proxy.resources import REFUSED
from tests.mcp_servers import everything_server
from tests.proxy.rig import Rig
from tests.proxy.test_resources_prompts import handshake_era, run, runs

WATCHED = "demo://resource/static/document/features.md"
TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
HIDDEN = "demo://resource/dynamic/text/2"  # what the reject rule below refuses to read
SHOWN = "demo://resource/dynamic/text/1"
# Passes a server's stdio through, writing down each line the proxy sends it (LOG, then the
# server's command line). A server left running when the proxy closes is stopped.
TAP = """
import subprocess, sys

log, command = sys.argv[1], sys.argv[2:]
server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=sys.stdout)
with open(log, "ab") as seen:
    for line in sys.stdin.buffer:
        seen.write(line.rstrip(b"\\n") + b"\\n")
        seen.flush()
        server.stdin.write(line)
        server.stdin.flush()
server.stdin.close()
try:
    server.wait(timeout=1.5)
except subprocess.TimeoutExpired:
    server.kill()
"""


@pytest.fixture
def rig(home: Path) -> Rig:
    return Rig(home)


def tapped_everything(rig: Rig, *kinds: str) -> Path:
    """server-everything as ``everything``, behind the tap, with ``kinds`` turned on and
    pinned; the file the tap writes to."""
    everything = everything_server()
    tap, log = rig.home / "tap.py", rig.home / "sent.jsonl"
    tap.write_text(TAP)
    command = [str(tap), str(log), everything.command, *everything.args]
    rig.add("everything", sys.executable, command, env=everything.env_extra)
    rig.signoff("servers", "set", "everything", *(f for k in kinds for f in (f"--{k}", "on")))
    rig.pin("everything")
    return log


def sent(log: Path, method: str) -> list[Any]:
    """The params of each ``method`` request the proxy sent the server, in order."""
    found = []
    for line in log.read_text().splitlines():
        message = json.loads(line)
        if message.get("method") == method:
            found.append(message.get("params"))
    return found


def reject(rig: Rig, tool: str, *condition: str) -> str:
    """A reject rule on the gate's ``tool`` of everything; its id."""
    rig.signoff("rule", "add", "--server", "everything", "--tool", tool, "--reject", *condition)
    [rule] = [
        json.loads(line) for line in rig.signoff("rule", "list", "--json").stdout.splitlines()
    ]
    return str(rule["id"])


async def refused(request: Any) -> str:
    """The message of the REFUSED error ``request`` is answered with."""
    with pytest.raises(MCPError) as error:
        await request
    assert error.value.error.code == REFUSED
    return error.value.error.message


async def complete(host: ClientSession, uri: str, name: str, value: str) -> Any:
    ref = types.ResourceTemplateReference(type="ref/resource", uri=uri)
    return await host.complete(ref, {"name": name, "value": value})


@pytest.mark.guarantee("G-RULES-1")
def test_a_subscription_and_a_completion_toward_a_rejected_uri_are_refused_and_never_sent(
    rig: Rig,
) -> None:
    log = tapped_everything(rig, "resources")
    rule = reject(rig, "resources/read", "--pattern", "uri=^demo://resource/dynamic/text/2")

    async def scenario() -> None:
        async with rig.client("everything") as host:
            with handshake_era():
                said = await refused(host.subscribe_resource(HIDDEN))
            assert rule in said  # the decision's reason names the rule
            assert rule in await refused(complete(host, TEMPLATE, "resourceId", "2"))
            # Allowed ones still reach the server, and are answered as it answers them.
            with handshake_era():
                await host.subscribe_resource(WATCHED)
            await complete(host, TEMPLATE, "resourceId", "1")

    run(scenario)
    assert sent(log, "resources/subscribe") == [{"uri": WATCHED}]
    [completion] = sent(log, "completion/complete")
    assert completion["argument"] == {"name": "resourceId", "value": "1"}
    assert runs(rig) == []  # checks, not calls: nothing recorded


@pytest.mark.guarantee("G-RULES-1")
def test_a_completion_toward_a_rejected_prompt_get_is_refused_and_never_sent(rig: Rig) -> None:
    log = tapped_everything(rig, "prompts")
    engineering = {"type": "object", "properties": {"department": {"const": "Engineering"}},
                   "required": ["department"]}  # fmt: skip
    rule = reject(rig, "prompts/get", "--when", json.dumps(
        {"properties": {"arguments": engineering}, "required": ["arguments"]}
    ))  # fmt: skip
    prompt = types.PromptReference(type="ref/prompt", name="completable-prompt")

    async def scenario() -> None:
        async with rig.client("everything") as host:
            asked = host.complete(prompt, {"name": "department", "value": "Engineering"})
            assert rule in await refused(asked)
            done = await host.complete(prompt, {"name": "department", "value": "E"})
            assert done.completion.values  # the server's own completions, passed on
            # Another argument, the rejected value given as context: the same get.
            in_context = host.complete(prompt, {"name": "name", "value": "A"},
                                       context_arguments={"department": "Engineering"})  # fmt: skip
            assert rule in await refused(in_context)

    run(scenario)
    assert [p["argument"]["value"] for p in sent(log, "completion/complete")] == ["E"]
    assert runs(rig) == []


@pytest.mark.guarantee("G-RULES-1")
def test_a_subscription_a_read_would_ask_the_operator_for_is_refused_saying_why(
    rig: Rig,
) -> None:
    log = tapped_everything(rig, "resources")
    rig.signoff("policy", "read_only", "approve")

    async def scenario() -> None:
        async with rig.client("everything") as host:
            with handshake_era():
                said = await refused(host.subscribe_resource(WATCHED))
                assert "the rule for read_only: approve" in said  # the decision's reason
                assert "approval" in said
                await host.unsubscribe_resource(WATCHED)  # unchecked
            await refused(complete(host, TEMPLATE, "resourceId", "1"))

    run(scenario)
    assert sent(log, "resources/subscribe") == []
    assert sent(log, "completion/complete") == []
    assert sent(log, "resources/unsubscribe") == [{"uri": WATCHED}]
    assert rig.pending() == [] and runs(rig) == []  # nothing waits for an approval it cannot use


@pytest.mark.guarantee("G-RULES-1")
@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("demo://text/{id}", "demo://text/a/b"),
        ("file:///{+id}", "file:///a/b"),
        ("file:///notes{/other,id}", "file:///notes/a/b"),
        ("demo://x{?other,id}", "demo://x?id=a/b"),
        ("demo://x{;id}{&other}", "demo://x;id=a/b"),
        ("demo://x/{id:3}{#other}", "demo://x/a/b"),
        ("demo://x/{other}{.id*}", "demo://x/.a/b"),
    ],
)
def test_a_template_is_filled_with_the_value_typed_as_written_the_others_left_out(
    template: str, uri: str
) -> None:
    assert filled(template, {"id": "a/b"}) == uri
