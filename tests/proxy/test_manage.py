"""Changing the configuration from the CLI (the settings window uses the same operations):
every change lands in the same TOML, keeps the operator's comments, and a refused one leaves
the file as it was; a change of the rules is recorded in the chain."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.policy.policy import Rule
from core.proxy import config as configuration
from core.proxy import config_record, manage, status
from core.proxy.instructions import pin_of
from core.proxy.pins import read_listing
from core.store import Store
from core.tools import SideEffect
from core.verify import verify
from tests.conftest import run_signoff
from tests.proxy.rig import FAKE_SERVER, Rig

TOOLS = [
    {"name": "write_note", "description": "Appends a line.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"},
                                                      "mode": {"type": "string"}}}},
]  # fmt: skip


def ok(home: Path, *args: str) -> str:
    done = run_signoff(*args, home=home)
    assert done.returncode == 0, done.stderr
    return done.stdout


def refused(home: Path, *args: str) -> str:
    done = run_signoff(*args, home=home)
    assert done.returncode == 2, done.stdout
    return done.stderr


def test_each_operation_keeps_the_operators_comments(home: Path) -> None:
    path = home / "config.toml"
    path.write_text('# my servers\n[servers.a]  # the first\ncommand = "true"\n')
    manage.set_tool(path, "a", "t", side_effect="read_only", fixed={"mode": "0644"})
    manage.set_class_rule(path, SideEffect.DESTRUCTIVE, Rule.DENY)
    manage.set_setting(path, "grant_ttl_seconds", 60)
    text = path.read_text()
    assert "# my servers" in text and "# the first" in text
    config = configuration.load(path)
    assert config.servers["a"].tools["t"].fixed == {"mode": "0644"}
    assert config.classes == {SideEffect.DESTRUCTIVE: Rule.DENY}
    assert config.grant_ttl_seconds == 60
    manage.set_class_rule(path, SideEffect.DESTRUCTIVE, None)
    manage.set_setting(path, "grant_ttl_seconds", None)
    config = configuration.load(path)
    assert config.classes == {} and config.grant_ttl_seconds == configuration.DEFAULT_GRANT_TTL


@pytest.mark.parametrize(
    "change",
    [
        lambda p: manage.add_server(p, "bad name", "true"),
        lambda p: manage.add_server(p, "a", "other"),  # taken
        lambda p: manage.add_server(p, "b", "true", env=["NOT-A-NAME"]),
        lambda p: manage.edit_server(p, "a", command="x", args=[], env=[], new_name="c"),  # taken
        lambda p: manage.remove_server(p, "nope"),
        lambda p: manage.set_tool(p, "nope", "t", side_effect="read_only"),
        lambda p: manage.set_tool(p, "a", "t", fixed={"x": 1}, deny=["x"]),  # both
        lambda p: manage.set_setting(p, "hold_seconds", -1),
        lambda p: manage.set_setting(p, "notifications", "loud"),
        lambda p: manage.set_setting(p, "unknown", 1),
    ],
    # Ids without spaces: a node id is one word in pytest's summary (tests/test_mutations.py).
    ids=["bad-name", "name-taken", "bad-variable", "rename-onto-another", "remove-unknown",
         "unknown-server", "fixed-and-denied", "negative-time", "unknown-notifications",
         "unknown-setting"],
)  # fmt: skip
@pytest.mark.guarantee("G-CONFIG-1")
def test_a_refused_change_leaves_the_file_as_it_was(home: Path, change) -> None:
    path = home / "config.toml"
    manage.add_server(path, "a", "true")
    manage.add_server(path, "c", "true")
    before = path.read_bytes()
    with pytest.raises(ConfigError):
        change(path)
    assert path.read_bytes() == before


def test_rename_keeps_the_tools_settings(home: Path) -> None:
    path = home / "config.toml"
    manage.add_server(path, "a", "true")
    manage.set_tool(path, "a", "t", side_effect="destructive", policy="deny")
    manage.edit_server(path, "a", command="false", args=["-x"], env=["TOKEN"], new_name="b")
    config = configuration.load(path)
    assert list(config.servers) == ["b"]
    b = config.servers["b"]
    assert (b.command, b.args, b.env) == ("false", ("-x",), ("TOKEN",))
    assert b.tools["t"].side_effect is SideEffect.DESTRUCTIVE and b.tools["t"].policy is Rule.DENY


@pytest.mark.guarantee("G-CONFIG-1")
def test_a_rule_change_from_the_cli_is_recorded_in_the_chain(home: Path) -> None:
    ok(home, "servers", "add", "a", "--", "true")
    out = ok(home, "policy", "read_only", "approve")
    assert "recorded" in out
    ok(home, "policy", "a", "t", "deny")
    assert "no change" in ok(home, "policy", "a", "t", "deny")
    ok(home, "policy", "a", "t", "default")
    ok(home, "settings", "hold_seconds", "2")  # not a rule: not recorded
    with Store.open(home / "signoff.db") as store:
        with store.snapshot() as conn:
            rows = conn.execute(
                "SELECT run_id, payload FROM events WHERE kind = 'policy.changed' ORDER BY seq"
            ).fetchall()
        verify(store)
    assert [r[0] for r in rows] == [None, None, None]
    payloads = [json.loads(r[1]) for r in rows]
    assert payloads[0]["policy"]["classes"]["read_only"] == "approve"
    assert payloads[1]["policy"]["tools"] == {"a/t": "deny"}
    assert payloads[2]["policy"]["tools"] == {}
    assert all(p["before"] != p["after"] for p in payloads)
    assert payloads[1]["before"] == payloads[0]["after"]


def test_tool_settings_and_settings_from_the_cli(home: Path) -> None:
    ok(home, "servers", "add", "a", "--", "true")
    ok(home, "tool", "a", "w", "--fix", "mode=0644", "--fix", "n=3", "--deny", "force")
    tool = configuration.load(home / "config.toml").servers["a"].tools["w"]
    assert tool.fixed == {"mode": "0644", "n": 3} and tool.deny == ("force",)
    ok(home, "tool", "a", "w", "--unfix", "n", "--undeny", "force", "--overrule-annotations", "yes")
    tool = configuration.load(home / "config.toml").servers["a"].tools["w"]
    assert tool.fixed == {"mode": "0644"} and tool.deny == () and tool.overrule_annotations
    refused(home, "tool", "a", "w", "--fix", "mode=1", "--deny", "mode")
    ok(home, "settings", "notifications", "tray")
    ok(home, "settings", "call_timeout_seconds", "90")
    shown = ok(home, "settings")
    assert "notifications = tray" in shown and "call_timeout_seconds = 90.0" in shown
    assert "ConfigError" in refused(home, "settings", "hold_seconds", "soon")
    ok(home, "settings", "notifications", "default")
    assert "notifications = each" in ok(home, "settings")


def test_servers_remove_rename_and_replace_from_the_cli(home: Path) -> None:
    ok(home, "servers", "add", "a", "--env", "TOKEN", "--", "true", "x")
    refused(home, "servers", "add", "a", "--", "false")
    ok(home, "servers", "add", "a", "--replace", "--", "false")
    ok(home, "classify", "a", "t", "read_only")
    ok(home, "servers", "rename", "a", "b")
    config = configuration.load(home / "config.toml")
    assert config.servers["b"].command == "false" and "t" in config.servers["b"].tools
    ok(home, "servers", "remove", "b")
    assert configuration.load(home / "config.toml").servers == {}
    refused(home, "servers", "remove", "b")


def test_servers_test_lists_tools_without_changing_the_configuration(home: Path) -> None:
    script = home / "script.json"
    script.write_text(json.dumps({"listing": json.dumps(TOOLS)}))
    ok(home, "servers", "add", "notes", "--", sys.executable, str(FAKE_SERVER), str(script))
    before = (home / "config.toml").read_bytes()
    assert "write_note" in ok(home, "servers", "test", "notes")
    assert (home / "config.toml").read_bytes() == before
    last = status.read(home / "status", "notes")
    assert last is not None and last.error == "" and set(last.tools) == {"write_note"}
    listed = ok(home, "servers", "list")
    assert "0 pinned, 1 new" in listed
    # A command tried before it is added leaves no status and no configuration.
    assert "write_note" in ok(
        home, "servers", "test", "trial", "--", sys.executable, str(FAKE_SERVER), str(script)
    )
    assert status.read(home / "status", "trial") is None
    assert (home / "config.toml").read_bytes() == before


def test_servers_test_gives_the_handshake_and_notes_instructions_to_review(home: Path) -> None:
    said = "Use write_note for one line at a time."
    script = home / "script.json"
    script.write_text(json.dumps({"listing": json.dumps(TOOLS), "instructions": said}))
    ok(home, "servers", "add", "notes", "--", sys.executable, str(FAKE_SERVER), str(script))
    first, *pages = ok(home, "servers", "test", "notes", "--raw", "--handshake").splitlines()
    assert json.loads(first)["instructions"] == said
    assert [t.name for t in read_listing([p.encode() for p in pages]).tools] == ["write_note"]
    plain = ok(home, "servers", "test", "notes", "--raw").splitlines()
    assert plain == pages  # without --handshake, the answers alone, as before
    last = status.read(home / "status", "notes")
    assert last is not None and last.instructions == pin_of(said)
    assert last.summary(configuration.load(home / "config.toml").servers["notes"]) == {
        "pinned": 0, "new": 1, "changed": 0, "unclassified": 1, "conflicts": 0, "instructions": 1
    }  # fmt: skip
    ok(home, "pin", "notes", "--accept")
    assert f"instructions: {len(said)} characters" in ok(home, "servers", "test", "notes")
    last = status.read(home / "status", "notes")
    assert last is not None
    assert (
        last.summary(configuration.load(home / "config.toml").servers["notes"])["instructions"] == 0
    )


def test_a_failed_connection_is_noted_for_the_settings_window(home: Path) -> None:
    ok(home, "servers", "add", "gone", "--", "/nonexistent/server")
    assert "UpstreamStartFailed" in refused(home, "servers", "test", "gone")
    last = status.read(home / "status", "gone")
    assert last is not None and "UpstreamStartFailed" in last.error
    assert "last connection failed" in ok(home, "servers", "list")


def test_a_proxy_that_cannot_start_its_server_leaves_the_reason_for_the_operator(
    home: Path,
) -> None:
    """A host-launched proxy has no window: its server's failure must be visible somewhere."""
    import asyncio

    rig = Rig(home)
    rig.add("gone", "/nonexistent/server", [])

    async def connect() -> None:
        async with rig.client("gone") as session:
            await session.list_tools()

    asyncio.run(connect())
    last = status.read(home / "status", "gone")
    assert last is not None and "UpstreamStartFailed" in last.error


