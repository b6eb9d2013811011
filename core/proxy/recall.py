"""A re-call of the same call: the run it belongs to, as the store records it, and what then.

Rules:

1. A call key (SHA-256 over server, tool spec hash, tool and canonical arguments) and the host
   that made the call (core/proxy/host_identity.py) find the run a re-call belongs to: still
   pending (held again), approved (executed now, once), rejected (the operator's reason, once),
   or completed but not yet handed back. Only the host's own runs: another host's identical
   call is a new call, and never collects what this one asked for. Proxies of one host (a
   restarted one, a second process) share its runs: two making the same call at once never both
   begin a run for it, and a run of a mutating call another of them is making is waited for
   within the hold, its outcome handed back here too. A run of no recorded host (made before
   hosts were recorded) is no host's: no re-call collects it.
2. A call needing approval is held up to the hold time, the store read again each time the
   proxy is woken (core/proxy/wakeups.py: a decision wakes it; a slow poll is the backstop);
   the tray app is woken. Approved within the hold: the result is returned in the same call.
   Otherwise, or once the host cancels the call, the answer is prose: pending, with the
   approval id, and how to collect it.
3. An approved call whose approval cannot be checked (the operator key unreadable: a locked or
   failing keyring) is held, the keyring tried each second; at the hold's end the answer says
   it did not run and why. It never runs unchecked.
4. A mutating call whose outcome could not be recorded (a full disk), or whose proxy died,
   waits for the operator like one whose outcome is unknown (core/proxy/servers.py rule 2),
   never re-run: a re-call finding the call's run still running never starts it twice.
5. The call key alone, whichever host asked, finds duplicates: the last run that may have taken
   effect (``last_effect``), and another host's run of the call not ended yet (``in_flight``),
   which may take effect at any moment. A begin is checked again under its write lock against
   the call key's latest run of any host, so that two hosts making the same call at once see
   each other's run: never two runs of a mutating call without the operator between them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from core import canonical, effects, kept_results, wake
from core.decisions import Decision
from core.errors import OperatorKeyUnavailable, RunLeased, RunStateError, UpstreamRefused
from core.gate import Gate, Verdict, VerdictOutcome
from core.lease import is_live
from core.proxy import answers, cancel
from core.proxy.answers import Result
from core.proxy.cancel import host_gave_up
from core.proxy.offered import Exposed
from core.proxy.wakeups import Wakeups
from core.records import TERMINAL
from core.store import Store, format_time
from core.transitions import collect

KEY_RETRY_SECONDS = 1.0  # an operator key that cannot be read is tried again this often

# The proxy's next step for a run given its verdict: executed, refused, ended or held.
AfterVerdict = Callable[[Exposed, Any, Verdict], Awaitable[Result]]


class Recall:
    """What the store says about a call's runs, and the paths a re-call takes to its run.

    ``gate`` and ``hold`` read the proxy's gate and hold time at the moment of use (the gate is
    made when the proxy starts; the hold follows a reloaded configuration); ``after_verdict``
    is the proxy's own next step once a run waiting for approval is resumed."""

    def __init__(
        self,
        store: Store,
        *,
        gate: Callable[[], Gate],
        hold: Callable[[], float],
        wall: Callable[[], float],
        after_verdict: AfterVerdict,
    ) -> None:
        self.store = store
        self._gate = gate
        self._hold_seconds = hold
        self._wall = wall
        self._after_verdict = after_verdict
        self.wakeups = Wakeups()

    # --- the re-call paths --------------------------------------------------------------

    async def hold(self, exposed: Exposed, run_id: str) -> Result:
        deadline = time.monotonic() + self._hold_seconds()
        with self.wakeups.listening_while():
            while True:
                seen = self.wakeups.received  # before the read: no wake is missed after it
                row = self.waiting_approval(run_id)
                if row is None:  # rejected meanwhile, or its grant run by another proxy
                    return await self.await_outcome(exposed, run_id, deadline)
                approval_id, status, request_hash, kind = row
                if status == "approved":
                    return await self.resume_waiting(exposed, run_id, hold=False)
                if time.monotonic() >= deadline or host_gave_up():
                    return answers.pending(exposed.name, approval_id, request_hash, kind=kind,
                                           error=_output(exposed))  # fmt: skip
                await self._woken(seen, deadline)

    async def resume_waiting(self, exposed: Exposed, run_id: str, *, hold: bool = True) -> Result:
        row = self.waiting_approval(run_id)
        if row is None:
            return await self.await_outcome(exposed, run_id, self._deadline())
        if row[1] == "pending":
            return (
                await self.hold(exposed, run_id)
                if hold
                else answers.pending(
                    exposed.name, row[0], row[2], kind=row[3], error=_output(exposed)
                )
            )
        deadline = self._deadline()
        while True:
            try:
                session, verdict = self._gate().attach(run_id)
                break
            except (RunLeased, RunStateError):
                # Another proxy is executing this grant for the same call, or took it past
                # waiting (or to its end) between our read and the attach: its outcome is ours.
                return await self.await_outcome(exposed, run_id, deadline)
            except OperatorKeyUnavailable as e:
                # Approved, but the approval cannot be checked: the call waits (it never runs
                # unchecked), the keyring tried again each second within the hold (rule 3).
                if time.monotonic() >= deadline or host_gave_up():
                    return answers.text(
                        f"Signoff: this call ({exposed.name}) was approved, but it did not run:"
                        f" {e} Unlock the keyring, then call again with exactly the same"
                        f" arguments. [{type(e).__name__}]",
                        error=True,
                    )
                await asyncio.sleep(min(KEY_RETRY_SECONDS, max(0.0, deadline - time.monotonic())))
        if verdict is None:
            session.close()
            return answers.text("Signoff: this call's run is in an unexpected state", error=True)
        return await self._after_verdict(exposed, session, verdict)

    async def unfinished(self, exposed: Exposed, run_id: str) -> Result | None:
        """An identical mutating call whose run never finished: under way in another process,
        or cut off (its process died, or its outcome could not be recorded). It is never
        started again on its own: one cut off after its start waits for the operator ("started,
        outcome unknown"); one cut off before (None) is ended, and the call starts anew."""
        gate = self._gate()
        if not gate.leases.holds(run_id):
            # Calls with one key are serialised, so a lease of ours that no session renews was
            # left by a call of this proxy that failed: let it go now rather than in a TTL.
            with self.store.transaction(purpose="lease") as tx:
                tx.execute(
                    "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL"
                    " WHERE id = ? AND lease_owner = ? AND status = 'RUNNING'",
                    (run_id, gate.owner),
                )
        try:
            session, verdict = gate.attach(run_id)
        except RunLeased:
            return answers.under_way(run_id, error=exposed.declares_output_schema)
        except RunStateError:  # it ended, or went on, between our read and the attach
            return await self.await_outcome(exposed, run_id, self._deadline())
        if verdict is None:  # its step never started the tool
            close_run(session, Decision.fail("cut off before the call started",
                                             origin="operator"))  # fmt: skip
            return None
        if verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None:
            wake.wake("approval")
            approval = verdict.approval
            return answers.pending(exposed.name, approval.id, approval.request_hash,
                                   kind=approval.kind, error=_output(exposed))  # fmt: skip
        return self.collect_answer(exposed, run_id)

    async def await_outcome(self, exposed: Exposed, run_id: str, deadline: float) -> Result:
        """A run of this call that another proxy is making (its grant executed there, or the
        same call made there): its outcome once it has one, held again if it waits for the
        operator; at the deadline, that it is under way. The proxy that ends it wakes this one."""
        with self.wakeups.listening_while():
            while True:
                seen = self.wakeups.received
                with self.store.snapshot() as conn:
                    row = conn.execute("SELECT status FROM runs WHERE id = ?",
                                       (run_id,)).fetchone()  # fmt: skip
                if row[0] in TERMINAL:
                    return self.collect_answer(exposed, run_id)
                waiting = self.waiting_approval(run_id)
                if waiting is not None and waiting[1] == "pending":
                    return await self.hold(exposed, run_id)
                if time.monotonic() >= deadline or host_gave_up():
                    return answers.under_way(run_id, error=exposed.declares_output_schema)
                await self._woken(seen, deadline)

    async def _woken(self, seen: int, deadline: float) -> None:
        """Until the proxy is woken after ``seen``, the host cancels, the backstop or the
        deadline (core/proxy/wakeups.py rule 3)."""
        call = cancel.HOST_CALL.get()
        cancelled = None if call is None else call.cancelled
        await self.wakeups.wait(seen, deadline - time.monotonic(), cancelled=cancelled)

    def collect_answer(self, exposed: Exposed, run_id: str) -> Result:
        with self.store.snapshot() as conn:
            status, reason = conn.execute(
                "SELECT status, end_reason FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            step = conn.execute(
                "SELECT observation FROM steps WHERE run_id = ? AND tool_name IS NOT NULL"
                " ORDER BY idx DESC LIMIT 1",
                (run_id,),
            ).fetchone()
            whole = kept_results.read(conn, run_id)
        self.mark_collected(run_id)
        observation = canonical.loads(step[0]) if step and step[0] else {}
        if not isinstance(observation, dict):
            observation = {}
        if reason == effects.NOT_REPEATED:
            why = observation.get("reason") or "no reason given"
            return answers.text(effects.not_repeated_text(exposed.name, str(why)), error=True)
        if reason == "rejected":
            why = observation.get("reason") or "no reason given"
            return answers.text(
                f"The operator rejected this call ({exposed.name}): {why}. It did not run.",
                error=True,
            )
        if status == "COMPLETED" or observation.get("ok") is True:
            return answers.from_record(observation, whole)
        detail = observation.get("detail")
        error = detail.get("rpc_error") if isinstance(detail, dict) else None
        if isinstance(error, dict):
            raise UpstreamRefused(str(observation.get("error")), dict(error))
        return answers.text(f"Signoff: this call ended {status.lower()} ({reason}).", error=True)

    def _deadline(self) -> float:
        return time.monotonic() + self._hold_seconds()

    # --- what the store says about a call's runs -----------------------------------------

    def latest_run(self, key: str, host: str) -> tuple[str, str, str | None, bool, str] | None:
        """The latest run of this call made by this host (rule 1): the one a re-call finds."""
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT id, status, end_reason, collected_at IS NOT NULL, updated_at FROM runs"
                " WHERE call_key = ? AND host = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (key, host),
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2], bool(row[3]), row[4])

    def latest_of_any_host(self, key: str) -> str | None:
        """The latest run of this call, whichever host made it: what a begin checks again under
        its write lock (``still_latest``, rule 5)."""
        with self.store.snapshot() as conn:
            row = conn.execute(_LATEST_OF_ANY_HOST, (key,)).fetchone()
        return None if row is None else str(row[0])

    def in_flight(self, key: str, host: str) -> str | None:
        """Since when another host's run of this call has been under way or waiting, not ended
        (rule 5), or None. A run of no recorded host (made before hosts were) is another's."""
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT created_at FROM runs WHERE call_key = ? AND host IS NOT ?"
                " AND status IN ('RUNNING', 'WAITING_FOR_APPROVAL')"
                " ORDER BY created_at, rowid LIMIT 1",
                (key, host),
            ).fetchone()
        return None if row is None else str(row[0])

    def last_effect(self, key: str) -> tuple[str, bool] | None:
        """When this call last may have taken effect (core.effects rule 4), and whether its
        outcome is unknown (it did not complete: it may or may not have run), or None."""
        with self.store.snapshot() as conn:
            row = conn.execute(  # the SQL is core.effects' constant, never input
                f"SELECT updated_at, status FROM runs WHERE call_key = ?"  # noqa: S608
                f" AND {effects.MAY_HAVE_RUN_SQL} ORDER BY updated_at DESC, rowid DESC LIMIT 1",
                (key,),
            ).fetchone()
        return None if row is None else (str(row[0]), row[1] != "COMPLETED")

    def made_elsewhere(self, run_id: str) -> bool:
        """Whether a run found running is being made by another proxy: leased live there, or
        moved on since (paused or ended by its maker)."""
        with self.store.snapshot() as conn:
            status, owner, expires = conn.execute(
                "SELECT status, lease_owner, lease_expires_at FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
        if status != "RUNNING":
            return True
        return owner != self._gate().owner and is_live(owner, expires, self._wall())

    def waiting_approval(self, run_id: str) -> tuple[str, str, str, str] | None:
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT a.id, a.status, a.request_hash, a.kind FROM approvals a JOIN runs r"
                " ON r.id = a.run_id WHERE a.run_id = ? AND r.status = 'WAITING_FOR_APPROVAL'"
                " AND a.status IN ('pending', 'approved')"
                " ORDER BY a.created_at DESC, a.rowid DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def started(self, run_id: str) -> bool:
        """Whether the run's upstream call was started and its outcome never recorded."""
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT 1 FROM steps WHERE run_id = ? AND status = 'executing'", (run_id,)
            ).fetchone()
        return row is not None

    def mark_collected(self, run_id: str) -> None:
        with self.store.transaction() as tx:
            if collect(tx, run_id, at=format_time_now()):
                kept_results.forget(tx, run_id)  # handed back: no re-call needs it now


def _output(exposed: Exposed) -> bool:
    """Whether a pending answer is an error to the host: for a tool declaring an output
    schema, whose results a host checks unless they are errors (core/proxy/answers.py)."""
    return exposed.declares_output_schema


def close_run(session: Any, decision: Decision) -> None:
    """The proxy's closing decision: the run ends with the call (one run per call)."""
    step = session.step()
    if step is not None:
        step.propose(decision)
    session.close()


def format_time_now() -> str:
    return format_time(datetime.now(UTC))


class Raced(Exception):
    """Another process began a run for the same call between its lookup and this begin."""


_LATEST_OF_ANY_HOST = (
    "SELECT id FROM runs WHERE call_key = ? ORDER BY created_at DESC, rowid DESC LIMIT 1"
)


def still_latest(key: str, seen: str | None) -> Callable[[Any], None]:
    """A check, under the write lock of a begin, that the call's latest run of any host is still
    ``seen``: two proxies making the same call at once never both begin a run for it, whether
    they serve one host or two (rule 5)."""

    def check(conn: Any) -> None:
        row = conn.execute(_LATEST_OF_ANY_HOST, (key,)).fetchone()
        if (None if row is None else row[0]) != seen:
            raise Raced(key)

    return check
