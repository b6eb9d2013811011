"""Approving for longer than once, from the dialog only (app/dialog.py rule 8, decision 0050):
the choice, the grant it makes, the next identical call running without a notification, and
"until Signoff quits" ending when the app quits."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.dialog import ApprovalDialog
from app.history_model import Filters, read_detail, read_runs
from app.model import read_pending
from app.tray import TrayApp
from core import grants, operator_key
from core.approvals import call_hash
from core.decisions import Decision
from core.gate import VerdictOutcome
from core.grants import Grant
from core.heads import MemoryHeadStore
from core.policy.policy import ConfigPolicy
from core.proxy.rules import ProxyRules
from core.store import Store
from core.transitions import CallLabel
from tests.app.pending import HOST, OWN_FOLDER, TOOLS, make_pending
from tests.core.gatekit import FakeClock, make_gate

pytestmark = pytest.mark.guarantee("G-GATE-6")


def _grants(store: Store) -> list[Grant]:
    with store.snapshot() as conn:
        return grants.listed(conn)


def _approve_in_dialog(tray: TrayApp, approval_id: str, scope: str, qtbot) -> None:
    dialog = tray.open_dialog(approval_id)
    assert dialog is not None
    assert dialog.scope.currentData() == ""  # it opens at "once"
    dialog.scope.setCurrentIndex(dialog.scope.findData(scope))
    qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)


def next_identical_call(
    store: Store, run_id: str = "again", host: tuple[str, str] = HOST
) -> VerdictOutcome:
    """The same call again, as the proxy of ``host`` makes it: the grant looked up for its call
    hash and checked in the chain, then the proxy's rules in front of the policy."""
    rules = ProxyRules(ConfigPolicy())
    gate = make_gate(store, TOOLS, policy=rules, clock=FakeClock(now=datetime.now(UTC)))
    hashed = call_hash(spec_hash=gate.tools["push"].spec_hash, tool="push", arguments={"n": 7})
    rules.grant, _ = asyncio.run(grants.live(store, operator_key.default(), hashed, host=host[0]))
    session = gate.begin(run_id, "goal", call=CallLabel("srv", "push", "k" * 64, *host))
    step = session.step()
    verdict = step.propose(Decision.tool_call("push", {"n": 7}))
    if verdict.outcome == VerdictOutcome.ALLOWED:
        asyncio.run(step.execute())
    return verdict.outcome


def test_scopes_are_offered_only_for_a_request_the_policy_asked_about(store: Store, qtbot) -> None:
    for run_id, kind in (("asked", ""), ("dup", "duplicate"), ("own", "own_files"),
                         ("cut", "interrupted_side_effect")):  # fmt: skip
        arguments = {"path": str(OWN_FOLDER / "config.toml")} if kind == "own_files" else None
        make_pending(store, run_id=run_id, kind=kind, arguments=arguments)
    offered = {}
    for pending in read_pending(store):
        dialog = ApprovalDialog(pending)
        qtbot.addWidget(dialog)
        offered[pending.run_id] = not dialog.scope.isHidden()
    assert offered == {"asked": True, "dup": False, "own": False, "cut": False}


def test_each_choice_names_the_host_whose_identical_calls_it_covers(
    store: Store, tray: TrayApp, qtbot
) -> None:
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    dialog = tray.open_dialog(approval.id)
    assert dialog is not None
    shown = [dialog.scope.itemText(i) for i in range(dialog.scope.count())]
    assert shown == [
        "Once",
        f"This exact request for 15 min, from {HOST[1]}",
        f"This exact request for 1 hour, from {HOST[1]}",
        f"This exact request until Signoff quits, from {HOST[1]}",
    ]
    dialog.scope.setCurrentIndex(dialog.scope.findData("15min"))
    qtbot.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    [grant] = _grants(store)
    assert (grant.host, grant.host_label) == HOST
    # Another host's identical call asks, as if there were no grant; this host's runs unasked.
    assert next_identical_call(store, "b", ("b" * 64, "host-b 1.0 (process 42)")) == (
        VerdictOutcome.PENDING
    )
    assert next_identical_call(store, "a") == VerdictOutcome.ALLOWED


def test_choosing_15_min_makes_the_grant_and_the_next_identical_call_runs_unasked(
    store: Store, tray: TrayApp, qtbot
) -> None:
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert len(tray.notifier.sent) == 1
    _approve_in_dialog(tray, approval.id, "15min", qtbot)
    [grant] = _grants(store)
    assert (grant.scope, grant.server, grant.tool, grant.approval_id) == (
        "15min", "srv", "push", approval.id,
    )  # fmt: skip
    assert next_identical_call(store) == VerdictOutcome.ALLOWED
    tray.refresh()
    assert tray.model.state == "idle" and len(tray.notifier.sent) == 1  # nothing asked
    detail = read_detail(store, "again")
    assert detail is not None and f"allowed under grant {grant.id}" in detail.text
    page = read_runs(store, Filters(), 10)
    [again] = [row for row in page.rows if row.id == "again"]
    assert again.decided == f"allowed under grant {grant.id}"


def test_approving_once_makes_no_grant_and_the_next_identical_call_asks(
    store: Store, tray: TrayApp, qtbot
) -> None:
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    _approve_in_dialog(tray, approval.id, "", qtbot)
    assert _grants(store) == []
    assert next_identical_call(store) == VerdictOutcome.PENDING


def test_a_notification_approves_once_only(store: Store, tray: TrayApp, qtbot) -> None:
    approval = make_pending(store)
    qtbot.waitUntil(lambda: tray.model.state == "pending", timeout=5000)
    assert tray.decide(approval.id, approval.request_hash, "approve", "from the notification")
    assert _grants(store) == []


def test_until_signoff_quits_ends_when_the_app_quits(store: Store, home: Path, qtbot) -> None:
    heads = MemoryHeadStore()
    app = TrayApp(store, heads, home, native=False)
    app.start()
    approval = make_pending(store)
    qtbot.waitUntil(lambda: app.model.state == "pending", timeout=5000)
    _approve_in_dialog(app, approval.id, "app", qtbot)
    [grant] = _grants(store)
    assert grant.app_session == app.session
    assert next_identical_call(store, "while-open") == VerdictOutcome.ALLOWED
    app.stop()  # what quitting does
    [ended] = _grants(store)
    assert ended.revoked_at is not None
    # The end is kept in the keyring as the app quits (its witness stops with it): a database
    # cut back to before it is seen (core/grants.py rule 6).
    kept = heads.load(store.database_id)
    assert kept is not None and kept == store.head()
    assert next_identical_call(store, "after-quit") == VerdictOutcome.PENDING
