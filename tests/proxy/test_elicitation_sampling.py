"""A server asking the user (elicitation) or the host's model (sampling) through ``signoff
proxy`` (core/proxy/asks.py, decision 0057): a server built with the mcp SDK, the SDK's
ClientSession as the host, each a real process; what reached each end is read in the tool's
result, what was recorded in the chain."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from core import canonical
from core.errors import ConfigError
from core.proxy import config as configuration
from tests.conftest import SIGNOFF
from tests.host import text, tree_under_test
from tests.mcp_servers import everything_server
from tests.proxy.rig import Rig

ASKING = Path(__file__).with_name("asking_server.py")
WITHIN = 120  # seconds for a whole session: far above its time; a hang fails the test
TYPED = "what the tester typed"


@pytest.fixture
def rig(home: Path) -> Rig:
    rig = Rig(home)
    rig.add("asking", sys.executable, [str(ASKING)])
    rig.pin("asking")
    rig.classify(
        "asking",
        ask_name="read_only",
        ask_model="read_only",
        capabilities="read_only",
        ask_url="read_only",
        ask_briefly="read_only",
        ask_stubbornly="read_only",
    )
    return rig


@asynccontextmanager
async def host(rig: Rig, name: str = "asking", **callbacks: Any) -> AsyncIterator[ClientSession]:
    """The SDK's client as the host of ``signoff proxy NAME``, with ``callbacks`` (its
    ``elicitation_callback``, ``sampling_callback``): it declares what it has a callback for."""
    params = StdioServerParameters(
        command=str(SIGNOFF), args=["proxy", name, "--hold", "0.3"],
        env={"SIGNOFF_HOME": str(rig.home), **tree_under_test()},
    )  # fmt: skip
    with anyio.fail_after(WITHIN), (rig.home / "host-stderr.log").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, **callbacks) as session,
        ):
            await session.initialize()
            yield session


async def greeted(session: ClientSession) -> set[str]:
    """The capabilities the server was greeted with, as it says."""
    return set(json.loads(text(await session.call_tool("capabilities", {}))))


def asked(rig: Rig, kind: str) -> list[dict[str, Any]]:
    with rig.store() as store:
        rows = store._conn.execute(
            "SELECT payload FROM events WHERE kind = ? AND run_id IS NULL ORDER BY seq", (kind,)
        ).fetchall()
    return [json.loads(payload) for (payload,) in rows]


def verified(rig: Rig) -> None:
    done = rig.signoff("verify", "--json", check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)


@pytest.mark.guarantee("G-ASK-1")
def test_an_elicitation_reaches_the_host_named_as_the_servers_and_its_answer_the_server(
    rig: Rig,
) -> None:
    seen: list[types.ElicitRequestParams] = []

    async def answer(_: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        seen.append(params)
        return types.ElicitResult(action="accept", content={"name": TYPED})

    async def scenario() -> str:
        async with host(rig, elicitation_callback=answer) as session:
            assert await greeted(session) == {"elicitation"}
            return text(await session.call_tool("ask_name", {}))

    assert anyio.run(scenario) == f"accept: {TYPED}"
    assert [p.message for p in seen] == ["[asking] What is your name?"]
    [event] = asked(rig, "elicitation.asked")
    assert (event["server"], event["mode"], event["outcome"], event["fields"]) == (
        "asking", "form", "accept", ["name"],
    )  # fmt: skip
    assert TYPED not in json.dumps(asked(rig, "elicitation.asked"))  # the action, not the text
    verified(rig)


def test_a_declined_elicitation_is_handed_back_and_recorded_as_declined(rig: Rig) -> None:
    async def decline(_: ClientRequestContext, __: types.ElicitRequestParams) -> Any:
        return types.ElicitResult(action="decline")

    async def scenario() -> str:
        async with host(rig, elicitation_callback=decline) as session:
            return text(await session.call_tool("ask_name", {}))

    assert anyio.run(scenario) == "decline"
    assert [e["outcome"] for e in asked(rig, "elicitation.asked")] == ["decline"]


def test_a_question_the_server_withdraws_is_withdrawn_from_the_host_and_recorded(rig: Rig) -> None:
    withdrawn = anyio.Event()

    async def never(_: ClientRequestContext, __: types.ElicitRequestParams) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()  # the host cancelled its question: the proxy told it to

    async def scenario() -> str:
        async with host(rig, elicitation_callback=never) as session:
            said = text(await session.call_tool("ask_briefly", {}))
            await withdrawn.wait()  # within the session's WITHIN
            return said

    assert anyio.run(scenario) == "gave up"
    assert [e["outcome"] for e in asked(rig, "elicitation.asked")] == ["withdrawn"]
    verified(rig)


def test_a_question_the_host_leaves_unanswered_past_the_call_timeout_is_withdrawn_from_it(
    rig: Rig,
) -> None:
    rig.signoff("settings", "call_timeout_seconds", "2", "--server", "asking")
    withdrawn = anyio.Event()

    async def never(_: ClientRequestContext, __: types.ElicitRequestParams) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()

    async def scenario() -> None:
        async with host(rig, elicitation_callback=never) as session:
            await session.call_tool("ask_stubbornly", {})  # the call itself times out too
            await withdrawn.wait()  # within the session's WITHIN

    anyio.run(scenario)
    [event] = asked(rig, "elicitation.asked")
    assert (event["outcome"], event["code"]) == ("error", -32603)  # not withdrawn by the server


def test_a_url_elicitation_reaches_the_host_and_so_does_its_completion(rig: Rig) -> None:
    seen: list[types.ElicitRequestParams] = []
    notified: list[Any] = []

    async def answer(_: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        seen.append(params)
        return types.ElicitResult(action="accept")

    async def keep(message: Any) -> None:
        notified.append(message)

    async def scenario() -> str:
        async with host(rig, elicitation_callback=answer, message_handler=keep) as session:
            return text(await session.call_tool("ask_url", {}))

    assert anyio.run(scenario) == "accept"
    assert [(p.mode, p.url) for p in seen] == [("url", "https://example.invalid/sign-in")]  # type: ignore[union-attr]
    assert any(
        getattr(n, "method", "") == "notifications/elicitation/complete" for n in notified
    ), notified
    [event] = asked(rig, "elicitation.asked")
    assert (event["mode"], event["outcome"], event["fields"]) == ("url", "accept", [])


@pytest.mark.guarantee("G-ASK-1")
def test_a_host_without_elicitation_has_the_server_told_it_is_not_supported(rig: Rig) -> None:
    async def scenario() -> str:
        async with host(rig) as session:
            assert await greeted(session) == set()
            return text(await session.call_tool("ask_name", {}))

    assert anyio.run(scenario).startswith("error -32601: Method not found")
    assert [e["outcome"] for e in asked(rig, "elicitation.asked")] == ["not offered"]
    verified(rig)


@pytest.mark.guarantee("G-ASK-1")
def test_sampling_is_refused_by_default_naming_why_and_the_host_never_sees_it(rig: Rig) -> None:
    reached: list[Any] = []

    async def model(_: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        reached.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="no"), model="m"
        )

    async def scenario() -> str:
        async with host(rig, sampling_callback=model) as session:
            assert await greeted(session) == set()  # not told the host has sampling
            return text(await session.call_tool("ask_model", {"question": "6 x 7?"}))

    said = anyio.run(scenario)
    assert said.startswith("error -32600") and "[SamplingRefused]" in said, said
    assert "not allowed" in said
    assert reached == []
    [event] = asked(rig, "sampling.asked")
    assert (event["server"], event["outcome"]) == ("asking", "refused")
    assert event["request_bytes"] > 0 and len(event["request_sha256"]) == 64
    verified(rig)


@pytest.mark.guarantee("G-ASK-1")
def test_sampling_is_forwarded_for_a_server_allowed_and_each_request_recorded(rig: Rig) -> None:
    assert rig.signoff("servers", "sampling", "asking").stdout.strip() == "sampling for asking: off"
    rig.signoff("servers", "sampling", "asking", "on")
    assert rig.signoff("servers", "sampling", "asking").stdout.strip() == "sampling for asking: on"
    [listed] = json.loads(rig.signoff("servers", "list", "--json").stdout)
    assert listed["sampling"] is True
    assert "sampling on" in rig.signoff("servers", "list").stdout
    reached: list[types.CreateMessageRequestParams] = []
    answer = types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="42"), model="m"
    )

    async def model(_: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        reached.append(params)
        return answer

    async def scenario() -> str:
        async with host(rig, sampling_callback=model) as session:
            assert await greeted(session) == {"sampling"}
            return text(await session.call_tool("ask_model", {"question": "6 x 7?"}))

    assert anyio.run(scenario) == "model: 42"
    assert [p.messages[0].content.text for p in reached] == ["6 x 7?"]  # type: ignore[union-attr]
    [event] = asked(rig, "sampling.asked")
    assert (event["server"], event["outcome"]) == ("asking", "forwarded")
    [answered] = asked(rig, "sampling.answered")
    assert (answered["outcome"], answered["request_sha256"]) == ("result", event["request_sha256"])
    sent = {"result": answer.model_dump(by_alias=True, exclude_none=True, mode="json")}
    assert answered["answer_sha256"] == canonical.sha256_hex(sent)
    verified(rig)


@pytest.mark.guarantee("G-ASK-1")
def test_sampling_turned_off_while_the_proxy_runs_is_refused_from_the_next_request(
    rig: Rig,
) -> None:
    """The server was greeted with sampling when the proxy started; the operator turns it off
    while the host's session goes on: the next request is refused, and the host never sees it."""
    rig.signoff("servers", "sampling", "asking", "on")
    reached: list[types.CreateMessageRequestParams] = []

    async def model(_: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        reached.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="42"), model="m"
        )

    async def scenario() -> tuple[str, str]:
        async with host(rig, sampling_callback=model) as session:
            assert await greeted(session) == {"sampling"}
            before = text(await session.call_tool("ask_model", {"question": "6 x 7?"}))
            await anyio.to_thread.run_sync(
                lambda: rig.signoff("servers", "sampling", "asking", "off")
            )
            after = text(await session.call_tool("ask_model", {"question": "7 x 8?"}))
            return before, after

    before, after = anyio.run(scenario)
    assert before == "model: 42"
    assert after.startswith("error -32600") and "[SamplingRefused]" in after, after
    assert [p.messages[0].content.text for p in reached] == ["6 x 7?"]  # type: ignore[union-attr]
    assert [e["outcome"] for e in asked(rig, "sampling.asked")] == ["forwarded", "refused"]
    assert len(asked(rig, "sampling.answered")) == 1
    verified(rig)


