"""The rule editor made from the approval dialog (app/rule_editor.py, app/dialog.py rule 8):
prefilled from the request as the server will receive it, each condition built with
core/policy/rules.py's shorthands, a malformed rule refused by name with config.toml unchanged, a
destructive allow confirmed first, the save recorded as ``policy.changed``, and a rule that
decides the request deciding it in the dialog. Real widgets, a real config.toml and store."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.dialog import ApprovalDialog
from app.model import Pending, read_pending
from app.rule_editor import RuleEditor
from app.settings import SettingsState
from app.tray import TrayApp
from core import paths
from core.decisions import Decision
from core.gate import VerdictOutcome
from core.heads import MemoryHeadStore
from core.policy import rules
from core.policy.policy import ConfigPolicy
from core.policy.rules import ArgumentRule, Effect
from core.proxy import config as configuration
from core.proxy import manage
from core.proxy.pins import read_listing
from core.store import Store
from core.tools import SideEffect, Tool
from core.transitions import CallLabel
from tests.app.pending import OWN_FOLDER, make_pending
from tests.core.gatekit import FakeClock, make_gate

NOTE = "/home/me/notes/today.md"
ARGUMENTS = {"path": NOTE, "count": 3, "urgent": True}
CLASSES = {"write": "local_mutation", "delete": "destructive"}


@pytest.fixture
def config(home: Path) -> Path:
    """config.toml as Signoff writes it: server ``srv`` with ``write`` and ``delete`` pinned
    and classified."""
    path = paths.config_path()
    manage.add_server(path, "srv", "srv-command")
    tools = [{"name": name, "description": f"{name} something", "inputSchema": {"type": "object"}}
             for name in CLASSES]  # fmt: skip
    page = {"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}}
    manage.pin(path, "srv", read_listing([json.dumps(page).encode()]).tools)
    for tool, side_effect in CLASSES.items():
        manage.set_tool(path, "srv", tool, side_effect=side_effect)
    return path


def waiting(store: Store, tool: str = "write", **made: object) -> Pending:
    made.setdefault("arguments", dict(ARGUMENTS))
    approval = make_pending(store, tool=tool, **made)  # type: ignore[arg-type]
    return next(p for p in read_pending(store) if p.id == approval.id)


def editor_for(pending: Pending, store: Store, qtbot) -> RuleEditor:
    editor = RuleEditor(pending, SettingsState(paths.config_path(), store))
    qtbot.addWidget(editor)
    editor.show()
    return editor


def policy_changes(store: Store) -> int:
    with store.snapshot() as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'policy.changed'"
        ).fetchone()
    return int(count)


def saved_rules() -> list[ArgumentRule]:
    return configuration.load(paths.config_path()).rules()


def test_each_argument_has_a_row_prefilled_by_its_type_equal_to_its_value(
    store: Store, qtbot
) -> None:
    long = "word " * 100
    pending = waiting(store, fixed={"mode": "0644"}, arguments={**ARGUMENTS, "body": long})
    editor = editor_for(pending, store, qtbot)
    assert [(r.name, r.fixed) for r in editor.rows] == [
        ("body", False), ("count", False), ("path", False), ("urgent", False), ("mode", True),
    ]  # fmt: skip
    body = editor.row("body")
    assert body.seen.toolTip() == json.dumps(long) and "…" in body.seen.text()
    body.choice.setCurrentIndex(body.choice.findData("any"))
    offered = {r.name: [r.choice.itemData(i) for i in range(r.choice.count())]
               for r in editor.rows}  # fmt: skip
    assert offered == {"path": ["any", "equals", "folder", "pattern"],
                       "body": ["any", "equals", "folder", "pattern"],
                       "count": ["any", "equals", "at_most"], "urgent": ["any", "equals"],
                       "mode": ["any", "equals", "folder", "pattern"]}  # fmt: skip
    assert {r.choice.currentData() for r in editor.rows if r is not body} == {"equals"}
    assert editor.allow.isChecked() and editor.expires_text() == ""
    # As opened, it is this exact request, fixed value included: as the server receives it
    # ("any value" for the body, chosen above, and no other argument).
    assert editor.draft().when == rules.on_arguments(
        [("body", {}), ("count", rules.equals(3)), ("path", rules.equals(NOTE)),
         ("urgent", rules.equals(True)), ("mode", rules.equals("0644"))],
        closed=True,
    )  # fmt: skip
    assert editor.row("path").field.isHidden()
    editor.choose("path", "folder")
    assert editor.row("path").field.text() == "/home/me/notes"
    assert editor.row("path").field.isVisible()
    editor.choose("path", "pattern")
    assert editor.row("path").field.text() == f"^{re.escape(NOTE)}$"
    editor.choose("count", "at_most")
    assert editor.row("count").field.text() == "3"
    assert editor.row("path").seen.toolTip() == f'"{NOTE}"'
    assert "is at most 3" in editor.preview.text()


@pytest.mark.guarantee("G-RULES-1")
def test_each_condition_kind_builds_the_rule_of_its_shorthand(store: Store, qtbot) -> None:
    editor = editor_for(waiting(store), store, qtbot)
    editor.choose("path", "folder")
    editor.choose("count", "at_most", "10")
    editor.choose("urgent", "any")
    # An allow rule names every argument ("any value" as {}) and no other (rule 2).
    expected = rules.on_arguments(
        [("count", rules.at_most(10)), ("path", rules.under_folder("/home/me/notes")),
         ("urgent", {})],
        closed=True,
    )  # fmt: skip
    assert editor.draft().when == expected
    assert json.loads(editor.details.toPlainText()) == expected
    rule = editor.draft()
    for inside in (NOTE, "/home/me/notes", "/home/me/notes/deep/er.md"):
        assert rule.matches({"path": inside, "count": 4, "urgent": False})
    for outside in ("/home/me/notes/../secrets/key", "/home/me/notes/./x/../../y",
                    "/home/me/notesX/a", "/home/me", "notes/today.md"):  # fmt: skip
        assert not rule.matches({"path": outside, "count": 4, "urgent": True}), outside
    assert not rule.matches({"path": NOTE, "count": 11, "urgent": True})
    editor.choose("path", "pattern", r"^/home/me/notes/[a-z]+\.md$")
    assert editor.draft().when["properties"]["path"] == rules.pattern(  # type: ignore[index]
        r"^/home/me/notes/[a-z]+\.md$"
    )
    editor.choose("path", "any")
    editor.choose("count", "any")
    assert editor.draft().when == rules.on_arguments(
        [("count", {}), ("path", {}), ("urgent", {})], closed=True
    )
    assert "sets count, path, urgent to any value, and no other argument" in editor.preview.text()
    editor.reject_effect.setChecked(True)  # a reject rule stays open: nothing escapes it
    assert editor.draft().when == rules.on_arguments([])
    assert "whatever its arguments" in editor.preview.text()


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_as_the_editor_opens_matches_no_call_with_another_argument(
    store: Store, qtbot
) -> None:
    """It says it matches this exact request only: an optional flag or a second path added
    by the agent is another request, which asks."""
    rule = editor_for(waiting(store), store, qtbot).draft()
    assert rule.matches(ARGUMENTS)
    assert not rule.matches({**ARGUMENTS, "overwrite": True})
    assert not rule.matches({**ARGUMENTS, "also_to": "/etc/cron.d/x"})
    assert "and no other argument" in rules.words(rule)


@pytest.mark.guarantee("G-RULES-1")
def test_a_rule_from_the_editor_keeps_working_for_the_same_request_written_another_way(
    store: Store, qtbot
) -> None:
    """Decision 0064: "equals this value" on a path is the file, not its spelling; another
    file, or the same arguments with one more, still asks."""
    from core.policy.meaning import Where
    from core.policy.policy import Outcome, PolicyRequest

    rule = editor_for(waiting(store), store, qtbot).draft()
    policy = ConfigPolicy(rules={rule.gate_name: (rule,)}, where=Where("/home/me/notes"))

    def decided(path: str, **more: object) -> Outcome:
        request = PolicyRequest.build(
            tool=rule.gate_name, spec_hash="", side_effect=SideEffect.LOCAL_MUTATION,
            idempotent=False, arguments={**ARGUMENTS, "path": path, **more}, run_id="r",
            goal="", step=0, consecutive_failures=0,
        )  # fmt: skip
        return policy.evaluate(request).outcome

    for path in (NOTE, "/home/me/notes/./today.md", "/home/me//notes/today.md", "today.md",
                 "/home/me/x/../notes/today.md"):  # fmt: skip
        assert decided(path) is Outcome.ALLOW, path
    assert decided("/home/me/notes/other.md") is Outcome.APPROVE
    assert decided("./today.md", overwrite=True) is Outcome.APPROVE


def test_a_folder_is_prefilled_as_the_path_resolves() -> None:
    from app.rule_conditions import FOLDER, prefill

    assert prefill(FOLDER, "/home/me/notes/../../srv/.ssh/id") == "/home/srv/.ssh"


MALFORMED = {
    "a pattern that is not one": ("path", "pattern", "(", None),
    "a folder that is not absolute": ("path", "folder", "notes", None),
    "a bound that is not a number": ("count", "at_most", "many", None),
    "a bound that is not a finite number": ("count", "at_most", "NaN", None),
    "an expiry that cannot be read": ("path", "equals", None, "soon"),
}


@pytest.mark.guarantee("G-RULES-1")
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_rule_is_refused_by_name_and_config_toml_is_unchanged(
    store: Store, config: Path, qtbot, case: str
) -> None:
    name, choice, text, expires = MALFORMED[case]
    editor = editor_for(waiting(store), store, qtbot)
    editor.choose(name, choice, text)
    if expires is not None:
        editor.expires.setEditText(expires)
    before, recorded = config.read_bytes(), policy_changes(store)
    with qtbot.assertNotEmitted(editor.saved):
        editor.save_button.click()
    error = "RuleExpiryInvalid" if expires else "RuleConditionInvalid"
    assert editor.problem.text().startswith("Not saved: ")
    assert error not in editor.problem.text() and f"[{error}]" in editor.problem.toolTip()
    assert config.read_bytes() == before and policy_changes(store) == recorded
    assert editor.isVisible()


def test_a_rule_on_a_tool_that_is_not_pinned_is_refused_in_words(
    store: Store, config: Path, qtbot
) -> None:
    editor = editor_for(waiting(store, tool="push"), store, qtbot)  # srv/push: never pinned
    before = config.read_bytes()
    editor.save_button.click()
    assert "[RuleTargetUnknown]" in editor.problem.toolTip()
    assert "signoff" not in editor.problem.text().lower().replace("signoff's", "")
    assert config.read_bytes() == before and editor.isVisible()


@pytest.mark.guarantee("G-RULES-1")
def test_an_allow_rule_on_a_destructive_tool_is_saved_only_once_confirmed(
    store: Store, config: Path, qtbot
) -> None:
    editor = editor_for(waiting(store, tool="delete"), store, qtbot)
    assert editor.confirm.isVisible() and not editor.save_button.isEnabled()
    editor.reject_effect.setChecked(True)  # rejecting needs no confirmation
    assert editor.confirm.isHidden() and editor.save_button.isEnabled()
    editor.allow.setChecked(True)
    assert not editor.save_button.isEnabled()
    editor.confirm.setChecked(True)
    assert editor.save_button.isEnabled()
    with qtbot.waitSignal(editor.saved) as saved:
        editor.save_button.click()
    [rule] = saved_rules()
    assert saved.args == ["approve", rule.id]
    assert rule.effect is Effect.ALLOW and rule.destructive and rule.tool == "delete"


@pytest.mark.guarantee("G-RULES-1")
def test_a_tool_classified_destructive_since_the_request_needs_the_confirmation_too(
    store: Store, config: Path, qtbot
) -> None:
    pending = waiting(store)  # recorded as local_mutation
    manage.set_tool(config, "srv", "write", side_effect="destructive")
    editor = editor_for(pending, store, qtbot)
    assert editor.confirm.isVisible() and not editor.save_button.isEnabled()


@pytest.mark.guarantee("G-RULES-1")
def test_a_tool_classified_destructive_while_the_editor_is_open_is_refused_by_name(
    store: Store, config: Path, qtbot
) -> None:
    editor = editor_for(waiting(store), store, qtbot)
    assert editor.confirm.isHidden() and editor.save_button.isEnabled()
    manage.set_tool(config, "srv", "write", side_effect="destructive")
    before = config.read_bytes()
    with qtbot.assertNotEmitted(editor.saved):
        editor.save_button.click()
    assert "[RuleNeedsConfirmation]" in editor.problem.toolTip()
    assert "--yes-destructive" not in editor.problem.text()  # words, no terminal flag
    assert config.read_bytes() == before and saved_rules() == []
    # Now asked as for any destructive tool: saved once ticked.
    assert editor.confirm.isVisible() and not editor.save_button.isEnabled()
    editor.confirm.setChecked(True)
    with qtbot.waitSignal(editor.saved) as saved:
        editor.save_button.click()
    [rule] = saved_rules()
    assert saved.args == ["approve", rule.id] and rule.destructive


def test_a_saved_rule_is_recorded_as_a_policy_change(store: Store, config: Path, qtbot) -> None:
    recorded = policy_changes(store)
    editor = editor_for(waiting(store), store, qtbot)
    editor.note.setText("my notes")
    editor.expires.setCurrentIndex(editor.expires.findData("7d"))
    editor.save_button.click()
    [rule] = saved_rules()
    assert policy_changes(store) == recorded + 1
    assert rule.note == "my notes" and rule.expires is not None
    assert timedelta(days=6) < rule.expires - datetime.now(UTC) <= timedelta(days=7)


def second_call(store: Store, arguments: dict[str, object]) -> tuple[VerdictOutcome, str]:
    """The same call again, through a gate whose policy is the saved configuration's."""
    policy = configuration.load(paths.config_path()).policy()
    tool = Tool("srv/write", "write something", {"type": "object"}, SideEffect.LOCAL_MUTATION,
                lambda args: "done")  # fmt: skip
    gate = make_gate(store, [tool], policy=policy, clock=FakeClock(now=datetime.now(UTC)))
    step = gate.begin("again", "goal", call=CallLabel("srv", "write", "k" * 64)).step()
    verdict = step.propose(Decision.tool_call("srv/write", arguments))
    return verdict.outcome, verdict.reason


