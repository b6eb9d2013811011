"""Prompts and resources turned on or off, and prompts pinned, while a real ``signoff proxy``
runs: the running proxy takes it up from the configuration in force and tells the host
(``notifications/prompts/list_changed``, ``notifications/resources/list_changed``), with no
restart (core/proxy/resources.py rules 1 and 7, decision 0062). The operator's changes are the
installed ``signoff`` commands, recorded as every change is; the host is the mcp SDK's client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.host import proxy_session
from tests.mcp_servers import memory_server
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.proxy.test_resources_prompts import GREET, direct, handshake_era, run, runs
from tests.waiting import until


@pytest.fixture
def rig(home: Path) -> Rig:
    return Rig(home)


def told(seen: list[Any], kind: str) -> int:
    """How many ``notifications/KIND/list_changed`` the host has received."""
    name = {"prompts": "PromptListChanged", "resources": "ResourceListChanged"}[kind]
    return sum(f"{name}Notification" in repr(n) for n in seen)


async def operator(rig: Rig, *args: str) -> None:
    """A ``signoff`` command, run while the host's session goes on."""
    await anyio.to_thread.run_sync(lambda: rig.signoff(*args))


async def prompts(host: ClientSession) -> list[str]:
    return [p.name for p in (await host.list_prompts()).prompts]


@pytest.mark.guarantee("G-PROMPT-1")
def test_prompts_turned_on_pinned_and_off_reach_a_running_proxys_host(rig: Rig) -> None:
    listed = rig.home / "fake-prompts.json"
    listed.write_text(json.dumps([GREET]))
    rig.add_fake("fake", NOTES_TOOLS, prompts=str(listed),
                 capabilities={"tools": {}, "prompts": {}})  # fmt: skip
    rig.pin("fake")  # the prompt is pinned; prompts stay off
    seen: list[Any] = []

    async def scenario() -> None:
        async with proxy_session(rig.home, "fake", hold=0.3, env=rig.env, notifications=seen,
                                 errlog=rig.home / "host-stderr.log") as host:  # fmt: skip
            caps = host.server_capabilities
            # Declared though off: a capability cannot be added once the host is greeted.
            assert caps is not None and caps.prompts is not None
            assert caps.prompts.list_changed is True
            assert await prompts(host) == []  # off: nothing offered
            with pytest.raises(MCPError) as refused:
                await host.get_prompt("greet", {"who": "you"})
            assert refused.value.error.code == -32602

            await operator(rig, "servers", "set", "fake", "--prompts", "on")
            await until(lambda: told(seen, "prompts") == 1, "the host told prompts changed")
            assert await prompts(host) == ["greet"]
            got = await host.get_prompt("greet", {"who": "you"})  # a run the gate now knows
            assert "you" in json.dumps(got.model_dump())

            listed.write_text(json.dumps([GREET, {"name": "other"}]))  # the server adds one
            assert await prompts(host) == ["greet"]  # waits for the operator
            await operator(rig, "pin", "fake", "--accept")
            await until(lambda: told(seen, "prompts") == 2, "the host told of the new pin")
            assert await prompts(host) == ["greet", "other"]

            await operator(rig, "servers", "set", "fake", "--prompts", "off")
            await until(lambda: told(seen, "prompts") == 3, "the host told prompts are gone")
            assert await prompts(host) == []
            with pytest.raises(MCPError) as refused:
                await host.get_prompt("greet", {"who": "me"})
            assert refused.value.error.code == -32602
            assert "turned on" in refused.value.error.message

    run(scenario)
    assert told(seen, "resources") == 0  # the server declared no resources
    got = {"name": "greet", "arguments": {"who": "you"}}
    assert runs(rig) == [("fake", "prompts/get", "COMPLETED", got)]  # the refused never ran


@pytest.mark.guarantee("G-PROMPT-1")
def test_resources_turned_on_while_the_proxy_runs_are_listed_and_read_through_the_gate(
    rig: Rig, tmp_path: Path
) -> None:
    memory = memory_server(tmp_path / "memory.jsonl")
    rig.add("memory", memory.command, memory.args, env=memory.env_extra)
    rig.pin("memory")
    seen: list[Any] = []

    async def scenario() -> None:
        own = await direct(memory, tmp_path / "direct.log")
        async with proxy_session(rig.home, "memory", hold=0.3, env=rig.env, notifications=seen,
                                 errlog=rig.home / "host-stderr.log") as host:  # fmt: skip
            caps = host.server_capabilities
            assert caps is not None and caps.resources is not None
            assert (await host.list_resources()).resources == []
            await operator(rig, "servers", "set", "memory", "--resources", "on")
            await until(lambda: told(seen, "resources") == 1, "the host told resources changed")
            listed = [r.model_dump(by_alias=True, exclude_none=True)
                      for r in (await host.list_resources()).resources]  # fmt: skip
            assert listed == own["resources"]
            read = await host.read_resource("memory://knowledge-graph")
            assert str(read.contents[0].uri) == "memory://knowledge-graph"

    with handshake_era():
        run(scenario)
    assert runs(rig) == [
        ("memory", "resources/read", "COMPLETED", {"uri": "memory://knowledge-graph"})
    ]


def test_servers_catalog_says_each_prompts_state_and_names_an_unknown_server(rig: Rig) -> None:
    listed = rig.home / "fake-prompts.json"
    listed.write_text(json.dumps([GREET, {"name": "other"}]))
    rig.add_fake("fake", NOTES_TOOLS, prompts=str(listed),
                 capabilities={"tools": {}, "prompts": {}})  # fmt: skip
    rig.pin("fake")
    listed.write_text(json.dumps([{**GREET, "description": "Reworded"}, {"name": "other"},
                                  {"name": "added"}]))  # fmt: skip
    said = rig.signoff("servers", "catalog", "fake").stdout.splitlines()
    assert said == ["prompts greet: changed", "prompts other: pinned", "prompts added: new"]
    before = (rig.home / "config.toml").read_bytes()
    refused = rig.signoff("servers", "catalog", "nothing", check=False)
    assert refused.returncode == 2 and "no server nothing [ConfigError]" in refused.stderr
    assert (rig.home / "config.toml").read_bytes() == before  # nothing changed