@pytest.mark.guarantee("G-CONFIG-1")
def test_a_rule_changed_while_a_proxy_runs_applies_to_its_next_call(home: Path) -> None:
    """No restart of the host needed: the proxy takes up the file's rules when it changed. A
    file that no longer reads, or is gone, keeps the rules last read (a deny there stays a
    deny, never the default rules)."""
    import asyncio

    from tests.host import text

    rig = Rig(home)
    notes = home / "notes.txt"
    rig.add_fake("notes", [
        {"name": "read_note", "description": "Reads.", "inputSchema": {"type": "object"}},
    ], notes=str(notes))  # fmt: skip
    rig.pin("notes")
    rig.classify("notes", read_note="read_only")

    async def scenario() -> tuple[str, ...]:
        async with rig.client("notes") as session:
            first = await session.call_tool("read_note", {})
            rig.signoff("policy", "read_only", "deny")
            second = await session.call_tool("read_note", {"again": 1})
            kept = (home / "config.toml").read_text()
            (home / "config.toml").write_text("not = [toml")  # a broken file keeps the rules
            third = await session.call_tool("read_note", {"again": 2})
            (home / "config.toml").unlink()  # so does a missing one: never the default rules
            fourth = await session.call_tool("read_note", {"again": 3})
            (home / "config.toml").write_text(kept)
            fifth = await session.call_tool("read_note", {"again": 4})
            return text(first), text(second), text(third), text(fourth), text(fifth)

    first, *rest = asyncio.run(scenario())
    assert "refused" not in first
    denied = "Signoff refused this call: the rule for read_only: deny"
    assert rest == [denied] * 4