def _dialog(pending: Pending, store: Store, qtbot) -> ApprovalDialog:
    dialog = ApprovalDialog(pending, config_path=paths.config_path(), store=store)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_an_allow_rule_matching_the_request_approves_it_and_the_next_call_runs_by_it(
    store: Store, config: Path, qtbot
) -> None:
    pending = waiting(store)
    dialog = _dialog(pending, store, qtbot)
    editor = dialog.open_rule_editor()
    assert isinstance(editor, RuleEditor)
    editor.choose("path", "folder")
    with qtbot.waitSignal(dialog.decided) as decided:
        editor.save_button.click()
    [rule] = saved_rules()
    assert decided.args[:3] == [pending.id, pending.request_hash, "approve"]
    assert rule.id in decided.args[3]
    assert editor.isHidden()
    outcome, reason = second_call(store, {**ARGUMENTS, "path": "/home/me/notes/other.md"})
    assert outcome == VerdictOutcome.ALLOWED and f"allowed by rule {rule.id}" in reason


def test_a_reject_rule_matching_the_request_rejects_it(store: Store, config: Path, qtbot) -> None:
    pending = waiting(store)
    dialog = _dialog(pending, store, qtbot)
    editor = dialog.open_rule_editor()
    assert isinstance(editor, RuleEditor)
    editor.reject_effect.setChecked(True)
    with qtbot.waitSignal(dialog.decided) as decided:
        editor.save_button.click()
    assert decided.args[2] == "reject"
    [rule] = saved_rules()
    assert rule.effect is Effect.REJECT
    assert second_call(store, ARGUMENTS)[0] == VerdictOutcome.DENIED