@pytest.mark.guarantee("G-ASK-1")
def test_a_server_allowed_to_sample_is_refused_when_the_host_has_no_sampling(rig: Rig) -> None:
    rig.signoff("servers", "sampling", "asking", "on")

    async def scenario() -> str:
        async with host(rig) as session:
            assert await greeted(session) == set()
            return text(await session.call_tool("ask_model", {"question": "6 x 7?"}))

    said = anyio.run(scenario)
    assert "[SamplingRefused]" in said and "did not declare sampling" in said, said
    assert [e["outcome"] for e in asked(rig, "sampling.asked")] == ["refused"]
    assert asked(rig, "sampling.answered") == []


def test_sampling_in_the_configuration_is_true_or_false(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    base = '[servers.s]\ncommand = "x"\n'
    assert not configuration.load_text(path, base).servers["s"].sampling
    assert configuration.load_text(path, base + "sampling = true\n").servers["s"].sampling
    with pytest.raises(ConfigError, match="sampling"):
        configuration.load_text(path, base + 'sampling = "yes"\n')


def test_server_everythings_elicitation_tool_is_pinned_and_reaches_only_a_host_that_has_it(
    home: Path,
) -> None:
    """server-everything registers its elicitation tool only for a client that declared
    elicitation: ``signoff pin`` declares it, so the tool is pinned and offered to such a host."""
    rig = Rig(home)
    everything = everything_server()
    rig.add("every", everything.command, everything.args, everything.env_extra)
    pinned = rig.pin("every")
    assert "trigger-elicitation-request" in {t["tool"] for t in pinned["tools"]}
    rig.classify("every", **{"trigger-elicitation-request": "local_mutation"})  # as it says
    rig.signoff("policy", "every", "trigger-elicitation-request", "allow")
    seen: list[str] = []

    async def answer(_: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"name": TYPED})

    async def scenario() -> tuple[set[str], set[str], str]:
        async with host(rig, "every") as session:
            without = {t.name for t in (await session.list_tools()).tools}
        async with host(rig, "every", elicitation_callback=answer) as session:
            offered = {t.name for t in (await session.list_tools()).tools}
            said = text(await session.call_tool("trigger-elicitation-request", {}))
        return without, offered, said

    without, offered, said = anyio.run(scenario)
    assert "trigger-elicitation-request" not in without
    assert "trigger-elicitation-request" in offered
    assert seen == ["[every] Please provide inputs for the following fields:"]
    assert TYPED in said, said
    assert [e["outcome"] for e in asked(rig, "elicitation.asked")] == ["accept"]
