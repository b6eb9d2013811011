"""What the windows say is in words a newcomer reads: classes, rules, states, the record, and
errors without their class names (docs/decisions/0045)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

from app.dialog import ApprovalDialog
from app.history_model import intact, status_words
from app.model import read_pending
from app.settings import SettingsState
from app.settings_policy import PolicyPage
from app.words import class_explanation, class_words
from core import paths
from core.errors import SignoffError
from core.proxy import manage
from core.store import Store
from core.tools import SideEffect
from tests.app.pending import make_pending
from tests.conftest import ROOT


@pytest.mark.parametrize("side_effect", list(SideEffect))
def test_every_class_has_words_and_a_one_line_explanation(side_effect: SideEffect) -> None:
    words, explanation = class_words(side_effect), class_explanation(side_effect)
    assert side_effect.value not in words and "_" not in words
    assert explanation.endswith(".") and "\n" not in explanation
    assert explanation != class_explanation(None)


def test_no_class_reads_as_not_classified() -> None:
    assert class_words(None) == "Not classified"
    assert "not offered" in class_explanation(None)


def test_a_run_state_reads_as_a_word_with_its_reason_only_when_it_says_more() -> None:
    assert status_words("COMPLETED", "completed") == "Completed"
    assert status_words("FAILED", "tool_error") == "Failed (tool error)"
    assert status_words("WAITING_FOR_APPROVAL", None) == "Waiting for approval"


def test_an_empty_record_reads_as_intact_not_as_verified_to_event_0() -> None:
    assert intact(0) == "Record: intact (no events yet)"
    assert intact(12) == "Record intact: verified up to event 12"


def test_the_policy_page_names_each_class_in_words_and_explains_it(home: Path, qtbot) -> None:
    page = PolicyPage(SettingsState(paths.config_path(), None))
    qtbot.addWidget(page)
    shown = [label.text() for label in page.findChildren(QLabel)]
    for side_effect in SideEffect:
        assert class_words(side_effect) in shown
        assert page.explanations[side_effect].text() == class_explanation(side_effect)
    assert not [text for text in shown if any(s.value in text for s in SideEffect)]


def test_the_approval_dialog_names_the_class_in_words_and_keeps_its_name_in_a_tooltip(
    store: Store, qtbot
) -> None:
    make_pending(store, tool="push")
    [pending] = read_pending(store)
    dialog = ApprovalDialog(pending)
    qtbot.addWidget(dialog)
    shown = [label.text() for label in dialog.findChildren(QLabel)]
    assert "Changes things elsewhere" in shown
    assert any("“Changes things elsewhere”" in text for text in shown)  # the policy's reason
    assert not [text for text in shown if "remote_mutation" in text]
    assert any("remote_mutation" in label.toolTip() for label in dialog.findChildren(QLabel))


def test_a_refused_change_says_why_without_the_errors_class_name(home: Path) -> None:
    manage.add_server(paths.config_path(), "kept", "true")
    try:
        manage.add_server(paths.config_path(), "kept", "true")
    except SignoffError as e:
        refused = e
    else:
        pytest.fail("a second server of the same name was accepted")
    said = SettingsState(paths.config_path(), None).apply(
        lambda path: manage.add_server(path, "kept", "true")
    )
    assert str(refused) in said
    assert type(refused).__name__ not in said


COMMAND = re.compile(
    r"\bsignoff (proxy|pin|classify|hosts|settings|servers|demo|verify|approve|reject|runs"
    r"|pending|decisions|recheck)\b"
)
NAMED_ERROR = re.compile(r"\[\{type\(\w+\)\.__name__\}\]")


def _window_texts(source: str) -> list[str]:
    """The string constants of a module of the app, docstrings left out."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]  # fmt: skip


@pytest.mark.parametrize("module", sorted((ROOT / "app").glob("*.py")), ids=lambda p: p.name)
def test_no_window_text_sends_a_person_to_the_terminal_or_names_an_error_class(
    module: Path,
) -> None:
    """Issue 21 item 6: a window says what to do in the window, and an error in words (its
    class's name may go in a tooltip or the log, never into the text)."""
    source = module.read_text()
    assert NAMED_ERROR.findall(source) == []
    commands = [t for t in _window_texts(source) if COMMAND.search(t)]
    assert commands == [], commands
