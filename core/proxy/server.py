"""The stdio proxy: an MCP server for the host, a gated client of the real servers.

Rules:

1. Each configured server is started with our own client (core/proxy/upstream.py), its tools
   pinned over the raw bytes they were listed with. Only tools that are pinned, unchanged,
   classified and free of annotation conflicts are offered (core/proxy/pins.py); the set is
   fixed at start. With one server the tool names are unchanged; with several they are
   ``server__tool``, and a collision refuses the later tool. ``signoff_status`` (read-only,
   answered by the proxy) lists what waits; an upstream tool of that name is refused.
2. Each ``tools/call`` is its own run through the gate, which executes the upstream call.
   The gate knows the tool as ``server/tool``; its spec carries the pin and the fixed values,
   so an approval is bound to them too.
3. A call key (SHA-256 over server, tool spec hash, tool and canonical arguments) finds the run
   a re-call belongs to: still pending (held again), approved (executed now, once), rejected
   (the operator's reason, once), or completed but not yet handed back. Proxies sharing the
   database share the keys: two making the same call at once never both begin a run for it
   (the lookup is checked again under the begin's write lock), and a run of a mutating call
   another proxy is making is waited for within the hold, its outcome handed back here too.
4. An identical mutating call completed within the duplicate window is not run again on policy
   alone: it waits for the operator as an approval of kind ``duplicate``.
5. A call needing approval is held up to the hold time, watching the store every 50 ms; the
   tray app is woken. Approved within the hold: the result is returned in the same call.
   Otherwise the answer is prose: pending, with the approval id, and how to collect it.
6. An upstream call that times out or is cut off has an unknown outcome: a mutating tool's run
   waits for the operator (interrupted side effect), never re-run. So does one whose outcome
   could not be recorded (a full disk), or whose proxy died: a re-call finding the call's run
   still running never starts it twice. A request that could not even be written to a server
   that died between calls was never made: the server is started again and it is sent.
7. Results are flattened to text (core/proxy/answers.py: non-text content summarised) and
   capped at 64 KiB with a marker. No ``outputSchema`` is offered to the host, so no host
   raises on a prose answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types

from core import canonical, effects, present
from core.decisions import Decision
from core.errors import (
    OutcomeUnknown,
    RunLeased,
    RunStateError,
    SignoffError,
    UpstreamAnswerUnreadable,
    UpstreamError,
    UpstreamGone,
    UpstreamNotDelivered,
    UpstreamProtocolError,
    UpstreamTimeout,
)
from core.gate import Gate, GateConfig, Verdict, VerdictOutcome
from core.lease import is_live
from core.limits import Limits
from core.policy import (
    ConfigPolicy,
    Outcome,
    PolicyDecision,
    PolicyRequest,
    behind_duplicate_rule,
)
from core.proxy import answers, status, wake
from core.proxy.answers import STATUS_TOOL
from core.proxy.config import Config, ServerConfig, stamp
from core.proxy.config import load as load_config
from core.proxy.pins import Listing, ToolState, evaluate, read_listing
from core.proxy.unreadable import AnswerUnreadable
from core.proxy.upstream import Upstream
from core.records import TERMINAL, pending_requests
from core.store import Store, format_time
from core.tools import SideEffect, Tool
from core.transitions import CallLabel, collect

log = logging.getLogger("signoff.proxy")

POLL_SECONDS = 0.05
START_TIMEOUT = 60.0
MUTATING = frozenset(
    {SideEffect.LOCAL_MUTATION, SideEffect.REMOTE_MUTATION, SideEffect.DESTRUCTIVE}
)


class DuplicateRule:
    """The proxy's rule before the operator's policy: an identical mutating call that completed
    within the window waits for the operator (``duplicate``). Set per proposal by the proxy;
    proposals are synchronous, so no other call can see the flag."""

    def __init__(self, inner: ConfigPolicy) -> None:
        self.inner = inner
        self.duplicate_of: str | None = None

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        decision = self.inner.evaluate(request)
        if self.duplicate_of is not None and decision.outcome in (Outcome.ALLOW, Outcome.APPROVE):
            return PolicyDecision(
                Outcome.APPROVE, f"the same call ran at {self.duplicate_of}", kind="duplicate"
            )
        return decision

    def identity(self) -> str:
        return behind_duplicate_rule(self.inner.identity())


@dataclass
class Exposed:
    """A tool offered to the host."""

    name: str  # as the host sees it
    server: str
    state: ToolState

    @property
    def gate_name(self) -> str:
        return f"{self.server}/{self.state.tool.name}"


class Proxy:
    def __init__(
        self,
        config: Config,
        names: list[str],
        store: Store,
        *,
        log_dir: Path,
        hold_seconds: float | None = None,
        clock_wall: Callable[[], float] = time.time,
        config_path: Path | None = None,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self._config_stamp = stamp(config_path)
        self._hold_given = hold_seconds is not None
        self.names = names
        self.store = store
        self.log_dir = log_dir
        self.status_dir = log_dir.parent / "status"
        self.hold = config.hold_seconds if hold_seconds is None else hold_seconds
        self.upstreams: dict[str, Upstream] = {}
        self.listings: dict[str, Listing] = {}
        self.problems: dict[str, str] = {}  # server -> why it offers nothing
        self.exposed: dict[str, Exposed] = {}
        self.refused: dict[str, str] = {}  # why, by the name the host would call it
        self.policy = DuplicateRule(config.policy())
        self.gate: Gate | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: Counter[str] = Counter()  # calls holding or awaiting each lock
        self._wall = clock_wall

    # --- starting -----------------------------------------------------------------------

    async def start(self) -> None:
        for name in self.names:
            server = self.config.servers[name]
            try:
                upstream, listing = await self._connect(server)
            except Exception as e:  # one bad server never takes the others down
                self.problems[name] = f"{e} [{type(e).__name__}]"
                log.error("server %s offers nothing: %s", name, self.problems[name])
                status.record(self.status_dir, name, None, self.problems[name])
                continue
            status.record(self.status_dir, name, listing)
            self.upstreams[name] = upstream
            self.listings[name] = listing
            for what, why in listing.dropped:
                log.warning("server %s: dropped %s: %s", name, what, why)
        self._expose()
        tools = [self._gate_tool(e) for e in self.exposed.values()]
        self.gate = Gate(
            GateConfig(store=self.store, tools=tools, policy=self.policy, owner="proxy")
        )

    async def _connect(self, server: ServerConfig) -> tuple[Upstream, Listing]:
        upstream = Upstream(server, self.log_dir / f"{server.name}.log")
        await upstream.start(START_TIMEOUT)
        try:
            pages = await upstream.list_tools(START_TIMEOUT)
            return upstream, read_listing(pages)
        except BaseException:
            await upstream.close()
            raise

    def _expose(self) -> None:
        several = len(self.names) > 1
        for name in self.names:
            listing = self.listings.get(name)
            if listing is None:
                continue
            server = self.config.servers[name]
            for tool in listing.tools:
                state = evaluate(tool, server.tools.get(tool.name))
                exposed_name = f"{name}__{tool.name}" if several else tool.name
                if not state.available:
                    why = state.reason
                elif exposed_name == STATUS_TOOL:
                    why = f"{STATUS_TOOL} is Signoff's own tool"
                elif exposed_name in self.exposed:
                    why = f"another server's tool is already offered as {exposed_name}"
                else:
                    self.exposed[exposed_name] = Exposed(exposed_name, name, state)
                    continue
                self.refused.setdefault(exposed_name, why)
                log.warning("not offered: %s/%s: %s", name, tool.name, why)

    def _gate_tool(self, exposed: Exposed) -> Tool:
        state = exposed.state
        hidden = [*state.fixed, *self.config.servers[exposed.server].tools[state.tool.name].deny]
        schema = dict(state.exposed_schema)
        if hidden:
            schema["not"] = {"anyOf": [{"required": [name]} for name in hidden]}
        schema["x-signoff"] = {"pin": state.tool.pin, "fixed": state.fixed}
        server, tool_name, fixed = exposed.server, state.tool.name, state.fixed

        async def call_upstream(arguments: dict[str, Any]) -> Any:
            return await self._call_upstream(server, tool_name, {**arguments, **fixed})

        return Tool(
            exposed.gate_name,
            state.tool.description,
            schema,
            state.side_effect,
            call_upstream,
            # A server's idempotentHint is not evidence: an interrupted mutation always waits.
            idempotent=False,
            terminal=True,  # one run per call: a result ends the run
        )

    # --- serving ------------------------------------------------------------------------

    def list_tools(self) -> list[types.Tool]:
        tools = [
            types.Tool(
                name=STATUS_TOOL,
                description="Lists the requests from this connection that wait for the"
                " operator's decision, with their approval ids. Read-only.",
                input_schema={"type": "object", "properties": {}},
                annotations=types.ToolAnnotations(read_only_hint=True),
            )
        ]
        for exposed in self.exposed.values():
            tool = exposed.state.tool
            tools.append(
                types.Tool(
                    name=exposed.name,
                    description=tool.description,
                    input_schema=exposed.state.exposed_schema,
                )
            )
        return tools

    def reload_rules(self) -> bool:
        """Take up the rules and timings as the configuration file says now, when it changed.

        A rule the operator tightened applies to the next call, without restarting the proxy.
        The tool set (pins, classes, fixed and denied parameters) stays as it was at start: a
        tool's class is part of what the gate pinned. A file that no longer reads keeps the
        rules last read, and says so in the log."""
        now = stamp(self.config_path)
        if now == self._config_stamp or self.config_path is None:
            return False
        self._config_stamp = now
        try:
            new = load_config(self.config_path)
        except SignoffError as e:
            log.error("the configuration no longer reads; the rules stay as they were: %s", e)
            return False
        self.policy.inner = new.policy()
        self.config = dataclasses.replace(
            self.config,
            classes=new.classes,
            duplicate_window_seconds=new.duplicate_window_seconds,
            call_timeout_seconds=new.call_timeout_seconds,
            grant_ttl_seconds=new.grant_ttl_seconds,
        )
        if not self._hold_given:
            self.hold = new.hold_seconds
        log.info("rules reloaded: policy %s", self.policy.identity()[:16])
        return True

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        self.reload_rules()
        if name == STATUS_TOOL:
            return answers.text(self.status())
        exposed = self.exposed.get(name)
        if exposed is None:
            return answers.text(
                f"Signoff: {name} is not available: {self._why_not(name)}", error=True
            )
        args = arguments or {}
        arguments_text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        try:
            key = _call_key(exposed, self._spec_hash(exposed), canonical.loads(arguments_text))
        except SignoffError as e:
            key = canonical.sha256_hex({"unreadable": arguments_text, "tool": exposed.gate_name})
            log.warning("arguments not exact JSON: %s", e)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._lock_users[key] += 1
        try:
            async with lock:
                return await self._call(exposed, arguments_text, key)
        finally:
            # A lock per call key ever made would grow without end in a proxy kept open for
            # days: forget it when no other call with this key holds or awaits it.
            self._lock_users[key] -= 1
            if not self._lock_users[key]:
                del self._lock_users[key], self._locks[key]

    async def _call(self, exposed: Exposed, arguments: str, key: str) -> types.CallToolResult:
        gate = self._require_gate()
        previous = self._latest_run(key)
        duplicate_of = None
        if previous is not None:
            run_id, status, _, collected, _ = previous
            if status == "WAITING_FOR_APPROVAL":
                return await self._resume_waiting(exposed, run_id)
            if status == "RUNNING" and exposed.state.side_effect in MUTATING:
                if self._made_elsewhere(run_id):  # another proxy is making this call
                    return await self._await_outcome(exposed, run_id, time.monotonic() + self.hold)
                unfinished = await self._unfinished(exposed, run_id)
                if unfinished is not None:
                    return unfinished
            if not collected and status in ("CANCELLED", "COMPLETED", "FAILED"):
                return self._collect_answer(exposed, run_id)
        # The last run of this call that may have taken effect, not the last run: a rejected
        # duplicate in between must not let the next identical call through on policy alone.
        completed = self._last_effect(key) if exposed.state.side_effect in MUTATING else None
        if completed is not None and self._within_window(completed):
            duplicate_of = completed
        run_id = f"call-{secrets.token_hex(8)}"
        try:
            session = gate.begin(
                run_id,
                f"{exposed.gate_name} for the host",
                # The call (a terminal tool), then, if it failed, the proxy's closing decision.
                Limits(
                    max_steps=2,
                    loop_repeats=None,
                    max_consecutive_failures=None,
                    grant_ttl_seconds=self.config.grant_ttl_seconds or None,
                ),
                call=CallLabel(exposed.server, exposed.state.tool.name, key),
                check=_still_latest(key, None if previous is None else previous[0]),
            )
        except _Raced:  # another proxy began a run for this call since: look again
            return await self._call(exposed, arguments, key)
        step = session.step()
        if step is None:
            session.close()
            return answers.text("Signoff: the call could not start", error=True)
        self.policy.duplicate_of = duplicate_of
        try:
            verdict = step.propose(
                Decision(
                    kind="tool_call", tool=exposed.gate_name, arguments=arguments, origin="model"
                )
            )
        finally:
            self.policy.duplicate_of = None
        return await self._after_verdict(exposed, session, verdict)

    async def _after_verdict(
        self, exposed: Exposed, session: Any, verdict: Verdict
    ) -> types.CallToolResult:
        run_id = session.run_id
        if verdict.outcome == VerdictOutcome.ALLOWED:
            return await self._execute(exposed, session)
        if verdict.outcome == VerdictOutcome.DENIED:
            self._close_run(session, Decision.fail(f"denied: {verdict.reason}", origin="operator"))
            self._mark_collected(run_id)
            return answers.text(f"Signoff refused this call: {verdict.reason}", error=True)
        session.close()
        if verdict.outcome == VerdictOutcome.PENDING:
            wake.wake("approval")
            return await self._hold(exposed, run_id)
        self._mark_collected(run_id)
        return answers.text(f"Signoff ended this call: {verdict.reason}", error=True)

    async def _execute(self, exposed: Exposed, session: Any) -> types.CallToolResult:
        step = session.current()
        run_id = session.run_id
        # The tool is terminal: a result ends the run, and is marked handed back, in the
        # transaction of its outcome (one commit instead of three).
        try:
            observation = await step.execute(
                also=lambda tx, _: collect(tx, run_id, at=format_time_now())
            )
        except SignoffError as e:
            if not self._started(run_id):
                raise
            # The upstream call was made; its outcome could not be recorded (a full disk, a
            # lost lease). The run stays "started": a re-call takes it to the operator.
            return answers.text(
                f"Signoff: this call was made, but its outcome could not be recorded: {e}"
                f" [{type(e).__name__}]. It will not be repeated on its own: calling again with"
                " the same arguments asks the operator, who decides whether it runs again.",
                error=True,
            )
        if not observation.ok and observation.approval is None:
            self._close_run(session, Decision.fail(observation.error or "", origin="operator"))
        session.close()
        if observation.approval is not None:
            wake.wake("approval")
            approval = observation.approval
            return answers.pending(exposed.name, approval.id, approval.request_hash,
                            kind=approval.kind)  # fmt: skip
        wake.wake("ended")
        return answers.result(observation)

    async def _hold(self, exposed: Exposed, run_id: str) -> types.CallToolResult:
        deadline = time.monotonic() + self.hold
        while True:
            row = self._waiting_approval(run_id)
            if row is None:  # rejected meanwhile, or its grant run by another proxy
                return await self._await_outcome(exposed, run_id, deadline)
            approval_id, status, request_hash, kind = row
            if status == "approved":
                return await self._resume_waiting(exposed, run_id, hold=False)
            if time.monotonic() >= deadline:
                return answers.pending(exposed.name, approval_id, request_hash, kind=kind)
            await asyncio.sleep(POLL_SECONDS)

    async def _resume_waiting(
        self, exposed: Exposed, run_id: str, *, hold: bool = True
    ) -> types.CallToolResult:
        row = self._waiting_approval(run_id)
        if row is None:
            return await self._await_outcome(exposed, run_id, time.monotonic() + self.hold)
        if row[1] == "pending":
            return (
                await self._hold(exposed, run_id)
                if hold
                else answers.pending(exposed.name, row[0], row[2], kind=row[3])
            )
        try:
            session, verdict = self._require_gate().attach(run_id)
        except (RunLeased, RunStateError):
            # Another proxy is executing this grant for the same call, or took it past waiting
            # (or to its end) between our read and the attach: its outcome is this call's.
            return await self._await_outcome(exposed, run_id, time.monotonic() + self.hold)
        if verdict is None:
            session.close()
            return answers.text("Signoff: this call's run is in an unexpected state", error=True)
        return await self._after_verdict(exposed, session, verdict)

    async def _unfinished(self, exposed: Exposed, run_id: str) -> types.CallToolResult | None:
        """An identical mutating call whose run never finished: under way in another process,
        or cut off (its process died, or its outcome could not be recorded). It is never
        started again on its own: one cut off after its start waits for the operator ("started,
        outcome unknown"); one cut off before (None) is ended, and the call starts anew."""
        gate = self._require_gate()
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
            return answers.text(
                f"Signoff: an identical call (run {run_id}) is under way in another Signoff"
                " process, or was cut off moments ago; it is not started twice. Call again with"
                " exactly the same arguments later to learn how it ended."
            )
        except RunStateError:  # it ended, or went on, between our read and the attach
            return await self._await_outcome(exposed, run_id, time.monotonic() + self.hold)
        if verdict is None:  # its step never started the tool
            self._close_run(session, Decision.fail("cut off before the call started",
                                                   origin="operator"))  # fmt: skip
            return None
        if verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None:
            wake.wake("approval")
            approval = verdict.approval
            return answers.pending(exposed.name, approval.id, approval.request_hash,
                            kind=approval.kind)  # fmt: skip
        return self._collect_answer(exposed, run_id)

    def _started(self, run_id: str) -> bool:
        """Whether the run's upstream call was started and its outcome never recorded."""
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT 1 FROM steps WHERE run_id = ? AND status = 'executing'", (run_id,)
            ).fetchone()
        return row is not None

    async def _await_outcome(
        self, exposed: Exposed, run_id: str, deadline: float
    ) -> types.CallToolResult:
        """A run of this call that another proxy is making (its grant executed there, or the
        same call made there): its outcome once it has one, held again if it waits for the
        operator; at the deadline, that it is under way."""
        while True:
            with self.store.snapshot() as conn:
                row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row[0] in TERMINAL:
                return self._collect_answer(exposed, run_id)
            waiting = self._waiting_approval(run_id)
            if waiting is not None and waiting[1] == "pending":
                return await self._hold(exposed, run_id)
            if time.monotonic() >= deadline:
                return answers.under_way(run_id)
            await asyncio.sleep(POLL_SECONDS)

    @staticmethod
    def _close_run(session: Any, decision: Decision) -> None:
        """The proxy's closing decision: the run ends with the call (one run per call)."""
        step = session.step()
        if step is not None:
            step.propose(decision)
        session.close()

    def _collect_answer(self, exposed: Exposed, run_id: str) -> types.CallToolResult:
        with self.store.snapshot() as conn:
            status, reason = conn.execute(
                "SELECT status, end_reason FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            step = conn.execute(
                "SELECT observation FROM steps WHERE run_id = ? AND tool_name IS NOT NULL"
                " ORDER BY idx DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        self._mark_collected(run_id)
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
            return answers.from_record(observation)
        return answers.text(f"Signoff: this call ended {status.lower()} ({reason}).", error=True)

    def _why_not(self, name: str) -> str:
        if name in self.refused:
            return self.refused[name]
        server = name.split("__", 1)[0] if len(self.names) > 1 else self.names[0]
        if server in self.problems:
            return f"server {server} offers no tools: {self.problems[server]}"
        return "no such tool"

    def status(self) -> str:
        with self.store.snapshot() as conn:
            waiting = [p for p in pending_requests(conn) if p.server in self.names]
        if not waiting:
            return "Nothing waits for the operator."
        lines = [f"{len(waiting)} request(s) wait for the operator's decision:"]
        for p in waiting:
            lines.append(
                f"- {p.id}: {p.server}/{p.tool} {p.arguments} ({p.kind}), request fingerprint"
                f" {present.fingerprint(p.request_hash)}, since {p.created_at}"
            )
        lines.append("When one is approved, call the tool again with the same arguments.")
        return "\n".join(lines)

    async def close(self) -> None:
        for upstream in self.upstreams.values():
            await upstream.close()

    # --- internals ----------------------------------------------------------------------

    async def _call_upstream(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        upstream = self.upstreams.get(server)
        if upstream is None or not upstream.alive:
            upstream = await self._restart(server, tool)
        timeout = self.config.call_timeout_seconds
        try:
            try:
                result = await upstream.call_tool(tool, arguments, timeout)
            except UpstreamNotDelivered:
                # It died between calls before we noticed: this call was never made.
                upstream = await self._restart(server, tool)
                result = await upstream.call_tool(tool, arguments, timeout)
        except UpstreamTimeout as e:
            # A server that stopped answering is stopped; the next call starts it again.
            await upstream.close()
            raise OutcomeUnknown(str(e)) from None
        except UpstreamNotDelivered as e:  # twice: it was not made, and did not run
            raise RuntimeError(str(e)) from None
        except (UpstreamGone, UpstreamAnswerUnreadable) as e:  # it reached the server
            raise OutcomeUnknown(str(e)) from None
        except UpstreamProtocolError as e:  # a JSON-RPC error: the server's own refusal
            raise RuntimeError(f"the server refused the call: {e}") from None
        return answers.flatten(result)

    async def _restart(self, server: str, tool: str) -> Upstream:
        """Start a server that died between calls. Its whole new listing is checked against
        the pins: every offered tool of it that changed stops being offered, not only the one
        being called (a reworded tool could now say it is destructive)."""
        old = self.upstreams.pop(server, None)
        if old is not None:
            await old.close()
        try:
            upstream, listing = await self._connect(self.config.servers[server])
        except UpstreamError as e:
            raise RuntimeError(f"server {server} is not running and did not restart: {e}") from None
        listed = {t.name: t for t in listing.tools}
        configured = self.config.servers[server].tools
        withdrawn = ""  # why the tool being called was, if it was
        for exposed in [e for e in self.exposed.values() if e.server == server]:
            name = exposed.state.tool.name
            now = listed.get(name)
            state = evaluate(now, configured.get(name)) if now is not None else None
            if state is None:
                why = "is no longer listed"
            elif now is not None and now.pin != exposed.state.tool.pin:
                why = "changed since it was pinned"
            elif not state.available:
                why = state.reason
            else:
                continue
            del self.exposed[exposed.name]
            self.refused[exposed.name] = f"server {server} restarted, and {name} {why}"
            log.warning("no longer offered: %s", self.refused[exposed.name])
            if name == tool:
                withdrawn = self.refused[exposed.name]
        status.record(self.status_dir, server, listing)
        if withdrawn:
            await upstream.close()
            raise RuntimeError(withdrawn)
        self.upstreams[server] = upstream
        return upstream

    def _require_gate(self) -> Gate:
        if self.gate is None:
            raise RuntimeError("the proxy was not started")
        return self.gate

    def _spec_hash(self, exposed: Exposed) -> str:
        return self._require_gate().tools[exposed.gate_name].spec_hash

    def _latest_run(self, key: str) -> tuple[str, str, str | None, bool, str] | None:
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT id, status, end_reason, collected_at IS NOT NULL, updated_at FROM runs"
                " WHERE call_key = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (key,),
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2], bool(row[3]), row[4])

    def _last_effect(self, key: str) -> str | None:
        """When this call last may have taken effect (core.effects rule 4), or None."""
        with self.store.snapshot() as conn:
            row = conn.execute(  # the SQL is core.effects' constant, never input
                f"SELECT updated_at FROM runs WHERE call_key = ? AND {effects.MAY_HAVE_RUN_SQL}"  # noqa: S608
                " ORDER BY updated_at DESC, rowid DESC LIMIT 1",
                (key,),
            ).fetchone()
        return None if row is None else str(row[0])

    def _made_elsewhere(self, run_id: str) -> bool:
        """Whether a run found running is being made by another proxy: leased live there, or
        moved on since (paused or ended by its maker)."""
        with self.store.snapshot() as conn:
            status, owner, expires = conn.execute(
                "SELECT status, lease_owner, lease_expires_at FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
        if status != "RUNNING":
            return True
        return owner != self._require_gate().owner and is_live(owner, expires, self._wall())

    def _waiting_approval(self, run_id: str) -> tuple[str, str, str, str] | None:
        with self.store.snapshot() as conn:
            row = conn.execute(
                "SELECT a.id, a.status, a.request_hash, a.kind FROM approvals a JOIN runs r"
                " ON r.id = a.run_id WHERE a.run_id = ? AND r.status = 'WAITING_FOR_APPROVAL'"
                " AND a.status IN ('pending', 'approved')"
                " ORDER BY a.created_at DESC, a.rowid DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def _mark_collected(self, run_id: str) -> None:
        with self.store.transaction() as tx:
            collect(tx, run_id, at=format_time_now())

    def _within_window(self, updated: str) -> bool:
        age = datetime.now(UTC) - datetime.fromisoformat(updated)
        return age.total_seconds() < self.config.duplicate_window_seconds


def format_time_now() -> str:
    return format_time(datetime.now(UTC))


class _Raced(Exception):
    """Another process began a run for the same call between its lookup and this begin."""


def _still_latest(key: str, seen: str | None) -> Callable[[Any], None]:
    """A check, under the write lock of a begin, that the call's latest run is still ``seen``:
    two proxies making the same call at once never both begin a run for it."""

    def check(conn: Any) -> None:
        row = conn.execute(
            "SELECT id FROM runs WHERE call_key = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (key,),
        ).fetchone()
        if (None if row is None else row[0]) != seen:
            raise _Raced(key)

    return check


def _call_key(exposed: Exposed, spec_hash: str, arguments: Any) -> str:
    return canonical.sha256_hex(
        {
            "server": exposed.server,
            "tool_spec": spec_hash,
            "tool": exposed.state.tool.name,
            "arguments": arguments,
        }
    )


async def serve(
    config: Config,
    names: list[str],
    store: Store,
    *,
    log_dir: Path,
    hold_seconds: float | None = None,
    config_path: Path | None = None,
) -> None:
    """Run the proxy over this process's stdin and stdout until the host closes them."""
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    proxy = Proxy(
        config, names, store, log_dir=log_dir, hold_seconds=hold_seconds, config_path=config_path
    )
    await proxy.start()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=proxy.list_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            return await proxy.call(params.name, params.arguments)
        except SignoffError as e:  # a named refusal, shown to the host, never a crash
            return answers.text(f"Signoff: {e} [{type(e).__name__}]", error=True)

    server: Server[Any] = Server(
        "signoff",
        version="0.1",
        instructions="Tool calls pass through Signoff: some wait for the operator's approval.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    try:
        async with stdio_server() as (read, write):
            # A request the SDK cannot read is answered with an error, not dropped.
            unreadable_answered = AnswerUnreadable(read, write)
            await server.run(unreadable_answered, write, server.create_initialization_options())
    finally:
        await proxy.close()
