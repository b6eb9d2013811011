"""Rules on a tool's arguments (core/policy/rules.py, decisions 0048 and 0064), as the policy
evaluates them: a condition is a JSON Schema over the arguments as the server will receive them,
judged on what each value means; a reject rule refuses any reading of its set, an allow rule
allows what would be asked only when each value has one meaning in its set; expired rules,
unconfirmed allows on a destructive tool and requests no rule can read as one thing are decided
as if there were no rule, and the decision says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import RuleConditionInvalid, RuleExpiryInvalid, RuleIdMismatch
from core.policy import judge, meaning, rules
from core.policy.policy import ConfigPolicy, Outcome, PolicyDecision, PolicyRequest, Rule
from core.policy.rules import ArgumentRule, Effect
from core.tools import SideEffect

TOOL = "mail/send"
NOW = datetime(2026, 12, 5, 21, 0, tzinfo=UTC)


def rule(effect: Effect, *conditions: tuple[str, dict[str, Any]], **kw: Any) -> ArgumentRule:
    return ArgumentRule.make("mail", "send", effect, rules.on_arguments(conditions), **kw)


def decide(
    arguments: Any,
    *found: ArgumentRule,
    side_effect: SideEffect = SideEffect.REMOTE_MUTATION,
    now: datetime = NOW,
    **policy: Any,
) -> PolicyDecision:
    request = PolicyRequest.build(
        tool=TOOL, spec_hash="0" * 64, side_effect=side_effect, idempotent=False,
        arguments=arguments, run_id="run", goal="", step=0, consecutive_failures=0,
    )  # fmt: skip
    return ConfigPolicy(rules={TOOL: found}, clock=lambda: now, **policy).evaluate(request)


ALLOWED, ASKED, DENIED = Outcome.ALLOW, Outcome.APPROVE, Outcome.DENY


@pytest.mark.guarantee("G-RULES-1")
def test_a_folder_prefix_cannot_be_escaped_with_dot_dot_or_a_lookalike() -> None:
    notes = rule(Effect.ALLOW, ("path", rules.under_folder("/home/me/notes")))
    for path in ("/home/me/notes/a.txt", "/home/me/notes", "/home/me/notes/deep/b.md"):
        assert decide({"path": path}, notes).outcome is ALLOWED, path
    for path in ("/home/me/notes/../secrets", "/home/me/notes/..", "/home/me/notes/./../x",
                 "/home/me/notes/a/../../secrets", "/home/me/notesX/a", "/home/me/secrets",
                 "home/me/notes/a", "notes/a", "/home/me/notes\\..\\x"):  # fmt: skip
        assert decide({"path": path}, notes).outcome is ASKED, path
    assert decide({}, notes).outcome is ASKED  # no path: the condition does not hold


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_written_by_hand_still_never_allows_a_dot_dot_segment() -> None:
    loose = rule(Effect.ALLOW, ("path", rules.pattern("^/home/me/notes/")))
    assert decide({"path": "/home/me/notes/a"}, loose).outcome is ALLOWED
    assert decide({"path": "/home/me/notes/../secrets"}, loose).outcome is ASKED
    assert decide({"path": "/home/me/notes/a", "also": ["../x"]}, loose).outcome is ASKED


# A server may take a key for a path: ``{"files": {"a.md": "text"}}`` writes a.md in the folder.
CLIMBING_KEYS = {
    "spelled": {"files": {"../../.ssh/authorized_keys": "ssh-ed25519 AAAA"}},
    "escaped": {"files": {"%2e%2e/%2E%2E/.ssh/authorized_keys": "ssh-ed25519 AAAA"}},
    "deeper": {"files": {"sub": {"subsub": {"../../../.ssh/authorized_keys": "AAAA"}}}},
    "in-a-list": {"files": [{"a.md": "text"}, {"../../.ssh/authorized_keys": "AAAA"}]},
    "argument-name": {"../../.ssh/authorized_keys": "ssh-ed25519 AAAA"},
}


@pytest.mark.guarantee("G-RULES-1")
@pytest.mark.parametrize("climbing", CLIMBING_KEYS.values(), ids=list(CLIMBING_KEYS))
def test_an_allow_rule_never_allows_a_dot_dot_segment_in_a_key(climbing: dict[str, Any]) -> None:
    """The folder is judged; ``files`` is not, and its keys climb out of the folder: spelled or
    escaped, at any depth, in a list of objects, or as an argument's own name."""
    notes = rule(Effect.ALLOW, ("folder", rules.under_folder("/home/me/notes")))
    plain = {"folder": "/home/me/notes", "files": {"a.md": "text", "sub": {"b.md": "text"}}}
    assert decide(plain, notes).outcome is ALLOWED
    decided = decide({"folder": "/home/me/notes", **climbing}, notes)
    assert decided.outcome is ASKED and decided.rule == ""
    assert any("../" in r.spelling.lower().replace("%2e", ".") for r in decided.read)


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_judges_an_objects_keys_by_what_they_mean(tmp_path: Any) -> None:
    """A copy tool's ``{"files": {from: to}}``, both in the notes folder: a key is read against
    the server's folder and through its links as a value is, and two keys naming one file
    (which would hide one of their values) are asked about."""
    notes, keys = tmp_path / "notes", tmp_path / "keys"
    notes.mkdir()
    keys.mkdir()
    (notes / "link").symlink_to(keys)
    inside = rules.under_folder(str(notes))
    copies = ArgumentRule.make("mail", "send", Effect.ALLOW, {
        "type": "object", "required": ["files"],
        "properties": {"files": {"type": "object", "propertyNames": inside,
                                 "additionalProperties": inside}},
    })  # fmt: skip
    at = where(str(notes))
    assert decide({"files": {f"{notes}/a.md": f"{notes}/b.md"}}, copies, **at).outcome is ALLOWED
    relative = decide({"files": {"a.md": f"{notes}/b.md"}}, copies, **at)
    assert relative.outcome is ALLOWED  # a.md is the notes folder's
    through = decide({"files": {f"{notes}/link/id": f"{notes}/b.md"}}, copies, **at)
    assert through.outcome is ASKED  # the key leads to the keys folder
    hiding = {f"{notes}/a.md": str(keys / "id"), "a.md": f"{notes}/b.md"}
    twice = decide({"files": hiding}, copies, **at)
    assert twice.outcome is ASKED and twice.read[0].doubt == judge.SAME_KEY


