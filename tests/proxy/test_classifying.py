"""Which class each tool of one ``signoff classify`` gets (core/proxy/classifying.py): the plan is
taken whole or refused whole, with every problem listed. The command itself, in real
subprocesses, is in tests/proxy/test_manage.py."""

from __future__ import annotations

import pytest

from core.errors import ClassificationRefused
from core.proxy.classifying import Words, notes, plan, read_words, suggested
from core.proxy.config import Config, ServerConfig, ToolConfig
from core.proxy.pins import conflict
from core.tools import SideEffect

PIN = "0" * 64
RO, LOCAL, DESTRUCTIVE = SideEffect.READ_ONLY, SideEffect.LOCAL_MUTATION, SideEffect.DESTRUCTIVE


def config(**tools: ToolConfig) -> Config:
    return Config(servers={"s": ServerConfig("s", "true", tools=dict(tools))})


CONFIG = config(
    a=ToolConfig(pin=PIN),
    b=ToolConfig(pin=PIN, side_effect=LOCAL),
    c=ToolConfig(pin=PIN),
    waiting=ToolConfig(side_effect=RO),  # classified, never pinned
)


NONE = {"--all-unclassified": [], "--all": []}


def test_two_words_are_one_tool_and_its_class_and_more_are_each_tool_equals_class() -> None:
    assert read_words(["a", "read_only"]) == Words([("a", "read_only")], [], NONE)
    assert read_words(["x=y", "read_only"]) == Words([("x=y", "read_only")], [], NONE)  # rule 1
    words = read_words(["a=read_only", "x=y=destructive", "b", "=read_only"])
    assert words.entries == [("a", "read_only"), ("x=y", "destructive")]
    assert len(words.problems) == 2 and "'b'" in words.problems[0]


def test_several_tool_names_then_one_class_give_each_that_class() -> None:
    words = read_words(["a", "b", "c=d", "local_mutation"])
    assert words == Words(
        [("a", "local_mutation"), ("b", "local_mutation"), ("c=d", "local_mutation")], [], NONE
    )
    # No class last and no TOOL=CLASS word: the last word is taken as the class, and refused.
    assert read_words(["a", "b", "harmless"]).entries == [("a", "harmless"), ("b", "harmless")]
    with pytest.raises(ClassificationRefused):
        plan(CONFIG, "s", read_words(["a", "b", "harmless"]).entries)


@pytest.mark.parametrize(
    "words",
    [
        ["x=read_only", "destructive"],
        ["a", "x=read_only", "destructive"],
    ],
    ids=["one-tool", "several-tools"],
)
def test_a_word_that_reads_as_tool_equals_class_before_a_class_is_ambiguous_and_refused(
    words: list[str],
) -> None:
    read = read_words(words)
    assert ("x=read_only", "destructive") not in read.entries
    assert len(read.problems) == 1 and "ambiguous" in read.problems[0]
    with pytest.raises(ClassificationRefused) as refused:
        plan(CONFIG, "s", read.entries, problems=read.problems)
    assert refused.value.problems == tuple(read.problems)
    # The tool of that name is named unambiguously by TOOL=CLASS, split at the last "=".
    assert read_words(["x=read_only=destructive"]).entries == [("x=read_only", "destructive")]


def test_tool_equals_class_words_with_a_bare_word_last_are_each_tool_equals_class() -> None:
    read = read_words(["a=read_only", "b"])
    assert read.entries == [("a", "read_only")] and len(read.problems) == 1


def test_all_unclassified_rest_and_all_are_read_wherever_they_stand() -> None:
    assert read_words(["a", "--rest", "read_only", "local_mutation"]) == Words(
        [("a", "local_mutation")], [], {"--all-unclassified": ["read_only"], "--all": []}
    )  # fmt: skip
    assert read_words(["a", "b", "read_only", "--all-unclassified=destructive"]) == Words(
        [("a", "read_only"), ("b", "read_only")], [],
        {"--all-unclassified": ["destructive"], "--all": []},
    )  # fmt: skip
    words = read_words(["--all=destructive", "a=read_only", "--rest"])
    assert words.entries == [("a", "read_only")] and len(words.problems) == 1
    assert words.options == {"--all-unclassified": [], "--all": ["destructive"]}


