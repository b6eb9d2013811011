"""The crash and resume harness: a loop driven on a gate, killed at a crash point, resumed.

``crash_and_resume(scenario, point, death, workdir)`` runs the scenario's loop on a new run,
makes it die at ``point``, resumes the run with ``Gate.attach`` from another gate, drives the
loop to the end, and checks the record (``core.testkit.scenario.check``). Two deaths:

- ``Death.IN_PROCESS``: the session is abandoned (its heartbeat stops, nothing is released) and
  the resumer's wall clock is moved past the lease;
- ``Death.SIGKILL``: a child process (``python -m core.testkit``) running the loop kills itself
  at the point; a second child resumes once the lease has expired. The loop must be importable
  by its ``"module:attr"`` name.

Between the loop's calls the harness is the operator: it approves a pending approval (binding
it to the hash shown, ``expected_hash``), or rejects an interrupted side effect when the scenario
says so, and attaches again. The loop's own mistakes raise the named ``LoopMistake`` of
``core.testkit.mistakes``; a point the loop never reaches is ``Result.crashed`` False.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from core import canonical
from core.approvals import approve, reject
from core.gate import Gate, Session, Verdict
from core.records import RunView, pending_approvals, read_run
from core.store import Store
from core.testkit.mistakes import (
    MISTAKES,
    IgnoredTheGrant,
    LoopMistake,
    LoopRaised,
    RendersDiffer,
    StoppedBeforeTheEnd,
    StoppedMidStep,
)
from core.testkit.scenario import Crash, Crasher, CrashPoint, Scenario, check, gate_for, name_of
from core.testkit.watch import Note, Watch, WatchedSession

CHILD_LEASE_TTL = 0.6  # seconds: short, so the resuming child waits little for the dead one


class Death(enum.StrEnum):
    IN_PROCESS = "in_process"
    SIGKILL = "sigkill"


@dataclass(frozen=True)
class Result:
    """What the record showed after the crash and the resume."""

    status: str
    effects: int  # how many times the side effect happened
    interrupted_approved: int  # the operator's approvals of a repeat
    interrupted_rejected: int
    crashed: bool  # whether the loop reached the crash point
    inputs: dict[int, tuple[str, ...]]  # every render of each step, in order (Scenario.render)

    @property
    def same_renders(self) -> bool:
        """Each step rendered the same in every session that rendered it."""
        return all(len(set(renders)) <= 1 for renders in self.inputs.values())


async def drive(
    gate: Gate,
    scenario: Scenario,
    crash: Crasher,
    opened: tuple[Session, Verdict | None] | None = None,
    note: Note | None = None,
) -> RunView:
    """The scenario's loop on the gate, the harness acting as the operator when a run pauses.

    Begins the run, or goes on from ``opened`` (what ``attach`` returned)."""
    store, run_id = gate.store, scenario.run_id
    loop, render = scenario.the_loop(), scenario.the_render()
    if opened is None:
        session, verdict = gate.begin(run_id, "write the effect once", scenario.limits), None
    else:
        session, verdict = opened
    while True:
        watch = Watch(session, verdict, crash, render, note or (lambda _step, _text: None))
        if watch.grant is not None:
            watch.point(CrashPoint.AFTER_ATTACH_ALLOWED)
            if render is not None:  # what its model would see at the approved step now
                watch.rendered(session.input())
        if not session.done():
            await _call(loop, watch, verdict)
        run = session.run()
        session.close()
        if run.status != "WAITING_FOR_APPROVAL":
            break
        with store.snapshot() as conn:
            waiting = [a for a in pending_approvals(conn) if a.run_id == run_id]
        if not waiting:
            raise AssertionError(f"run {run_id} waits with no pending approval")
        approval = waiting[0]
        if approval.kind == "interrupted_side_effect" and not scenario.approve_interrupted:
            reject(store, run_id, approval.id, "operator", "checked: do not repeat")
            break  # a rejection ends the run
        approve(store, run_id, approval.id, "operator", "ok",
                expected_hash=approval.request_hash)  # fmt: skip
        session, verdict = gate.attach(run_id)
    with store.snapshot() as conn:
        ended = read_run(conn, run_id)
    if ended is None:
        raise AssertionError("the run vanished")
    return ended


async def _call(loop: Callable[..., object], watch: Watch, verdict: Verdict | None) -> None:
    """One call of the loop, and what it left: its mistakes raised by name."""
    session = watch.session
    try:
        await cast(Callable[[Session, Verdict | None], object], loop)(
            cast(Session, WatchedSession(watch)), verdict
        )  # type: ignore[misc]
    except Crash:
        raise
    except LoopMistake:
        raise
    except Exception as e:
        if watch.mistake is not None:
            raise watch.mistake from e
        raise LoopRaised(f"the loop raised {type(e).__name__}: {e}") from e
    if watch.mistake is not None:
        raise watch.mistake  # the loop swallowed the refusal; the mistake stands
    if watch.grant is not None:
        raise IgnoredTheGrant(f"the loop returned without executing approved step {watch.grant}")
    current = session.current()
    if current is not None:
        raise StoppedMidStep(f"the loop returned with step {current.index} open")
    if not session.done():
        raise StoppedBeforeTheEnd(f"the loop returned with run {session.run_id} still running")


def crash_and_resume(scenario: Scenario, point: CrashPoint, death: Death, workdir: Path) -> Result:
    """Die at ``point`` by ``death``, resume, check the record (``AssertionError`` when it
    breaks the contract, a ``LoopMistake`` when the loop did)."""
    run = _in_process if death is Death.IN_PROCESS else _sigkill
    crashed, inputs = run(scenario, point, workdir)
    with Store.open(workdir / "signoff.db") as store:
        found = check(store, scenario)
    result = Result(crashed=crashed, inputs=inputs, **found)
    if not result.same_renders:
        differ = {k: v for k, v in inputs.items() if len(set(v)) > 1}
        raise RendersDiffer(f"a step rendered differently after a resume: {differ}")
    return result


def _in_process(
    scenario: Scenario, point: CrashPoint, workdir: Path
) -> tuple[bool, dict[int, tuple[str, ...]]]:
    db = workdir / "signoff.db"
    wall = [1_000_000.0]
    renders: dict[int, list[str]] = {}

    def note(step: int, text: str) -> None:
        renders.setdefault(step, []).append(text)

    def die() -> None:
        raise Crash

    crasher = Crasher(point, die)
    with Store.open(db) as first:
        gate = gate_for(first, scenario, crasher, wall_clock=lambda: wall[0])
        with contextlib.suppress(Crash):
            asyncio.run(drive(gate, scenario, crasher, note=note))
    if crasher.reached:
        wall[0] += gate.config.lease_ttl + 1  # the dead session cannot have renewed it
        with Store.open(db) as second:
            nothing = Crasher(None, lambda: None)
            gate = gate_for(second, scenario, nothing, wall_clock=lambda: wall[0])
            asyncio.run(drive(gate, scenario, nothing, gate.attach(scenario.run_id), note))
    return crasher.reached, {k: tuple(v) for k, v in renders.items()}


def child_args(scenario: Scenario, role: str, workdir: Path, *extra: str) -> list[str]:
    """The command line of a child process running the scenario's loop."""
    args = [sys.executable, "-m", "core.testkit", role, "--db", str(workdir / "signoff.db"),
            "--effects", str(scenario.effects), "--side-effect", scenario.side_effect.value,
            "--loop", name_of(scenario.loop), "--tool-name", scenario.tool_name,
            "--run-id", scenario.run_id, "--inputs", str(workdir / "inputs.jsonl"),
            "--ttl", str(CHILD_LEASE_TTL)]  # fmt: skip
    if scenario.render is not None:
        args += ["--render", name_of(scenario.render)]
    if scenario.model is not None:
        args += ["--model", name_of(scenario.model)]
    if scenario.limits is not None:
        args += ["--limits", canonical.dumps_text(scenario.limits.as_json())]
    if scenario.idempotent:
        args.append("--idempotent")
    if not scenario.approve_interrupted:
        args.append("--reject-interrupted")
    if scenario.policy_allows:
        args.append("--policy-allows")
    return [*args, *extra]


