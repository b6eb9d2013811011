"""Rules on a tool's arguments (core/policy/rules.py, decision 0048), as the policy evaluates
them: a condition is a JSON Schema over the arguments as the server will receive them; a reject rule
refuses, an allow rule allows what would be asked; expired rules, unconfirmed allows on a
destructive tool and requests with a ``..`` segment are decided as if there were no rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import RuleConditionInvalid, RuleExpiryInvalid, RuleIdMismatch
from core.policy import rules
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


@pytest.mark.guarantee("G-RULES-1")
def test_a_reject_folder_rule_is_not_escaped_by_another_spelling_of_the_same_path() -> None:
    """Read-only tools run by default: "always reject in ~/.ssh" is all that stands between the
    agent and the key, however the path is spelled (rule 4: a reject rule reads the arguments
    loosened too)."""
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