@pytest.mark.guarantee("G-RULES-1")
def test_a_reject_folder_rule_is_not_escaped_by_another_spelling_of_the_same_path() -> None:
    """Read-only tools run by default: "always reject in ~/.ssh" is all that stands between the
    agent and the key, however the path is spelled (rule 4: a reject rule matches any reading
    of the request)."""
    never = rule(Effect.REJECT, ("path", rules.under_folder("/home/me/.ssh")))
    for path in ("/home/me/.ssh/id_ed25519", "/home/me/.ssh/./id_ed25519",
                 "/home/me/x/../.ssh/id_ed25519", "/home/me//.ssh/id_ed25519",
                 "//home/me/.ssh/id_ed25519", "/home/me/.ssh/id\x00", "/home/me/.ssh\n",
                 "/home/me\\.ssh\\id_ed25519"):  # fmt: skip
        assert decide({"path": path}, never, side_effect=SideEffect.READ_ONLY).outcome is DENIED, (
            path
        )
    assert decide(
        {"path": "/home/me/notes/a"}, never, side_effect=SideEffect.READ_ONLY
    ).outcome is (ALLOWED)


@pytest.mark.guarantee("G-RULES-1")
def test_a_line_break_at_the_end_does_not_pass_a_folder_or_a_pattern() -> None:
    """A pattern's ``$`` matches before a final line break: ``/home/me/notes\n`` is a sibling of
    the folder, not in it, and ``^x$`` made for one value must not allow it with one after."""
    notes = rule(Effect.ALLOW, ("path", rules.under_folder("/home/me/notes")))
    exact = rule(Effect.ALLOW, ("to", rules.pattern("^ann@example\\.com$")))
    assert decide({"path": "/home/me/notes\n"}, notes).outcome is ASKED
    assert decide({"path": "/home/me/notes/a\tb"}, notes).outcome is ASKED
    assert decide({"to": "ann@example.com"}, exact).outcome is ALLOWED
    assert decide({"to": "ann@example.com\n"}, exact).outcome is ASKED


def test_an_expiry_at_the_calendars_edge_is_refused_by_name() -> None:
    for text in ("9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00"):
        with pytest.raises(RuleExpiryInvalid):
            rules.read_time(text)