def test_all_unclassified_and_its_older_name_rest_plan_the_same() -> None:
    by_rest = read_words(["c=destructive", "--rest", "read_only"])
    by_new = read_words(["c=destructive", "--all-unclassified", "read_only"])
    assert by_rest == by_new
    assert plan(CONFIG, "s", by_new.entries, rest="read_only") == {"c": DESTRUCTIVE, "a": RO}


@pytest.mark.parametrize(
    ("hints", "expected"),
    [
        ({"readOnlyHint": True}, RO),
        ({"destructiveHint": True}, DESTRUCTIVE),
        ({"readOnlyHint": False, "destructiveHint": True}, DESTRUCTIVE),
        ({"destructiveHint": False, "openWorldHint": True}, SideEffect.REMOTE_MUTATION),
        ({"destructiveHint": False, "openWorldHint": False}, LOCAL),
        ({"destructiveHint": False}, None),
        ({"readOnlyHint": False}, None),
        ({"idempotentHint": True}, None),
        ({"readOnlyHint": "yes"}, None),
        ({}, None),
    ],
)
def test_the_servers_hints_suggest_a_class_only_when_they_say_enough(
    hints: dict[str, object], expected: SideEffect | None
) -> None:
    assert suggested(hints) is expected
    if expected is not None:
        assert conflict(expected, hints) == ""  # a suggestion never contradicts the hints


def test_named_tools_come_first_then_rest_fills_the_pinned_tools_with_no_class() -> None:
    entries = [("c", "destructive"), ("new", "read_only")]
    assert plan(CONFIG, "s", entries, rest="read_only") == {
        "c": DESTRUCTIVE, "new": RO, "a": RO
    }  # fmt: skip


def test_all_classifies_every_pinned_tool_not_named_classified_or_not() -> None:
    assert plan(CONFIG, "s", [("a", "local_mutation")], every="read_only") == {
        "a": LOCAL, "b": RO, "c": RO
    }  # fmt: skip


def test_rest_with_nothing_left_is_an_empty_plan_not_a_refusal() -> None:
    done = config(a=ToolConfig(pin=PIN, side_effect=RO))
    assert plan(done, "s", [], rest="destructive") == {}


def test_every_problem_is_listed_and_the_whole_plan_refused() -> None:
    entries = [("a", "read_only"), ("a", "read_only"), ("b", "harmless"), ("c", "read_only")]
    with pytest.raises(ClassificationRefused) as refused:
        plan(CONFIG, "s", entries, every="sometimes", problems=["'oops' is not TOOL=CLASS"])
    assert len(refused.value.problems) == 4  # the word, a named twice, b's class, --all's class


@pytest.mark.parametrize(
    ("server", "entries", "options"),
    [
        ("nope", [("a", "read_only")], {}),
        ("s", [], {}),  # nothing asked
        ("s", [], {"rest": "read_only", "every": "read_only"}),
    ],
    ids=["unknown-server", "nothing-asked", "rest-and-all"],
)
def test_a_plan_that_cannot_be_made_is_refused(
    server: str, entries: list[tuple[str, str]], options: dict[str, str]
) -> None:
    with pytest.raises(ClassificationRefused):
        plan(CONFIG, server, entries, **options)


def test_rest_or_all_on_a_server_with_no_pinned_tool_is_refused() -> None:
    unpinned = config(waiting=ToolConfig(side_effect=RO))
    for option in ("rest", "every"):
        with pytest.raises(ClassificationRefused):
            plan(unpinned, "s", [], **{option: "read_only"})


def test_an_unpinned_tool_can_be_classified_as_one_tool_can_and_a_note_says_so() -> None:
    classes = plan(CONFIG, "s", [("later", "read_only")])
    assert classes == {"later": RO}
    server = CONFIG.servers["s"]
    assert len(notes("s", server, classes, None)) == 1


def test_a_class_the_last_listing_contradicts_is_kept_and_noted_unless_overruled() -> None:
    listed = {"a": {"pin": PIN, "annotations": {"destructiveHint": True}}, "b": {"pin": PIN}}
    classes = plan(CONFIG, "s", [("a", "read_only"), ("b", "read_only")])
    assert classes == {"a": RO, "b": RO}
    said = notes("s", CONFIG.servers["s"], classes, listed, "then")
    assert len(said) == 1 and said[0].startswith("a: ")
    overruled = config(a=ToolConfig(pin=PIN, overrule_annotations=True))
    assert notes("s", overruled.servers["s"], {"a": RO}, listed, "then") == []
