"""`signoff rule list|add|remove` and the rules through a real `signoff proxy`
(core/policy/rules.py, decision 0048): a malformed rule is refused by name with config.toml
unchanged, a change is recorded as ``policy.changed``, a reject rule refuses, an allow rule
runs a call unasked and the record names it, an allow never reaches Signoff's own files, and no
rule offers a tool that is not pinned, unchanged and classified."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from core.policy.policy import Rule
from core.policy.rules import ArgumentRule, Effect
from core.proxy import config as configuration
from core.proxy.config import ServerConfig, ToolConfig
from core.proxy.offered import Offered
from core.proxy.pins import Listing, read_listing
from core.recheck import recheck
from core.tools import SideEffect
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

WAITS = "needs the operator's approval"


@pytest.fixture
def rig(home: Path, tmp_path: Path) -> Rig:
    rig = Rig(home)
    rig.notes = tmp_path / "notes.txt"  # type: ignore[attr-defined]
    rig.notes.write_text("first\n")  # type: ignore[attr-defined]
    rig.add_fake("notes", NOTES_TOOLS, notes=str(rig.notes))  # type: ignore[attr-defined]
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    return rig


def add(rig: Rig, *args: str, check: bool = True) -> Any:
    return rig.signoff("rule", "add", "--server", "notes", "--tool", "write_note", *args,
                       check=check)  # fmt: skip


def changes(rig: Rig) -> int:
    with rig.store() as store:
        (count,) = store._conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'policy.changed'"
        ).fetchone()
    return int(count)


def rules_listed(rig: Rig) -> list[dict[str, Any]]:
    return [json.loads(line) for line in rig.signoff("rule", "list", "--json").stdout.splitlines()]


MALFORMED = {
    "an invalid schema": (["--allow", "--when", '{"type": 5}'], "RuleConditionInvalid"),
    "not JSON": (["--allow", "--when", "{type: object}"], "RuleConditionInvalid"),
    "a bad pattern": (["--allow", "--pattern", "text=("], "RuleConditionInvalid"),
    "a relative folder": (["--allow", "--prefix", "text=notes"], "RuleConditionInvalid"),
    "no condition": (["--allow"], "RuleConditionInvalid"),
    "a bound not a number": (["--allow", "--at-most", "text=many"], "RuleConditionInvalid"),
    "an expiry past": (
        ["--allow", "--when", "{}", "--expires", "2001-01-01T00:00Z"],
        "RuleExpiryInvalid",
    ),
    "an expiry unreadable": (
        ["--allow", "--when", "{}", "--expires", "soon"],
        "RuleExpiryInvalid",
    ),
    "an unknown tool": (["--tool", "erase_all", "--allow", "--when", "{}"], "RuleTargetUnknown"),
    "an unknown server": (["--server", "mail", "--allow", "--when", "{}"], "RuleTargetUnknown"),
}


@pytest.mark.guarantee("G-RULES-1")
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_rule_is_refused_by_name_and_the_configuration_is_unchanged(
    rig: Rig, home: Path, case: str
) -> None:
    args, error = MALFORMED[case]
    before, recorded = (home / "config.toml").read_bytes(), changes(rig)
    done = add(rig, *args, check=False)
    assert done.returncode == 2 and f"[{error}]" in done.stderr, done.stderr
    assert (home / "config.toml").read_bytes() == before
    assert changes(rig) == recorded and rules_listed(rig) == []


def test_a_rule_added_listed_and_removed_is_recorded_each_time(rig: Rig, home: Path) -> None:
    recorded = changes(rig)
    out = add(rig, "--allow", "--prefix", f"text={home}", "--note", "my folder",
              "--expires", "2h").stdout  # fmt: skip
    (listed,) = rules_listed(rig)
    assert f"added rule {listed['id']}" in out and changes(rig) == recorded + 1
    assert listed["effect"] == "allow" and listed["note"] == "my folder"
    assert not listed["expired"] and listed["expires"] is not None
    shown = rig.signoff("rule", "list").stdout  # the condition in words
    assert listed["id"] in shown and f"when text is in the folder {home} " in shown
    add(rig, "--reject", "--equals", "text=x")
    same = add(rig, "--reject", "--equals", "text=x", check=False)  # the same rule, same id
    assert same.returncode == 2 and "[RuleRefused]" in same.stderr
    assert changes(rig) == recorded + 2
    rig.signoff("rule", "remove", listed["id"])
    assert listed["id"] not in [r["id"] for r in rules_listed(rig)]
    assert changes(rig) == recorded + 3
    missing = rig.signoff("rule", "remove", "R000000", check=False)
    assert missing.returncode == 2 and "[UnknownRule]" in missing.stderr


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_on_a_destructive_tool_needs_a_second_confirmation(
    rig: Rig, home: Path
) -> None:
    rig.classify("notes", write_note="destructive")
    before, recorded = (home / "config.toml").read_bytes(), changes(rig)
    refused = add(rig, "--allow", "--when", "{}", check=False)
    assert refused.returncode == 2 and "[RuleNeedsConfirmation]" in refused.stderr
    assert (home / "config.toml").read_bytes() == before and changes(rig) == recorded
    add(rig, "--reject", "--equals", "text=x")  # a reject rule needs none
    add(rig, "--allow", "--when", "{}", "--yes-destructive")
    allow = [r for r in rules_listed(rig) if r["effect"] == "allow"]
    assert [r["destructive"] for r in allow] == [True]


def _run_of(rig: Rig, arguments: dict[str, Any]) -> str:
    with rig.store() as store:
        for run_id, payload in store._conn.execute(
            "SELECT run_id, payload FROM events WHERE kind = 'step.policy' ORDER BY seq DESC"
        ):
            if json.loads(payload)["request"]["arguments"] == arguments:
                return str(run_id)
    raise AssertionError(f"no run for {arguments}")


def test_an_allow_rule_runs_a_call_unasked_and_the_record_and_runs_name_it(rig: Rig) -> None:
    add(rig, "--allow", "--one-of", "text=hello,bye", "--note", "greetings")
    (rule,) = rules_listed(rig)

    async def scenario() -> None:
        async with rig.client("notes") as host:
            ran = await host.call_tool("write_note", {"text": "hello"})
            assert not ran.is_error and text(ran) == "wrote 'hello'"
            held = await host.call_tool("write_note", {"text": "hi"})
            assert WAITS in text(held)

    anyio.run(scenario)
    assert rig.notes.read_text() == "first\nhello\n"  # type: ignore[attr-defined]
    assert [p["arguments"] for p in rig.pending()] == [{"text": "hi"}]
    run_id = _run_of(rig, {"text": "hello"})
    with rig.store() as store:
        (payload,) = store._conn.execute(
            "SELECT payload FROM events WHERE kind = 'step.policy' AND run_id = ?", (run_id,)
        ).fetchone()
    decision = json.loads(payload)["decision"]
    assert decision["rule"] == rule["id"] and decision["outcome"] == "allow"
    assert decision["reason"] == f"allowed by rule {rule['id']} (greetings)"
    assert f"allowed by rule {rule['id']}" in rig.signoff("runs").stdout
    shown = [json.loads(line) for line in rig.signoff("runs", "--json").stdout.splitlines()]
    assert [r["rule"] for r in shown if r["id"] == run_id] == [rule["id"]]

    # Re-checked: the same today; as of the evaluation's time an expired rule would not have.
    assert rig.signoff("recheck", run_id).returncode == 0
    config = configuration.load(rig.home / "config.toml")
    with rig.store() as store:
        assert recheck(store, run_id, config.policy()).differences == ()
        (found,) = config.rules()
        when = store._conn.execute(
            "SELECT at FROM events WHERE kind = 'step.policy' AND run_id = ?", (run_id,)
        ).fetchone()[0]
        before = datetime.fromisoformat(when) - timedelta(seconds=1)
        lapsed = ArgumentRule.make(found.server, found.tool, found.effect, found.when,
                                   expires=before)  # fmt: skip
        policy = config.policy()
        policy.rules = {found.gate_name: (lapsed,)}
        (difference,) = recheck(store, run_id, policy).differences
        assert difference.now.outcome.value == "approve"
    rig.signoff("rule", "remove", rule["id"])
    assert rig.signoff("recheck", run_id, check=False).returncode == 1


def test_a_reject_rule_refuses_what_the_class_would_allow(rig: Rig) -> None:
    rig.signoff("policy", "local_mutation", "allow")
    add(rig, "--reject", "--pattern", "text=^rm ")
    (rule,) = rules_listed(rig)

    async def scenario() -> None:
        async with rig.client("notes") as host:
            refused = await host.call_tool("write_note", {"text": "rm -rf /"})
            assert refused.is_error and f"rejected by rule {rule['id']}" in text(refused)
            ran = await host.call_tool("write_note", {"text": "a line"})
            assert not ran.is_error

    anyio.run(scenario)
    assert rig.notes.read_text() == "first\na line\n"  # type: ignore[attr-defined]
    assert f"rejected by rule {rule['id']}" in rig.signoff("runs").stdout


@pytest.mark.guarantee("G-FILES-2")
@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_never_allows_a_request_touching_signoffs_own_files(
    rig: Rig, home: Path
) -> None:
    add(rig, "--allow", "--when", "{}")  # any arguments at all

    async def scenario() -> None:
        async with rig.client("notes") as host:
            held = await host.call_tool("write_note", {"text": f"{home}/config.toml"})
            assert not held.is_error and WAITS in text(held)
            ran = await host.call_tool("write_note", {"text": "elsewhere"})
            assert not ran.is_error

    anyio.run(scenario)
    assert [(p["kind"], p["arguments"]) for p in rig.pending()] == [
        ("own_files", {"text": f"{home}/config.toml"})
    ]
    assert rig.notes.read_text() == "first\nelsewhere\n"  # type: ignore[attr-defined]


# --- no rule offers an unavailable tool -----------------------------------------------------

LISTED = {
    t.name: t
    for t in read_listing([json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
        {"name": name, "inputSchema": {"type": "object"}}
        for name in ("offered", "unpinned", "changed", "unclassified")
    ]}}).encode()]).tools
}  # fmt: skip
UNAVAILABLE = ("unpinned", "changed", "unclassified")


def _tools(rules: dict[str, tuple[ArgumentRule, ...]]) -> dict[str, ToolConfig]:
    local = SideEffect.LOCAL_MUTATION
    return {
        "offered": ToolConfig(local, LISTED["offered"].pin, rules=rules.get("offered", ())),
        "unpinned": ToolConfig(local, None, rules=rules.get("unpinned", ())),
        "changed": ToolConfig(local, "f" * 64, rules=rules.get("changed", ())),
        "unclassified": ToolConfig(
            None, LISTED["unclassified"].pin, rules=rules.get("unclassified", ())
        ),
    }


def _offered(tools: dict[str, ToolConfig]) -> set[str]:
    offer = Offered(["s"], {"s": ServerConfig("s", "true", tools=tools)})
    offer.expose({"s": Listing(tuple(LISTED.values()), (), "")})
    return set(offer.exposed)


RULES = st.dictionaries(
    st.sampled_from(list(LISTED)),
    st.lists(
        st.builds(
            lambda tool, effect, when, confirmed: ArgumentRule.make(
                "s", tool, effect, when, destructive=confirmed
            ),
            st.sampled_from(list(LISTED)),
            st.sampled_from(Effect),
            st.sampled_from([{}, {"type": "object"}, {"not": {}}, {"required": ["x"]}]),
            st.booleans(),
        ),
        max_size=3,
    ).map(tuple),
)


@pytest.mark.guarantee("G-RULES-1")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=RULES, policy=st.sampled_from([None, *Rule]))
def test_no_rule_however_written_offers_a_tool_the_class_policy_leaves_unavailable(
    rules: dict[str, tuple[ArgumentRule, ...]], policy: Rule | None
) -> None:
    tools = _tools(rules)
    tools = {name: ToolConfig(c.side_effect, c.pin, policy, rules=c.rules)
             for name, c in tools.items()}  # fmt: skip
    offered = _offered(tools)
    assert offered == _offered(_tools({})) == {"offered"}
    assert not offered & set(UNAVAILABLE)


def test_a_rule_added_while_the_proxy_runs_decides_its_next_call(rig: Rig) -> None:
    async def scenario() -> None:
        async with rig.client("notes") as host:
            held = await host.call_tool("write_note", {"text": "one"})
            assert WAITS in text(held)
            add(rig, "--allow", "--equals", "text=two")
            ran = await host.call_tool("write_note", {"text": "two"})
            assert not ran.is_error and text(ran) == "wrote 'two'"
            add(rig, "--reject", "--equals", "text=three")
            refused = await host.call_tool("write_note", {"text": "three"})
            assert refused.is_error and "rejected by rule" in text(refused)

    anyio.run(scenario)
    assert rig.notes.read_text() == "first\ntwo\n"  # type: ignore[attr-defined]


@pytest.mark.guarantee("G-RULES-1")
def test_a_reject_rule_on_resource_reads_refuses_every_spelling_of_the_uri(rig: Rig) -> None:
    """The user guide's rule on resource reads (resource reads are read_only: they run unasked)
    holds for the same resource written another way; nothing of it reaches the server."""
    from tests.mcp_servers import everything_server

    server = everything_server()
    rig.add("docs", server.command, server.args, env=server.env_extra)
    rig.signoff("servers", "set", "docs", "--resources", "on")
    rig.pin("docs")
    rig.signoff("rule", "add", "--server", "docs", "--tool", "resources/read", "--reject",
                "--pattern", "uri=^demo://resource/static/document/architecture\\.md$")  # fmt: skip
    plain = "demo://resource/static/document/architecture.md"
    spellings = (plain, "DEMO://resource/static/document/architecture.md",
                 "demo://resource/static/document/%61rchitecture.md",
                 "demo://resource/static/x/../document/architecture.md",
                 "demo://resource/static/x/%2e%2e/document/architecture.md")  # fmt: skip

    async def scenario() -> None:
        async with rig.client("docs") as host:
            for uri in spellings:
                with pytest.raises(MCPError) as refused:
                    await host.read_resource(uri)
                assert "rejected by rule" in refused.value.error.message, uri
            listed = (await host.list_resources()).resources
            other = next(str(r.uri) for r in listed if str(r.uri) != plain)
            assert (await host.read_resource(other)).contents

    anyio.run(scenario)
    with rig.store() as store, store.snapshot() as conn:
        ran = conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()[0]
    assert ran == 1  # the other resource only