def test_a_rule_whose_id_is_not_its_contents_is_refused_by_name() -> None:
    made = rule(Effect.ALLOW, ("to", rules.equals("ann@example.com")))
    assert rules.from_table("mail", "send", made.id, made.table()) == made
    with pytest.raises(RuleIdMismatch):  # a condition changed by hand under the old id
        rules.from_table("mail", "send", made.id, {**made.table(), "when": "{}"})
    with pytest.raises(RuleIdMismatch):
        rules.from_table("mail", "send", "R000000", made.table())


def test_what_a_reader_cannot_see_is_marked_when_a_rule_is_said() -> None:
    hidden = rule(Effect.ALLOW, ("to", rules.equals("boss@corp.example\u202egro.live")))
    said = rules.words(hidden)
    assert "\u202e" not in said and "U+202E" in said, said


def test_a_folder_must_be_absolute_and_written_plainly() -> None:
    for folder in ("notes", "~/notes", "/home/me/../me/notes", "/home/me/./notes", "//home"):
        with pytest.raises(RuleConditionInvalid):
            rules.under_folder(folder)


def test_a_recipient_list_allows_only_those_recipients() -> None:
    team = rule(Effect.ALLOW, ("to", rules.one_of(["ana@example.org", "bo@example.org"])))
    assert decide({"to": "ana@example.org"}, team).outcome is ALLOWED
    assert decide({"to": ["ana@example.org", "bo@example.org"]}, team).outcome is ALLOWED
    for to in ("eve@example.org", ["ana@example.org", "eve@example.org"], [], None):
        assert decide({"to": to}, team).outcome is ASKED, to


def test_a_number_bound_allows_up_to_it() -> None:
    small = rule(Effect.ALLOW, ("amount", rules.at_most(100)))
    assert decide({"amount": 100}, small).outcome is ALLOWED
    assert decide({"amount": 3.5}, small).outcome is ALLOWED
    for amount in (100.01, 1e9, "50", None):
        assert decide({"amount": amount}, small).outcome is ASKED, amount


def test_a_reject_rule_refuses_even_what_the_class_allows_and_comes_before_an_allow() -> None:
    anyone = ArgumentRule.make("mail", "send", Effect.ALLOW, {})
    never = rule(Effect.REJECT, ("to", rules.equals("boss@example.org")), note="never the boss")
    decision = decide({"to": "boss@example.org"}, anyone, never)
    assert decision.outcome is DENIED and decision.rule == never.id
    assert decision.reason == f"rejected by rule {never.id} (never the boss)"
    allowed = {SideEffect.REMOTE_MUTATION: Rule.ALLOW}
    assert decide({"to": "boss@example.org"}, never, classes=allowed).outcome is DENIED
    assert decide({"to": "ana@example.org"}, anyone, never).rule == anyone.id


def test_an_allow_rule_allows_without_asking_and_the_decision_names_it() -> None:
    notes = rule(Effect.ALLOW, ("path", rules.under_folder("/home/me/notes")))
    decision = decide({"path": "/home/me/notes/a"}, notes)
    assert decision == PolicyDecision(ALLOWED, f"allowed by rule {notes.id}", rule=notes.id)
    recorded = decision.as_json()
    assert recorded["rule"] == notes.id and PolicyDecision.from_json(recorded) == decision
    before_rules = decide({"path": "/elsewhere"}, notes).as_json()
    assert "rule" not in before_rules  # a decision no rule made is recorded as it always was


@pytest.mark.guarantee("G-RULES-1")
def test_a_deny_stands_whatever_a_rule_allows() -> None:
    anyone = ArgumentRule.make("mail", "send", Effect.ALLOW, {})
    assert decide({}, anyone, tools={TOOL: Rule.DENY}).outcome is DENIED
    assert decide({}, anyone, classes={SideEffect.REMOTE_MUTATION: Rule.DENY}).outcome is DENIED


@pytest.mark.guarantee("G-RULES-1")
def test_an_expired_rule_does_nothing() -> None:
    soon = rule(Effect.ALLOW, ("to", rules.equals("ana@example.org")),
                expires=NOW + timedelta(hours=1))  # fmt: skip
    arguments = {"to": "ana@example.org"}
    assert decide(arguments, soon, now=NOW).outcome is ALLOWED
    assert decide(arguments, soon, now=NOW + timedelta(hours=1)).outcome is ASKED
    stop = rule(Effect.REJECT, ("to", rules.equals("ana@example.org")), expires=NOW)
    assert decide(arguments, stop, now=NOW).outcome is ASKED


