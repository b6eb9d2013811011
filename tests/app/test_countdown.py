"""The approval dialog counts down, once a second by its clock, how long the agent's call is
still held and when the request lapses, and says in plain words what has happened at zero."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.countdown import Timing
from app.dialog import TICK_MS, ApprovalDialog
from app.model import Pending
from core.canonical import dumps_text

MADE = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
TIMING = Timing(hold_seconds=5, grant_ttl_seconds=3600, pending_ttl=86_400)


class FakeNow:
    """A clock the test moves: the dialog reads the time from it, never from the wall."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _dialog(qtbot, clock: FakeNow, timing: Timing = TIMING, **fields: Any) -> ApprovalDialog:
    made: dict[str, Any] = {
        "id": "ap-1",
        "run_id": "run-1",
        "server": "notes",
        "tool": "write_note",
        "arguments": dumps_text({"text": "hello"}),
        "request_hash": "1ab46bf09c2e77d1" + "ab" * 24,
        "kind": "approval",
        "side_effect": "local_mutation",
        "created_at": MADE.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reason": "",
        "description": "Write a note",
    }
    dialog = ApprovalDialog(Pending(**(made | fields)), timing=timing, clock=clock)
    qtbot.addWidget(dialog)
    return dialog


def test_the_hold_counts_down_and_at_zero_says_the_agent_was_told_it_is_pending(qtbot) -> None:
    clock = FakeNow(MADE)
    dialog = _dialog(qtbot, clock)
    assert "The agent is waiting 5 s more" in dialog.hold_label.text()
    assert "after that it will be told the request is pending" in dialog.hold_label.text()
    assert dialog.waiting_label.text() == "0 s"
    clock.advance(3)
    dialog.tick()
    assert "The agent is waiting 2 s more" in dialog.hold_label.text()
    assert dialog.waiting_label.text() == "3 s"
    clock.advance(2)
    dialog.tick()
    said = dialog.hold_label.text()
    assert said.startswith("The agent has been told the request is pending")
    assert "runs when the agent asks again" in said
    assert not dialog.hold_label.isHidden()


def test_the_countdown_is_driven_by_a_timer_once_a_second(qtbot) -> None:
    clock = FakeNow(MADE)
    dialog = _dialog(qtbot, clock)
    assert dialog.ticker.isActive() and dialog.ticker.interval() == TICK_MS == 1000
    clock.advance(4)
    with qtbot.waitSignal(dialog.ticker.timeout, timeout=3000):
        pass  # the timer's own tick, not the test's, moves the text
    assert "The agent is waiting 1 s more" in dialog.hold_label.text()


def test_the_lapse_counts_down_and_at_zero_says_nothing_runs(qtbot) -> None:
    clock = FakeNow(MADE)
    dialog = _dialog(qtbot, clock)
    said = dialog.lapse_label.text()
    assert "Undecided, it lapses in 24 h (at " in said
    assert "it expires and nothing runs" in said
    assert "Once approved, the agent must ask again within 1 h," in said
    clock.advance(86_400 - 90)
    dialog.tick()
    assert "lapses in 1 min" in dialog.lapse_label.text()
    clock.advance(89)
    dialog.tick()
    assert "lapses in 1 s" in dialog.lapse_label.text()
    clock.advance(1)
    dialog.tick()
    assert dialog.lapse_label.text().startswith("It has lapsed undecided: it expires and nothing")


def test_an_approval_that_never_lapses_is_said_so(qtbot) -> None:
    dialog = _dialog(qtbot, FakeNow(MADE), Timing(hold_seconds=5, grant_ttl_seconds=None))
    assert "An approval given now does not lapse." in dialog.lapse_label.text()


def test_a_call_cut_off_has_no_hold_and_is_not_repeated_once_it_lapses(qtbot) -> None:
    clock = FakeNow(MADE)
    dialog = _dialog(qtbot, clock, kind="interrupted_side_effect")
    assert dialog.hold_label.isHidden()
    assert "it is not repeated" in dialog.lapse_label.text()


def test_a_library_run_has_no_agent_call_held(qtbot) -> None:
    dialog = _dialog(qtbot, FakeNow(MADE), server=None)
    assert dialog.hold_label.isHidden()
    assert "lapses in" in dialog.lapse_label.text()


def test_the_countdown_stops_once_the_request_is_decided_elsewhere(qtbot) -> None:
    dialog = _dialog(qtbot, FakeNow(MADE))
    dialog.decided_elsewhere("Approved by someone else. Nothing here can change it now.")
    assert not dialog.ticker.isActive()
    assert dialog.hold_label.isHidden() and dialog.lapse_label.isHidden()