def test_a_rule_that_does_not_decide_the_request_leaves_it_waiting(
    store: Store, config: Path, qtbot
) -> None:
    pending = waiting(store)
    dialog = _dialog(pending, store, qtbot)
    editor = dialog.open_rule_editor()
    assert isinstance(editor, RuleEditor)
    editor.choose("path", "pattern", "^/elsewhere/")
    with qtbot.assertNotEmitted(dialog.decided), qtbot.waitSignal(editor.saved) as saved:
        editor.save_button.click()
    [rule] = saved_rules()
    assert saved.args == ["", rule.id]
    assert "still waits" in editor.problem.text() and editor.isVisible()
    assert not editor.save_button.isEnabled() and dialog.isVisible()


def test_the_button_is_offered_only_for_a_request_the_policy_asked_about(
    store: Store, config: Path, qtbot
) -> None:
    for run_id, kind in (("asked", ""), ("dup", "duplicate"), ("own", "own_files"),
                         ("cut", "interrupted_side_effect")):  # fmt: skip
        arguments = {"path": str(OWN_FOLDER / "config.toml")} if kind == "own_files" else None
        make_pending(store, run_id=run_id, kind=kind, arguments=arguments)
    dialogs = {p.run_id: _dialog(p, store, qtbot) for p in read_pending(store)}
    offered = {run_id: not dialog.rule_button.isHidden() for run_id, dialog in dialogs.items()}
    assert offered == {"asked": True, "dup": False, "own": False, "cut": False}
    [asked] = [p for p in read_pending(store) if p.run_id == "asked"]
    no_config = ApprovalDialog(asked)  # nowhere to save a rule: not offered
    qtbot.addWidget(no_config)
    assert no_config.rule_button.isHidden()


def test_the_tray_s_dialog_saves_a_rule_that_approves_the_request(
    store: Store, config: Path, home: Path, qtbot
) -> None:
    app = TrayApp(store, MemoryHeadStore(), home, native=False)
    app.start()
    try:
        settings = app.open_settings()  # open before: it shows the rule once saved
        approval = make_pending(store, tool="write", arguments=dict(ARGUMENTS))
        qtbot.waitUntil(lambda: app.model.state == "pending", timeout=5000)
        dialog = app.open_dialog(approval.id)
        assert dialog is not None and not dialog.rule_button.isHidden()
        qtbot.mouseClick(dialog.rule_button, Qt.MouseButton.LeftButton)
        editor = dialog.rule_editor
        assert isinstance(editor, RuleEditor) and editor.isVisible()
        editor.save_button.click()
        qtbot.waitUntil(lambda: app.model.state == "idle", timeout=5000)
        with store.snapshot() as conn:
            (status, reason) = conn.execute(
                "SELECT status, decided_reason FROM approvals WHERE id = ?", (approval.id,)
            ).fetchone()
        [rule] = saved_rules()
        assert status == "approved" and rule.id in reason
        assert [r.id for r in settings.state.config.rules()] == [rule.id]
    finally:
        app.stop()