def test_an_expiry_is_a_duration_or_a_time_in_the_future() -> None:
    assert rules.expiry("2h", NOW) == NOW + timedelta(hours=2)
    assert rules.expiry("2026-12-31T18:00:00Z", NOW) == datetime(2026, 12, 31, 18, tzinfo=UTC)
    for text in ("2026-12-05T20:00:00Z", "0m", "yesterday", "-5m", "soon", "999999w"):
        with pytest.raises(RuleExpiryInvalid):
            rules.expiry(text, NOW)


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_on_a_destructive_tool_needs_the_confirmation_to_decide() -> None:
    plain = ArgumentRule.make("mail", "send", Effect.ALLOW, {})
    confirmed = ArgumentRule.make("mail", "send", Effect.ALLOW, {}, destructive=True)
    assert decide({}, plain, side_effect=SideEffect.DESTRUCTIVE).outcome is ASKED
    assert decide({}, confirmed, side_effect=SideEffect.DESTRUCTIVE).outcome is ALLOWED


def test_a_condition_sees_the_fixed_values_the_server_will_receive() -> None:
    quiet = rule(Effect.ALLOW, ("mode", rules.equals("draft")))
    assert decide({}, quiet).outcome is ASKED
    assert decide({}, quiet, fixed={TOOL: {"mode": "draft"}}).outcome is ALLOWED
    assert decide({}, quiet, fixed={TOOL: {"mode": "send"}}).outcome is ASKED


def test_a_rule_changes_the_policys_identity_and_no_rule_keeps_it() -> None:
    assert ConfigPolicy(rules={}).identity() == ConfigPolicy().identity()
    one = ArgumentRule.make("mail", "send", Effect.ALLOW, {})
    assert ConfigPolicy(rules={TOOL: [one]}).identity() != ConfigPolicy().identity()


@pytest.mark.guarantee("G-RULES-1")
@pytest.mark.parametrize("when", [[], {"type": 5}, {"pattern": "("}, {"$ref": "http://x/y"},
                                  {"$schema": "https://example.org/unknown"}])  # fmt: skip
def test_a_malformed_condition_is_refused_by_name(when: Any) -> None:
    with pytest.raises(RuleConditionInvalid):
        rules.check_condition(when)