def test_signoff_pin_prints_each_new_tools_whole_description_with_hidden_characters_shown(
    home: Path,
) -> None:
    rig = Rig(home)
    rig.add_fake("notes", [
        {"name": "write_note", "description": "Appends a line.\nSecond line\u001b[8m hidden",
         "inputSchema": {"type": "object"}},
    ])  # fmt: skip
    out = ok(home, "pin", "notes")
    assert "    Appends a line." in out
    assert "    Second line⟨U+001B⟩[8m hidden" in out


@pytest.mark.guarantee("G-PROXY-3")
def test_a_server_gets_only_path_home_tmpdir_and_the_variables_named(home: Path) -> None:
    """A real started server's environment, as it saw it: no secret of the operator's shell."""
    seen = home / "environment.json"
    script = home / "script.json"
    script.write_text(json.dumps({"listing": json.dumps(TOOLS)}))
    dump = (
        "import json, os, runpy, sys;"
        f"open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)));"
        f"sys.argv = [{str(FAKE_SERVER)!r}, {str(script)!r}];"
        f"runpy.run_path({str(FAKE_SERVER)!r}, run_name='__main__')"
    )
    ok(home, "servers", "add", "envy", "--env", "NAMED_TOKEN", "--", sys.executable, "-c", dump)
    done = run_signoff(
        "servers", "test", "envy", home=home,
        env={"NAMED_TOKEN": "passed", "UNNAMED_SECRET": "kept-back", "TMPDIR": "/tmp"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    environment = json.loads(seen.read_text())
    assert environment.get("NAMED_TOKEN") == "passed"
    assert "UNNAMED_SECRET" not in environment and "SIGNOFF_HOME" not in environment
    allowed = {"PATH", "HOME", "TMPDIR", "NAMED_TOKEN"}
    # The interpreter itself may add a few of its own (e.g. LC_CTYPE coercion); nothing else.
    assert set(environment) - allowed <= {"LC_CTYPE"}, sorted(set(environment) - allowed)


def test_a_recorded_rule_change_leaves_the_state_tables_as_the_events_say(home: Path) -> None:
    from tests.core.gatekit import check_consistency

    ok(home, "servers", "add", "a", "--", "true")
    ok(home, "policy", "destructive", "deny")
    with Store.open(home / "signoff.db") as store:
        check_consistency(store)


# --- many tools in one classify --------------------------------------------------------------

MANY = [
    {"name": f"tool_{n}", "description": f"Tool {n}.", "inputSchema": {"type": "object"}}
    for n in range(6)
]


def pinned_server(home: Path, script: Path) -> Rig:
    """A home whose server ``many`` lists MANY (from ``script``, so two homes write the same
    configuration), every tool pinned and none classified."""
    if not script.exists():
        script.write_text(json.dumps({"listing": json.dumps(MANY)}))
    rig = Rig(home)
    rig.add("many", sys.executable, [str(FAKE_SERVER), str(script)])
    rig.pin("many")
    return rig


def records(home: Path) -> list[tuple[int, str, dict[str, object]]]:
    """The events of no run (configurations and rule changes): seq, kind and payload."""
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        rows = conn.execute(
            "SELECT seq, kind, payload FROM events WHERE run_id IS NULL ORDER BY seq"
        ).fetchall()
    return [(seq, kind, json.loads(payload)) for seq, kind, payload in rows]


def classes(home: Path) -> dict[str, str | None]:
    tools = configuration.load(home / "config.toml").servers["many"].tools
    return {t: c.side_effect.value if c.side_effect else None for t, c in tools.items()}


def test_one_classify_sets_many_tools_in_one_recorded_change(home: Path, tmp_path: Path) -> None:
    pinned_server(home, tmp_path / "script.json")
    before = records(home)
    out = ok(home, "classify", "many", "tool_0=destructive", "tool_1=local_mutation",
             "--rest", "read_only")  # fmt: skip
    assert len(out.splitlines()) == len(MANY)
    assert classes(home) == {"tool_0": "destructive", "tool_1": "local_mutation",
                             **{f"tool_{n}": "read_only" for n in range(2, 6)}}  # fmt: skip
    after = records(home)
    new = after[len(before) :]
    assert [kind for _, kind, _ in new] == ["config.recorded"]  # one write, one record
    assert new[0][2]["text"] == (home / "config.toml").read_text()
    with Store.open(home / "signoff.db") as store:
        verify(store)
        # The record in force is this one, and its place is kept in the keyring (the anchor).
        assert config_record.load_kept(store.database_id) == config_record.Kept(
            new[0][0], str(new[0][2]["sha256"])
        )
        assert not config_record.state(store, home / "config.toml").changed_outside
    # --all reclassifies every pinned tool not named; --rest with none left changes nothing.
    ok(home, "classify", "many", "--all", "remote_mutation", "tool_5=read_only")
    assert set(classes(home).values()) == {"remote_mutation", "read_only"}
    assert classes(home)["tool_5"] == "read_only"
    settled = (home / "config.toml").read_bytes(), records(home)
    ok(home, "classify", "many", "--rest", "destructive")
    assert "--rest CLASS" in ok(home, "classify", "many", "tool_0=read_only", "--help")
    assert ((home / "config.toml").read_bytes(), records(home)) == settled


def test_several_tool_names_then_one_class_and_all_unclassified_are_one_recorded_change(
    home: Path, tmp_path: Path
) -> None:
    pinned_server(home, tmp_path / "script.json")
    before = records(home)
    out = ok(home, "classify", "many", "tool_0", "tool_1", "destructive",
             "--all-unclassified", "read_only")  # fmt: skip
    assert len(out.splitlines()) == len(MANY)
    assert classes(home) == {"tool_0": "destructive", "tool_1": "destructive",
                             **{f"tool_{n}": "read_only" for n in range(2, 6)}}  # fmt: skip
    assert [kind for _, kind, _ in records(home)[len(before) :]] == ["config.recorded"]
    # --rest, the older name, means the same: with every pinned tool classified, nothing left.
    settled = (home / "config.toml").read_bytes(), records(home)
    assert "nothing changed" in ok(home, "classify", "many", "--rest", "local_mutation")
    assert "nothing changed" in ok(home, "classify", "many", "--all-unclassified=local_mutation")
    assert ((home / "config.toml").read_bytes(), records(home)) == settled
    helped = ok(home, "classify", "many", "--help")
    assert "TOOL... CLASS" in helped and "--all-unclassified" in helped and "ambiguous" in helped


def test_a_line_that_reads_both_ways_is_refused_as_ambiguous_and_writes_nothing(
    home: Path, tmp_path: Path
) -> None:
    """``classify S tool_0=read_only destructive``: tool_0 read only, or a tool named
    ``tool_0=read_only`` made destructive? Neither is guessed."""
    pinned_server(home, tmp_path / "script.json")
    before = (home / "config.toml").read_bytes(), records(home)
    said = refused(home, "classify", "many", "tool_0=read_only", "destructive")
    assert "[ClassificationRefused]" in said and "ambiguous" in said
    said = refused(home, "classify", "many", "tool_1", "tool_0=read_only", "destructive")
    assert "ambiguous" in said
    assert ((home / "config.toml").read_bytes(), records(home)) == before


@pytest.mark.parametrize(
    "entries",
    [
        ["tool_0=read_only", "tool_1=harmless"],  # an unknown class
        ["tool_0=read_only", "tool_0=destructive"],  # a tool named twice
        ["tool_0=read_only", "tool_1"],  # a word that is not TOOL=CLASS
        ["tool_0=read_only", "--rest", "sometimes"],
        ["tool_0", "harmless"],  # the one-tool form
        ["tool_0", "tool_1", "harmless"],  # several tools, then a class that is none
        ["tool_0", "tool_1", "tool_0", "read_only"],  # several tools, one named twice
    ],
    ids=["unknown-class", "named-twice", "not-tool-equals-class", "unknown-rest-class",
         "one-tool-form", "several-tools-form", "several-named-twice"],
)  # fmt: skip
@pytest.mark.guarantee("G-CONFIG-1")
def test_one_refused_entry_refuses_the_whole_classification_and_writes_nothing(
    home: Path, tmp_path: Path, entries: list[str]
) -> None:
    pinned_server(home, tmp_path / "script.json")
    before = (home / "config.toml").read_bytes(), records(home)
    assert "[ClassificationRefused]" in refused(home, "classify", "many", *entries)
    assert ((home / "config.toml").read_bytes(), records(home)) == before
    assert set(classes(home).values()) == {None}


def test_one_classify_records_what_one_command_per_tool_records(home: Path, tmp_path: Path) -> None:
    """The same configuration, recorded the same way, by the same operator: one record where one
    command per tool (the one-tool form, still working) leaves one per tool."""
    script = tmp_path / "script.json"
    one_by_one = tmp_path / "one-by-one"
    one_by_one.mkdir(mode=0o700)
    wanted = {t["name"]: ("read_only" if n % 2 else "local_mutation") for n, t in enumerate(MANY)}
    for where in (home, one_by_one):
        pinned_server(where, script)
    start = len(records(home)), len(records(one_by_one))
    ok(home, "classify", "many", *(f"{tool}={side}" for tool, side in wanted.items()))
    for tool, side_effect in wanted.items():
        ok(one_by_one, "classify", "many", tool, side_effect)
    assert (home / "config.toml").read_bytes() == (one_by_one / "config.toml").read_bytes()
    batch, each = records(home)[start[0] :], records(one_by_one)[start[1] :]
    assert [k for _, k, _ in batch] == ["config.recorded"]
    assert [k for _, k, _ in each] == ["config.recorded"] * len(MANY)
    fields = ("text", "sha256", "by", "why")
    assert {f: batch[-1][2][f] for f in fields} == {f: each[-1][2][f] for f in fields}
    for where in (home, one_by_one):
        with Store.open(where / "signoff.db") as store:
            verify(store)