def _sigkill(
    scenario: Scenario, point: CrashPoint, workdir: Path
) -> tuple[bool, dict[int, tuple[str, ...]]]:
    crashed = _run_child(child_args(scenario, "crash", workdir, "--crash-at", point.value))
    if crashed:
        wait_for_the_lease_to_expire(workdir / "signoff.db", scenario.run_id)
        if _run_child(child_args(scenario, "resume", workdir)):
            raise AssertionError("the resuming child died, though nothing was to kill it")
    renders: dict[int, list[str]] = {}
    inputs = workdir / "inputs.jsonl"
    lines = inputs.read_text().splitlines() if inputs.exists() else []
    for line in lines:
        noted = json.loads(line)
        renders.setdefault(noted["step"], []).append(noted["render"])
    return crashed, {k: tuple(v) for k, v in renders.items()}


def _run_child(args: list[str]) -> bool:
    """Run a child to its end: True when it was killed, False when it finished; its loop's
    mistake raised here by name."""
    done = subprocess.run(  # noqa: S603  # our own interpreter, our own arguments
        args, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode == -9:
        return True
    if done.returncode == 0:
        return False
    last = (done.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        said = canonical.loads(last)
    except ValueError:
        said = {}
    if isinstance(said, dict) and said.get("mistake") in MISTAKES:
        raise MISTAKES[str(said["mistake"])](str(said.get("detail", "")))
    raise AssertionError(f"the child exited {done.returncode}: {done.stderr[-2000:]}")


def wait_for_the_lease_to_expire(db: Path, run_id: str, within: float = 20.0) -> None:
    """Until the dead child's lease has expired by the wall clock (a bounded wait, no more)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with Store.open(db) as store, store.snapshot() as conn:
            run = read_run(conn, run_id)
        if run is None or run.lease_expires_at is None or run.lease_expires_at < time.time():
            return
        time.sleep(0.05)
    raise AssertionError("the dead process's lease never expired")