SCHEMAS = st.recursive(
    st.sampled_from(
        [
            {},
            {"type": "object"},
            {"required": ["path"]},
            {"properties": {"path": {"pattern": "^/"}}},
        ]
    ),
    lambda inner: st.one_of(
        st.builds(lambda s: {"not": s}, inner),
        st.builds(lambda a: {"anyOf": a}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=4,
)


@pytest.mark.guarantee("G-RULES-1")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    found=st.lists(
        st.builds(
            lambda e, w, d: ArgumentRule.make("mail", "send", e, w, destructive=d),
            st.sampled_from(Effect),
            SCHEMAS,
            st.booleans(),
        ),
        max_size=4,
    ),
    arguments=st.dictionaries(st.sampled_from(["path", "to"]), st.text(max_size=8), max_size=2),
    side_effect=st.sampled_from(SideEffect),
)
def test_no_rule_loosens_a_deny_or_makes_an_allow_out_of_anything_but_an_ask(
    found: list[ArgumentRule], arguments: dict[str, str], side_effect: SideEffect
) -> None:
    for base in Rule:
        without = decide(arguments, side_effect=side_effect, tools={TOOL: base})
        decision = decide(arguments, *found, side_effect=side_effect, tools={TOOL: base})
        if without.outcome is DENIED:
            assert decision == without
        elif decision.outcome is ALLOWED and decision.rule:
            assert without.outcome is ASKED


# --- a rule in words ---------------------------------------------------------------------


def said(when: dict[str, Any]) -> str:
    return rules.words(ArgumentRule.make("mail", "send", Effect.ALLOW, when))


def test_each_shorthand_is_said_in_words() -> None:
    on = rules.on_arguments
    assert said(on([("path", rules.under_folder("/home/u/notes"))])) == (
        "path is in the folder /home/u/notes"
    )
    assert said(on([("path", rules.under_folder("/"))])) == "path is in the folder /"
    assert said(on([("path", rules.under_folder("/a b/c-d.e (x)"))])) == (
        "path is in the folder /a b/c-d.e (x)"
    )
    assert said(on([("to", rules.one_of(["a@x", "b@y"]))])) == "to is one of a@x, b@y"
    assert said(on([("amount", rules.at_most(50))])) == "amount is at most 50"
    assert said(on([("amount", rules.at_most(2.5))])) == "amount is at most 2.5"
    assert said(on([("name", rules.equals("todo.md"))])) == "name is todo.md"
    assert said(on([("n", rules.equals(3)), ("tags", rules.equals(["a, b"]))])) == (
        'n is 3 and tags is ["a, b"]'
    )
    assert said(on([("name", rules.pattern("^todo-[0-9]+$"))])) == (
        "name matches the pattern ^todo-[0-9]+$"
    )
    assert said(on([("n", rules.at_most(9)), ("n", rules.equals(4))])) == (
        "n is at most 9 and is 4"
    )
    assert said({}) == "any arguments"
    assert said({"allOf": [{}, on([("to", rules.equals("a@x"))])]}) == "to is a@x"


@pytest.mark.parametrize(
    "when",
    [
        {"type": "object"},
        {"type": "object", "properties": {"to": {"const": "a@x"}}, "required": []},
        {"type": "object", "properties": {"to": {"const": "a@x", "x-note": 1}},
         "required": ["to"]},
        {"type": "object", "required": ["p"], "properties": {"p": {
            "type": "string", "pattern": "^/tmp(/|$)", "not": {"pattern": "x"}}}},  # another guard
        {"type": "object", "properties": {"to": {"anyOf": [{"enum": ["a"]}]}},
         "required": ["to"]},
        {"allOf": [{}, {"not": {}}]},
    ],
)  # fmt: skip
def test_any_other_condition_is_said_to_be_a_json_schema_condition(when: Any) -> None:
    assert said(when) == rules.HAND_WRITTEN


def test_the_effect_and_the_expiry_have_words_of_their_own() -> None:
    later = NOW + timedelta(hours=2)
    kept = ArgumentRule.make("mail", "send", Effect.REJECT, {}, expires=later)
    assert rules.EFFECT_WORDS[kept.effect] == "Always reject"
    assert rules.EFFECT_WORDS[Effect.ALLOW] == "Always allow"
    assert rules.expiry_words(kept, NOW) == "until 2026-12-05T23:00:00Z"
    assert rules.expiry_words(kept, later) == "expired"
    forever = ArgumentRule.make("mail", "send", Effect.REJECT, {})
    assert rules.expiry_words(forever, later) == "never"


# --- what a value means (decision 0064) ------------------------------------------------------


def where(cwd: str | None) -> dict[str, Any]:
    return {"where": meaning.Where(cwd, folds_case=False)}


@pytest.mark.guarantee("G-RULES-1")
def test_a_reject_rule_on_recipients_matches_a_list_holding_one_and_any_spelling() -> None:
    """``--one-of`` reads "the value, or a list of nothing else": right for an allow rule,
    inverted for a reject rule, which must match a list holding any of its set."""
    never = rule(Effect.REJECT, ("to", rules.one_of(["evil@x.com"])))
    for to in (["evil@x.com", "me@team.org"], "EVIL@X.com", "Evil <evil@x.com>",
               "me@team.org, evil@x.com", [["evil@x.com"]], {"cc": "evil@x.com"}):  # fmt: skip
        assert decide({"to": to}, never).outcome is DENIED, to
    for to in ("me@team.org", ["me@team.org", "ann@team.org"]):
        assert decide({"to": to}, never).outcome is ASKED, to


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_on_recipients_allows_only_when_every_address_is_in_its_set() -> None:
    team = rule(Effect.ALLOW, ("to", rules.one_of(["me@team.org"])))
    for to in ("me@team.org", "Me@Team.org", "Me <me@team.org>", ["me@team.org"]):
        assert decide({"to": to}, team).outcome is ALLOWED, to
    for to in ("me@team.org, evil@x.com", ["me@team.org", "evil@x.com"],
               "me@team.org <evil@x.com>", "me@team.org\n"):  # fmt: skip
        assert decide({"to": to}, team).outcome is ASKED, to


@pytest.mark.guarantee("G-RULES-1")
def test_a_relative_path_is_read_against_the_servers_folder_or_asked() -> None:
    """A server reads ``.ssh/id`` from its working directory: with it known, a relative path is
    the file it names; without, no rule decides it and the decision says why."""
    keys = rule(Effect.REJECT, ("path", rules.under_folder("/home/me/.ssh")))
    notes = rule(Effect.ALLOW, ("path", rules.under_folder("/home/me/notes")))
    for path in (".ssh/id", "./.ssh", "notes/../.ssh/id", ".ssh"):
        assert decide({"path": path}, keys, notes, **where("/home/me")).outcome is DENIED, path
    assert decide({"path": "a.md"}, notes, **where("/home/me/notes")).outcome is ALLOWED
    unknown = decide({"path": "a.md"}, notes, **where(None))
    assert unknown.outcome is ASKED
    assert [r.spelling for r in unknown.read] == ["a.md"]
    assert "not known" in unknown.read[0].doubt and "no rule decides it" in unknown.reason


@pytest.mark.guarantee("G-RULES-1")
def test_a_home_relative_path_is_the_file_in_the_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/me")
    keys = rule(Effect.REJECT, ("path", rules.under_folder("/home/me/.ssh")))
    notes = rule(Effect.ALLOW, ("path", rules.under_folder("/home/me/notes")))
    assert decide({"path": "~/.ssh/id_rsa"}, keys).outcome is DENIED
    assert decide({"path": "~/notes/a.md"}, notes).outcome is ALLOWED
    assert decide({"path": "~/notes/../.ssh/id"}, notes).outcome is ASKED


@pytest.mark.guarantee("G-RULES-1")
def test_a_link_is_judged_where_it_leads(tmp_path: Any) -> None:
    """``notes/link`` leading to the keys is not in the notes folder; a folder reached through
    a link is the folder it leads to."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes/link").symlink_to(tmp_path / "keys")
    (tmp_path / "alias").symlink_to(tmp_path / "notes")
    keys = rule(Effect.REJECT, ("path", rules.under_folder(str(tmp_path / "keys"))))
    notes = rule(Effect.ALLOW, ("path", rules.under_folder(str(tmp_path / "notes"))))
    at = where(str(tmp_path))
    assert decide({"path": str(tmp_path / "notes/link/id")}, keys, **at).outcome is DENIED
    assert decide({"path": str(tmp_path / "notes/link/id")}, notes, **at).outcome is ASKED
    assert decide({"path": str(tmp_path / "alias/a.md")}, notes, **at).outcome is ALLOWED
    through = rule(Effect.ALLOW, ("path", rules.under_folder(str(tmp_path / "alias"))))
    assert decide({"path": str(tmp_path / "notes/a.md")}, through, **at).outcome is ALLOWED
    assert decide({"path": str(tmp_path / "alias/a.md")}, through, **at).outcome is ALLOWED
    for view in ("/proc/self/fd/3", "/proc/self/cwd/id", "/dev/fd/3"):  # the server's, not ours
        assert decide({"path": view}, keys, **at).outcome is not ALLOWED, view
        assert decide({"path": view}, keys, side_effect=SideEffect.READ_ONLY,
                      **at).outcome is ASKED, view  # fmt: skip
    self_root = f"/proc/self/root{tmp_path}/keys/id"
    assert decide({"path": self_root}, keys, **at).outcome is DENIED


@pytest.mark.guarantee("G-RULES-1")
def test_a_uri_rule_holds_for_every_spelling_of_the_same_uri() -> None:
    """The user guide's reject rule on resource reads, and an allow rule on a folder of URIs
    widened by escaped dot segments (RFC 3986: ``%2e%2e`` is ``..``)."""
    private = rule(Effect.REJECT, ("uri", rules.pattern("^file:///home/me/private/")))
    notes = rule(Effect.ALLOW, ("uri", rules.pattern("^file:///home/me/notes/")))
    for uri in ("file:///home/me/private/s.txt", "file:///home/me/./private/s.txt",
                "file://localhost/home/me/private/s.txt", "file:///home/me/%70rivate/s.txt",
                "FILE://LOCALHOST/home/me/private/s.txt", "file:/home/me/private/s.txt",
                "file:////home/me/private/s.txt", "file:///home/me//private/s.txt",
                "file:///home/me/notes/%2e%2e/private/s.txt"):  # fmt: skip
        assert decide({"uri": uri}, private, **where(None)).outcome is DENIED, uri
    assert decide({"uri": "file:///home/me/notes/a"}, notes, **where(None)).outcome is ALLOWED
    for uri in ("file:///home/me/notes/%2e%2e/private/s.txt",
                "file:///home/me/notes/%2E%2E/private/s.txt",
                "file:///home/me/notes/../private/s.txt", "file://elsewhere/home/me/notes/a",
                "file:///home/me/notes/%zz"):  # fmt: skip
        assert decide({"uri": uri}, notes, **where(None)).outcome is ASKED, uri
    web = rule(Effect.ALLOW, ("url", rules.pattern("^https://docs\\.example\\.com/api/")))
    assert decide({"url": "HTTPS://Docs.Example.com:443/api/x"}, web).outcome is ALLOWED
    for url in ("https://docs.example.com/api/%2e%2e/admin",
                "https://docs.example.com/api/..\\..\\admin",
                "https://docs.example.com/api/..%2F..%2Fadmin"):  # fmt: skip
        assert decide({"url": url}, web).outcome is ASKED, url
    evil = rule(Effect.REJECT, ("url", rules.pattern("^https://evil\\.com/")))
    for url in ("https://evil.com./x", "https://EVIL.com:443/x", "https://evil.com/a/..\\x"):
        assert decide({"url": url}, evil, side_effect=SideEffect.READ_ONLY).outcome is DENIED, url
    odd = rule(Effect.ALLOW, ("uri", rules.pattern("^notes://team/")))
    assert decide({"uri": "notes://team/a"}, odd).outcome is ALLOWED
    unknown = decide({"uri": "notes://team/../secret"}, odd)  # does its server resolve ..?
    assert unknown.outcome is ASKED and "not known" in unknown.read[0].doubt


@pytest.mark.guarantee("G-RULES-1")
def test_an_exact_rule_keeps_working_for_the_same_request_written_another_way() -> None:
    """The dialog's editor makes "equals this value" rules: the same file written with ``./``,
    ``//`` or through the server's folder is the same request."""
    exact = ArgumentRule.make("mail", "send", Effect.ALLOW, rules.on_arguments(
        [("path", rules.equals("/home/me/notes/today.md")), ("mode", rules.equals("w"))],
        closed=True))  # fmt: skip
    at = where("/home/me/notes")
    for path in ("/home/me/notes/today.md", "/home/me/notes/./today.md", "today.md",
                 "/home/me//notes/today.md", "/home/me/x/../notes/today.md"):  # fmt: skip
        assert decide({"path": path, "mode": "w"}, exact, **at).outcome is ALLOWED, path
    for path in ("/home/me/notes/other.md", "../today.md"):
        assert decide({"path": path, "mode": "w"}, exact, **at).outcome is ASKED, path
    assert decide({"path": "today.md", "mode": "w", "x": 1}, exact, **at).outcome is ASKED


@pytest.mark.guarantee("G-RULES-1")
def test_a_value_read_as_text_keeps_its_spelling() -> None:
    """An argument the rule compares as text (a branch, a message) is not taken for a path: the
    rules' own spellings behave as they did."""
    push = rule(Effect.ALLOW, ("branch", rules.equals("feature/x")),
                ("message", rules.pattern("^fix")))  # fmt: skip
    assert decide({"branch": "feature/x", "message": "fix: a/b"}, push,
                  **where("/srv")).outcome is ALLOWED  # fmt: skip
    assert decide({"branch": "feature/y", "message": "fix"}, push).outcome is ASKED
    assert decide({"branch": "feature/../x", "message": "fix"}, push).outcome is ASKED


@pytest.mark.guarantee("G-RULES-1")
def test_a_request_with_more_readings_than_are_checked_is_asked_not_allowed() -> None:
    from core.policy.judge import MOST_COMBINATIONS

    never = ArgumentRule.make(
        "mail", "send", Effect.REJECT, {"additionalProperties": {"pattern": "^/nowhere/"}}
    )
    many = {f"p{i}": f"/a/./b{i}" for i in range(MOST_COMBINATIONS.bit_length() + 1)}
    decision = decide(many, never, side_effect=SideEffect.READ_ONLY, **where("/"))
    assert decision.outcome is ASKED and "more readings" in decision.reason


@pytest.mark.guarantee("G-RULES-1")
def test_a_pattern_through_a_link_holds_for_the_path_folded_as_text_too(tmp_path: Any) -> None:
    """A reject pattern whose fixed text goes through a link (``link/sec``) matches ``//`` and
    ``./`` spellings of it: the path folded as text, links not followed, is a reading too."""
    (tmp_path / "real/sec").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    never = rule(Effect.REJECT, ("path", rules.pattern(f"^{tmp_path}/link/sec/.*\\.key$")))
    for path in (f"{tmp_path}//link/sec/a.key", f"{tmp_path}/link/./sec/a.key"):
        decided = decide({"path": path}, never, side_effect=SideEffect.READ_ONLY, **where("/"))
        assert decided.outcome is DENIED, path


@pytest.mark.guarantee("G-RULES-1")
def test_a_web_host_is_the_same_host_however_a_client_reads_it() -> None:
    never = rule(Effect.REJECT, ("url", rules.pattern("^https://evil\\.com/")))
    for url in ("https://user@evil.com/x", "https://evil.com:0443/x", "https://\uff45\uff56\uff49\uff4c.com/x",
                "https://evil。com/x", "https:/evil.com/x", "https:evil.com/x",
                " HTTPS://EVIL.COM/x"):  # fmt: skip
        assert decide({"url": url}, never, side_effect=SideEffect.READ_ONLY).outcome is DENIED, url
    docs = rule(Effect.ALLOW, ("url", rules.pattern("^https://docs\\.example\\.com/")))
    assert decide({"url": "https://docs.example.com/a"}, docs).outcome is ALLOWED
    for url in ("https://docs.example.com@evil.com/", "https://[::1/x"):  # whose host?
        assert decide({"url": url}, docs).outcome is ASKED, url


@pytest.mark.guarantee("G-RULES-1")
def test_an_exception_inside_an_allow_condition_is_read_by_meaning_too(tmp_path: Any) -> None:
    (tmp_path / "real/sec").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    condition = {"properties": {"path": {"pattern": f"^{tmp_path}/",
                                         "not": {"pattern": f"^{tmp_path}/link/"}}},
                 "required": ["path"]}  # fmt: skip
    but_link = ArgumentRule.make("mail", "send", Effect.ALLOW, condition)
    assert decide({"path": f"{tmp_path}/a"}, but_link, **where("/")).outcome is ALLOWED
    assert decide({"path": f"{tmp_path}/link/sec/a"}, but_link, **where("/")).outcome is ASKED


@pytest.mark.guarantee("G-RULES-1")
def test_a_recipient_is_read_as_a_provider_delivers_it() -> None:
    never = rule(Effect.REJECT, ("to", rules.one_of(["evil@x.com"])))
    for to in ("evil+tag@x.com", "MAILTO:EVIL@X.COM?subject=hi", "\uff45\uff56\uff49\uff4c@x.com",
               [f"p{i}@team.org" for i in range(600)] + ["evil@x.com"]):  # fmt: skip
        assert decide({"to": to}, never).outcome is DENIED, str(to)[:40]


@pytest.mark.guarantee("G-RULES-1")
def test_a_rules_own_folder_means_what_it_says() -> None:
    """The forms a server may make of a value it receives (decoded, trimmed) are not the
    operator's: ``/srv/data%2fx`` is not ``/srv/data/x``."""
    odd = rule(Effect.ALLOW, ("path", rules.under_folder("/srv/data%2fx")))
    assert decide({"path": "/srv/data/x/a"}, odd, **where("/")).outcome is ASKED
    # and the value as written may be read decoded by its server: asked too
    assert decide({"path": "/srv/data%2fx/a"}, odd, **where("/")).outcome is ASKED


@pytest.mark.guarantee("G-RULES-1")
def test_a_remote_servers_paths_are_read_as_text_not_on_this_machine(tmp_path: Any) -> None:
    """A link on this machine says nothing of a remote server's files: ``link/x`` is not in
    the folder it leads to here, and ``~`` is the server's own home, unknown."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "notes")
    notes = rule(Effect.ALLOW, ("path", rules.under_folder(str(tmp_path / "notes"))))
    here = decide({"path": f"{tmp_path}/link/x"}, notes, **where("/"))
    assert here.outcome is ALLOWED  # a server on this machine opens notes/x
    remote = {"where": meaning.Where("/"), "elsewhere": frozenset({"mail"})}
    for path in (f"{tmp_path}/link/x", "~/notes/x", "x"):
        assert decide({"path": path}, notes, **remote).outcome is ASKED, path
    assert decide({"path": f"{tmp_path}/notes/./x"}, notes, **remote).outcome is ALLOWED


@pytest.mark.guarantee("G-RULES-1")
def test_a_reject_rule_on_text_does_not_ask_about_a_dot_dot_it_does_not_match() -> None:
    """A ``..`` makes a text doubtful only for an allow rule: a reject rule on a command's text
    has tried every reading of it, and a text such as ``docs/../README`` still runs."""
    never = rule(Effect.REJECT, ("text", rules.pattern("^rm ")))
    allowed = decide({"text": "docs/../README"}, never, side_effect=SideEffect.READ_ONLY)
    assert allowed.outcome is ALLOWED
    refused = decide({"text": "rm ../x"}, never, side_effect=SideEffect.READ_ONLY)
    assert refused.outcome is DENIED
