"""Durable under crashes: the harness at every crash point, in-process and with SIGKILL.

Guarantee G-CRASH-1: whatever point a process dies at, no side effect of a tool that is neither
read-only nor idempotent runs twice without an operator's approval in between; the record stays
complete and its chain verifies; the run ends as the contract says.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from core.store import Store
from core.testkit import Crash, Crasher, CrashPoint, Scenario, check, drive, gate_for
from core.testkit.harness import child_args, wait_for_the_lease_to_expire
from core.tools import SideEffect
from tests.core.gatekit import check_completeness, check_consistency

# (class, idempotent, the policy allows the class outright)
KINDS = {
    "mutating": (SideEffect.LOCAL_MUTATION, False, False),
    "mutating-allowed": (SideEffect.LOCAL_MUTATION, False, True),
    "read-only": (SideEffect.READ_ONLY, False, False),
    "idempotent": (SideEffect.REMOTE_MUTATION, True, False),
    "idempotent-allowed": (SideEffect.REMOTE_MUTATION, True, True),
}
# A call the policy allows reaches AFTER_ALLOWED; one that waits for an approval reaches
# AFTER_ATTACH_ALLOWED instead. Every kind reaches the others.
COMMON = [CrashPoint.AFTER_STEP, CrashPoint.TOOL_STARTED, CrashPoint.TOOL_DONE]
CASES = [
    (kind, point)
    for kind, (side_effect, _, allowed) in KINDS.items()
    for point in [
        *COMMON,
        CrashPoint.AFTER_ALLOWED
        if allowed or side_effect is SideEffect.READ_ONLY
        else CrashPoint.AFTER_ATTACH_ALLOWED,
    ]
]
# A mutating call that died inside the tool waits for the operator, who may say no.
REJECTING = [
    (kind, point)
    for kind in ("mutating", "mutating-allowed")
    for point in (CrashPoint.TOOL_STARTED, CrashPoint.TOOL_DONE)
]


def _scenario(tmp_path: Path, kind: str, *, approve: bool = True) -> Scenario:
    side_effect, idempotent, allowed = KINDS[kind]
    return Scenario(side_effect, idempotent, tmp_path / "effects.txt",
                    approve_interrupted=approve, policy_allows=allowed)  # fmt: skip


def _in_process(tmp_path: Path, scenario: Scenario, point: CrashPoint) -> dict[str, object]:
    db = tmp_path / "signoff.db"
    wall = [1_000_000.0]
    crasher = Crasher(point, lambda: (_ for _ in ()).throw(Crash()))
    with Store.open(db) as first:
        first.trace = []
        gate = gate_for(first, scenario, crasher, wall_clock=lambda: wall[0])
        with pytest.raises(Crash):
            asyncio.run(drive(gate, scenario, crasher))
        assert crasher.reached
        check_completeness(first)
    wall[0] += 31  # past the default 30 s lease: the dead session cannot have renewed it
    with Store.open(db) as second:
        second.trace = []
        nothing = Crasher(None, lambda: None)
        gate = gate_for(second, scenario, nothing, wall_clock=lambda: wall[0])
        asyncio.run(drive(gate, scenario, nothing, gate.attach(scenario.run_id)))
        check_completeness(second)
        check_consistency(second)
        return check(second, scenario)


def _kept_the_contract(found: dict[str, object], kind: str, point: CrashPoint) -> None:
    """What a run resumed after a death at ``point`` must show, however the process died."""
    assert found["status"] == "COMPLETED"
    mutating = kind.startswith("mutating")
    if mutating and point in (CrashPoint.TOOL_STARTED, CrashPoint.TOOL_DONE):
        assert found["interrupted_approved"] == 1  # it waited for the operator
    else:
        assert found["interrupted_approved"] == 0
    if mutating:
        # Died after the effect: it ran again only because the operator approved the repeat.
        assert found["effects"] == (2 if point == CrashPoint.TOOL_DONE else 1)


@pytest.mark.guarantee("G-CRASH-1")
@pytest.mark.parametrize(("kind", "point"), CASES)
def test_an_in_process_crash_at_each_point_keeps_the_contract(
    tmp_path: Path, kind: str, point: CrashPoint
) -> None:
    scenario = _scenario(tmp_path, kind)
    _kept_the_contract(_in_process(tmp_path, scenario, point), kind, point)


@pytest.mark.guarantee("G-CRASH-1")
@pytest.mark.parametrize(("kind", "point"), REJECTING)
def test_an_operator_who_rejects_the_repeat_ends_the_run_with_nothing_run_again(
    tmp_path: Path, kind: str, point: CrashPoint
) -> None:
    found = _in_process(tmp_path, _scenario(tmp_path, kind, approve=False), point)
    assert found["status"] == "CANCELLED"
    assert found["effects"] == (1 if point == CrashPoint.TOOL_DONE else 0)


@pytest.mark.slow
@pytest.mark.guarantee("G-CRASH-1")
@pytest.mark.parametrize(("kind", "point"), CASES)
def test_a_process_killed_at_each_point_is_resumed_by_another(
    tmp_path: Path, kind: str, point: CrashPoint
) -> None:
    scenario = _scenario(tmp_path, kind)
    crashed = subprocess.run(child_args(scenario, "crash", tmp_path, "--crash-at", point.value),
                             capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert crashed.returncode == -9, crashed.stderr
    wait_for_the_lease_to_expire(tmp_path / "signoff.db", scenario.run_id)
    resumed = subprocess.run(child_args(scenario, "resume", tmp_path), capture_output=True,
                             text=True, timeout=60, check=False)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    with Store.open(tmp_path / "signoff.db") as store:
        check_consistency(store)
        found = check(store, scenario)
    _kept_the_contract(found, kind, point)


@pytest.mark.slow
@pytest.mark.guarantee("G-CRASH-1")
def test_two_processes_racing_to_resume_one_expired_run_one_wins(tmp_path: Path) -> None:
    for trial in range(8):
        d = tmp_path / f"trial-{trial}"
        d.mkdir()
        scenario = _scenario(d, "mutating")
        crashed = subprocess.run(
            child_args(scenario, "crash", d, "--crash-at", CrashPoint.AFTER_STEP.value),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert crashed.returncode == -9, crashed.stderr
        wait_for_the_lease_to_expire(d / "signoff.db", scenario.run_id)
        racers = [
            subprocess.Popen(child_args(scenario, "resume", d, "--hold"), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]  # fmt: skip
        first_lines = [r.stdout.readline().strip() for r in racers]  # type: ignore[union-attr]
        assert sorted(first_lines) == ["attached", "leased"], first_lines
        for r in racers:
            _, err = r.communicate(input="go\n", timeout=60)
            assert r.returncode in (0, 3), err
        with Store.open(d / "signoff.db") as store:
            found = check(store, scenario)
        assert (found["status"], found["effects"]) == ("COMPLETED", 1)


def test_the_harness_reports_a_side_effect_run_twice(tmp_path: Path) -> None:
    """The check can fail: a repeat the record does not account for is caught."""
    scenario = _scenario(tmp_path, "mutating")
    _in_process(tmp_path, scenario, CrashPoint.AFTER_STEP)
    with scenario.effects.open("a") as f:
        f.write("1\n")
    with Store.open(tmp_path / "signoff.db") as store, pytest.raises(AssertionError):
        check(store, scenario)
