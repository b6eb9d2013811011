"""The stdio proxy: an MCP server for the host, a gated client of the real servers.

The proxy wires its parts: the upstream servers as it starts, calls and restarts them
(core/proxy/servers.py), the tools it offers the host (core/proxy/offered.py), and what a
re-call of the same call finds (core/proxy/recall.py), and which host made the call
(core/proxy/host_identity.py).

Rules:

1. Each ``tools/call`` is its own run through the gate, which executes the upstream call.
   The gate knows the tool as ``server/tool``; its spec carries the pin and the fixed values,
   so an approval is bound to them too.
2. An identical mutating call completed within the duplicate window is not run again on policy
   alone: it waits for the operator as an approval of kind ``duplicate``. A call naming
   Signoff's own files waits as ``own_files`` (core/policy/own_files.py), whatever its class and the
   policy's allow; a deny stands (``ProxyRules``). A call the operator allowed for a while
   (a standing grant, core/grants.py rule 7) runs without asking, recorded under its grant.
3. A host's ``notifications/cancelled`` for a call in flight is sent on to the server, and
   the call's outcome is still recorded: its answer within the grace period is its result
   (left for the re-call to collect), none is an unknown outcome (core/proxy/servers.py
   rule 2).
4. Each host sees its own calls: a run records the host it is for; a re-call collects only its
   host's runs, ``signoff_status`` lists only its host's pending requests, and another host's
   identical mutating call is a new call that waits as a ``duplicate`` while the first may
   have taken effect (completed or cut off within the window, or not ended yet).
5. The tool set follows the servers' listings and the configuration in force (core/proxy/live.py,
   core/proxy/offered.py rule 3); the gate takes it up between calls (core/gate_parts.py rule 1):
   a call keeps the tool it was proposed with, an approval holds only while its tool's spec (pin,
   class, fixed values) is unchanged. The host is told (``on_tools_changed``) when it changed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import canonical, kept_results, present, wake
from core.approvals import call_hash
from core.decisions import Decision
from core.errors import (
    SignoffError,
    ToolFailed,
    UpstreamAnswerTooLarge,
    UpstreamAnswerUnreadable,
    UpstreamRefused,
)
from core.gate import Gate, GateConfig, Verdict, VerdictOutcome
from core.grants import Grant, live
from core.limits import Limits
from core.policy.meaning import Where
from core.policy.own_files import OwnFiles, working_directory
from core.proxy import answers, config_record, host_identity, instructions, results
from core.proxy.answers import STATUS_TOOL, Result
from core.proxy.cancel import HOST_CALL, HostCall, current, host_gave_up
from core.proxy.config import Config, stamp
from core.proxy.live import Live
from core.proxy.offered import Exposed, Offered
from core.proxy.recall import Raced, Recall, close_run, format_time_now, still_latest
from core.proxy.resources import Resources
from core.proxy.rules import ProxyRules
from core.proxy.servers import Servers
from core.proxy.upstream import CEILING, Cancelled, Greeting, OnMessage, Upstream
from core.records import pending_requests
from core.store import Store
from core.tools import SideEffect, Tool
from core.transitions import CallLabel, collect

log = logging.getLogger("signoff.proxy")

MUTATING = frozenset(
    {SideEffect.LOCAL_MUTATION, SideEffect.REMOTE_MUTATION, SideEffect.DESTRUCTIVE}
)
__all__ = ["MUTATING", "Proxy", "ProxyRules"]  # ProxyRules: core/proxy/rules.py, used here


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
        rules_problem: str = "",
    ) -> None:
        """``rules_problem``: why the configuration in force could not be established at start
        (``config`` then names no server): every call is refused, saying why, for its life."""
        self.config = config
        self.rules_problem = rules_problem
        if rules_problem:
            log.error("no rules in force, every call is refused: %s", rules_problem)
        self._timeouts = config  # the servers' and tools' own call timeouts, as last read
        self.config_path = config_path
        self._hold_given = hold_seconds is not None
        self.names = names
        self.store = store
        self._config_stamp = self._config_generation()
        self.log_dir = log_dir
        self.status_dir = log_dir.parent / "status"
        self.hold = config.hold_seconds if hold_seconds is None else hold_seconds
        self.offered = Offered(names, config.servers)
        self.servers = Servers(
            config.servers,
            log_dir=log_dir,
            status_dir=self.status_dir,
            offered=self.offered,
            timeout=lambda server, tool: self._timeouts.call_timeout(server, tool),
            grace=lambda: self.config.cancel_grace_seconds,
            on_message=self._from_server,
            # A result is read whole well past its limit, to be cut rather than dropped.
            ceiling=lambda server: max(CEILING, 4 * self._timeouts.result_limit(server)),
            withdrew=lambda: self.on_tools_changed and self.on_tools_changed(),
        )
        self.on_server_message: OnMessage | None = None  # the host session's, once it serves
        self.on_tools_changed: Callable[[], None] | None = None  # rule 5, the host session's
        self.live = Live(self.servers, self.status_dir, self.retool, self.reload_rules)
        self.roots: dict[str, Any] = {}  # the roots each server was last given by the host
        self.resources = Resources(self)  # prompts, resources, completion (decision 0055)
        # Where the servers read a relative path: the proxy's folder, which they inherit.
        self.where = Where.here()
        self.policy = ProxyRules(
            config.policy(self.where),
            OwnFiles.of(store.path, config_path, cwd=working_directory()),
            self.where,
        )
        self.gate: Gate | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: Counter[str] = Counter()  # calls holding or awaiting each lock
        self.recall = Recall(
            store,
            gate=self._require_gate,
            hold=lambda: self.hold,
            wall=clock_wall,
            after_verdict=self._after_verdict,
        )
        self._calls: set[asyncio.Future[Result]] = set()  # the host's, in flight
        # The host before (or without) its initialize: its launching process alone (rule 4).
        self.launcher = host_identity.launcher()
        self.host = host_identity.identify(None, self.launcher)

    @property
    def upstreams(self) -> dict[str, Upstream]:
        return self.servers.upstreams

    @property
    def exposed(self) -> dict[str, Exposed]:
        return self.offered.exposed

    # --- starting -----------------------------------------------------------------------

    async def spawn(self) -> None:
        """Start the servers' processes, before the host's ``initialize`` greets them."""
        await self.servers.spawn(self.names)

    async def start(self, greeting: Greeting | None = None) -> None:
        """Greet the servers (as the host's ``greeting`` says, when there is one), pin their
        listings and make the gate."""
        await self.servers.start(self.names, greeting)
        self.offered.expose(self.servers.listings)
        tools = [self._gate_tool(e) for e in self.exposed.values()]
        tools += self.resources.take_up()  # a get or a read is a run (resources.py rule 3)
        self.gate = Gate(
            GateConfig(store=self.store, tools=tools, policy=self.policy, owner="proxy")
        )
        self.live.watch()
        wake.wake("tools")  # the app shows what waits for the operator (core/proxy/live.py)

    def _gate_tool(self, exposed: Exposed) -> Tool:
        state = exposed.state
        hidden = [*state.fixed, *self.config.servers[exposed.server].tools[state.tool.name].deny]
        schema = dict(state.exposed_schema)
        if hidden:
            schema["not"] = {"anyOf": [{"required": [name]} for name in hidden]}
        # The pin that holds: a tool still under its old pin is shown, and bound, as pinned.
        schema["x-signoff"] = {"pin": state.pinned_as, "fixed": state.fixed}
        server, tool_name, fixed = exposed.server, state.tool.name, state.fixed

        async def call_upstream(arguments: dict[str, Any]) -> Any:
            """The server's answer as the host will receive it (``HostCall.answer``), and its
            record (core/proxy/results.py) as what the gate records."""
            call = current()
            try:
                answer = await self.servers.call(server, tool_name, {**arguments, **fixed})
            except UpstreamRefused as e:  # its JSON-RPC error reaches the host unchanged
                call.error = e.error
                raise ToolFailed(str(e), {"rpc_error": e.error}) from None
            except UpstreamAnswerUnreadable as e:  # it answered: it ran (servers.py rule 4)
                size = e.size if isinstance(e, UpstreamAnswerTooLarge) else 0
                shaped = results.unreadable(f"{e} [{type(e).__name__}]", size)
            else:
                limit = self._timeouts.result_limit(server)
                shaped = results.shape(answer.result, len(answer.raw), limit, server)
            call.answer, call.whole = shaped.result, shaped.whole
            return shaped.record

        return Tool(
            exposed.gate_name,
            state.tool.description,
            schema,
            state.side_effect,
            call_upstream,
            # A server's idempotentHint is not evidence: an interrupted mutation always waits.
            idempotent=False,
            terminal=True,  # one run per call: a result ends the run
            hidden=tuple(hidden),
        )

    # --- serving ------------------------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        return self.offered.listing()

    def reload_rules(self) -> bool:
        """Take up the rules and timings in force, when they changed.

        The rules in force are the configuration Signoff last recorded, never the file as it
        stands (core/proxy/config_record.py): a file changed outside Signoff, gone or unreadable
        keeps the recorded rules, and says so in the log. A rule the operator tightened applies
        to the next call, without restarting the proxy, and so does a pin, class, fixed or
        denied parameter: the tool set is evaluated again (rule 5)."""
        if self.config_path is None:
            return False
        now = self._config_generation()
        if now == self._config_stamp or self.rules_problem:
            return False
        self._config_stamp = now
        try:
            state = config_record.state(self.store, self.config_path)
            new = state.config()
        except SignoffError as e:
            log.error("the rules in force cannot be read; they stay as they were: %s", e)
            return False
        if state.changed_outside:
            log.error("%s", state.why())
        self.config = dataclasses.replace(
            self.config,
            servers=new.servers,
            classes=new.classes,
            duplicate_window_seconds=new.duplicate_window_seconds,
            call_timeout_seconds=new.call_timeout_seconds,
            cancel_grace_seconds=new.cancel_grace_seconds,
            grant_ttl_seconds=new.grant_ttl_seconds,
        )
        self._timeouts = new
        if not self._hold_given:
            self.hold = new.hold_seconds
        self.retool()
        inner = new.policy(self.where)
        # Rules see the fixed values the gate sends: those of the tools offered now.
        sent = {e.gate_name: e.state.fixed for e in self.exposed.values() if e.state.fixed}
        inner.fixed = {tool: sent[tool] for tool in inner.rules if tool in sent}
        self.policy.inner = inner
        log.info("rules reloaded: policy %s", self.policy.identity()[:16])
        return True

    def retool(self) -> None:
        """The tool set (gets and reads: resources.py rule 7) evaluated again; the host told."""
        changed = self.offered.retake(self.config.servers, self.servers.listings)
        if self.gate is not None:
            try:
                gets = self.resources.take_up()
                self.gate.retool([*map(self._gate_tool, self.exposed.values()), *gets])
            except SignoffError as e:  # the gate refuses a call to any tool it does not hold
                log.error("the gate kept its tools; a tool it refused is not called: %s", e)
        if changed and self.on_tools_changed:
            self.on_tools_changed()

    def _config_generation(self) -> tuple[object, int] | None:
        """What tells the rules in force apart: the file's stamp and the latest record."""
        if self.config_path is None:
            return None
        with self.store.snapshot() as conn:
            return (stamp(self.config_path), config_record.generation(conn))

    def host_of(self, client_info: Any) -> host_identity.Host:
        """The host of a call: the ``clientInfo`` of the session's ``initialize`` (None when it
        gave none) and this proxy's launching process."""
        return host_identity.identify(client_info, self.launcher)

    async def serve_call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        host: host_identity.Host | None = None,
        *,
        cancelled: asyncio.Event | None = None,
        progress: str | int | None = None,
        exposed: Exposed | None = None,
    ) -> Result:
        """A host's call, made in a task of its own that the host's cancellation (or its going
        away) does not interrupt: an upstream call in flight is cancelled at the server and its
        outcome recorded (rule 3); a hold ends at once. ``cancelled``: set by the host's
        cancellation and when this task is cancelled (an event of its own when not given);
        ``progress``: the host's progress token."""
        event = cancelled or asyncio.Event()
        task = asyncio.ensure_future(
            self.call(name, arguments, event, host=host, progress=progress, exposed=exposed)
        )
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            event.set()
            raise

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        cancelled: Cancelled | None = None,
        *,
        host: host_identity.Host | None = None,
        progress: str | int | None = None,
        exposed: Exposed | None = None,
    ) -> Result:
        """The ``result`` the host receives for its call. ``cancelled``: set when the host gave
        up on this call (rule 3); ``host``: who made it (rule 4), this proxy's ``host`` when not
        given; ``progress``: the host's progress token; ``exposed``: the gate's tool for a
        prompt's get or a resource's read (core/proxy/resources.py). A server's JSON-RPC error
        to the call is raised (``UpstreamRefused``), to reach the host as that error."""
        HOST_CALL.set(HostCall(cancelled, progress))  # this call's task's own context
        self.reload_rules()
        host = host or self.host
        if name == STATUS_TOOL:
            return answers.text(self.status(host))
        if self.rules_problem:
            return answers.text(
                f"Signoff: this call did not run: the operator's rules cannot be established:"
                f" {self.rules_problem}. Once that is put right, the host must start Signoff"
                " again.",
                error=True,
            )
        exposed = exposed or self.exposed.get(name)
        if exposed is None:
            why = self.offered.why_not(name, self.servers.problems)
            return answers.text(f"Signoff: {name} is not available: {why}", error=True)
        args = arguments or {}
        arguments_text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        parsed: canonical.Canonical | None = None
        try:
            # Parsed once: the call key, the gate's checks and the record use this value.
            parsed = canonical.Canonical.parse(arguments_text)
            key = _call_key(exposed, self._spec_hash(exposed), parsed.value)
        except SignoffError as e:
            key = canonical.sha256_hex({"unreadable": arguments_text, "tool": exposed.gate_name})
            log.warning("arguments not exact JSON: %s", e)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._lock_users[key] += 1
        try:
            async with lock:
                return await self._call(exposed, (arguments_text, parsed), key, host)
        finally:
            # A lock per call key ever made would grow without end in a proxy kept open for
            # days: forget it when no other call with this key holds or awaits it.
            self._lock_users[key] -= 1
            if not self._lock_users[key]:
                del self._lock_users[key], self._locks[key]

    async def _call(
        self,
        exposed: Exposed,
        arguments: tuple[str, canonical.Canonical | None],
        key: str,
        host: host_identity.Host,
    ) -> Result:
        """``arguments``: the host's, as text, and parsed (None: they are not exact JSON, and
        the gate says why)."""
        gate = self._require_gate()
        # Taken first: a run of this call begun by anyone after this is seen at the begin.
        latest = self.recall.latest_of_any_host(key)
        previous = self.recall.latest_run(key, host.id)  # this host's own (rule 4)
        duplicate_of = None
        if previous is not None:
            run_id, status, _, collected, _ = previous
            if status == "WAITING_FOR_APPROVAL":
                return await self.recall.resume_waiting(exposed, run_id)
            if status == "RUNNING" and exposed.state.side_effect in MUTATING:
                if self.recall.made_elsewhere(run_id):  # another proxy is making this call
                    deadline = time.monotonic() + self.hold
                    return await self.recall.await_outcome(exposed, run_id, deadline)
                unfinished = await self.recall.unfinished(exposed, run_id)
                if unfinished is not None:
                    return unfinished
            if not collected and status in ("CANCELLED", "COMPLETED", "FAILED"):
                return self.recall.collect_answer(exposed, run_id)
        # The last run of this call that may have taken effect, not the last run: a rejected
        # duplicate in between must not let the next identical call through on policy alone.
        # Any host's (rule 4): the effect is the same whoever asked. Another host's run in
        # flight is looked for first: one that ends between the two reads is then seen ended
        # (a run only ever moves from in flight to ended), never missed by both.
        mutating = exposed.state.side_effect in MUTATING
        since = self.recall.in_flight(key, host.id) if mutating else None
        completed = self.recall.last_effect(key) if mutating else None
        may_have_run = False
        if completed is not None and self._within_window(completed[0]):
            duplicate_of, may_have_run = completed
        elif since is not None:
            duplicate_of = f"{since} (another host's identical call, not ended yet)"
            may_have_run = True
        run_id = f"call-{secrets.token_hex(8)}"
        text, parsed = arguments
        grant = None if parsed is None else await self._grant(exposed, parsed.value, host)
        if grant is not None and completed is not None and completed[1] and not may_have_run:
            # A grant never covers a call whose identical predecessor's outcome is unknown, at
            # any age (core/grants.py rule 7): past the window too, it waits as a duplicate.
            duplicate_of, may_have_run = completed
        decision = Decision(
            kind="tool_call", tool=exposed.gate_name, arguments=text, origin="model", parsed=parsed
        )
        # The run, its step, the decision and its verdict and, when allowed, the tool's start:
        # one synced commit; the outcome is the second (core/first_step.py).
        self.policy.duplicate_of = duplicate_of
        self.policy.grant, self.policy.may_have_run = grant, may_have_run
        try:
            session, verdict = gate.begin_with(
                run_id,
                f"{exposed.gate_name} for the host",
                # The call (a terminal tool), then, if it failed, the proxy's closing decision.
                Limits(
                    max_steps=2,
                    loop_repeats=None,
                    max_consecutive_failures=None,
                    grant_ttl_seconds=self.config.grant_ttl_seconds or None,
                ),
                decision,
                call=CallLabel(
                    exposed.server,
                    exposed.state.tool.name,
                    key,
                    host.id,
                    host.label,
                    self.roots.get(exposed.server),
                ),
                check=still_latest(key, latest),
            )
        except Raced:  # another proxy began a run for this call since: look again
            raced = True
        else:
            raced = False
        finally:
            # Before anything awaits: no other call's proposal may see this call's flag.
            self.policy.duplicate_of, self.policy.grant = None, None
        if raced:
            return await self._call(exposed, arguments, key, host)
        return await self._after_verdict(exposed, session, verdict)

    async def _after_verdict(self, exposed: Exposed, session: Any, verdict: Verdict) -> Result:
        run_id = session.run_id
        if verdict.outcome == VerdictOutcome.ALLOWED:
            return await self._execute(exposed, session)
        if verdict.outcome == VerdictOutcome.DENIED:
            close_run(session, Decision.fail(f"denied: {verdict.reason}", origin="operator"))
            self.recall.mark_collected(run_id)
            wake.wake("ended")  # a proxy awaiting this run's outcome reads it now
            return answers.text(f"Signoff refused this call: {verdict.reason}", error=True)
        session.close()
        if verdict.outcome == VerdictOutcome.PENDING:
            wake.wake("approval")
            return await self.recall.hold(exposed, run_id)
        self.recall.mark_collected(run_id)
        wake.wake("ended")
        return answers.text(f"Signoff ended this call: {verdict.reason}", error=True)

    async def _execute(self, exposed: Exposed, session: Any) -> Result:
        step = session.current()
        run_id = session.run_id
        call = current()

        def handed_back(tx: Any, _: Any) -> None:
            # The tool is terminal: a result ends the run, and is marked handed back, in the
            # transaction of its outcome (one commit instead of three); not when the host
            # gave up on the call, whose re-call collects it, from the whole of a large result
            # kept for it meanwhile (core/kept_results.py).
            at = format_time_now()
            if not host_gave_up():
                collect(tx, run_id, at=at)
            elif call.whole is not None and call.answer is not None:
                digest = hashlib.sha256(call.whole).hexdigest()
                kept_results.keep(tx, run_id, digest, call.whole, at)

        try:
            observation = await step.execute(also=handed_back)
        except SignoffError as e:
            if not self.recall.started(run_id):
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
            close_run(session, Decision.fail(observation.error or "", origin="operator"))
        session.close()
        if observation.approval is not None:
            wake.wake("approval")
            approval = observation.approval
            return answers.pending(exposed.name, approval.id, approval.request_hash,
                                   kind=approval.kind,
                                   error=exposed.declares_output_schema)  # fmt: skip
        wake.wake("ended")
        if call.error is not None:
            raise UpstreamRefused(observation.error or "", call.error)
        if not observation.ok or call.answer is None:
            return answers.text(f"The tool failed: {observation.error}", error=True)
        return call.answer

    def status(self, host: host_identity.Host | None = None) -> str:
        """What waits for the operator among the calls this host made (rule 4), never another
        host's."""
        host = host or self.host
        with self.store.snapshot() as conn:
            mine = {r for (r,) in conn.execute(
                "SELECT id FROM runs WHERE host = ? AND status = 'WAITING_FOR_APPROVAL'",
                (host.id,),
            )}  # fmt: skip
            waiting = [p for p in pending_requests(conn) if p.run_id in mine
                       and p.server in self.names]  # fmt: skip
        if not waiting:
            return "Nothing this host asked for waits for the operator."
        lines = [f"{len(waiting)} request(s) this host made wait for the operator's decision:"]
        for p in waiting:
            lines.append(
                f"- {p.id}: {p.server}/{p.tool} {p.arguments} ({p.kind}), request fingerprint"
                f" {present.fingerprint(p.request_hash)}, since {p.created_at}"
            )
        lines.append("When one is approved, call the tool again with the same arguments.")
        return "\n".join(lines)

    async def close(self) -> None:
        # Calls still in flight when the host went away record their outcome first.
        if self._calls:
            await asyncio.wait(set(self._calls), timeout=self.config.cancel_grace_seconds + 1)
        await self.live.close()
        await self.servers.close()

    def instructions(self) -> str | None:
        """What the host is told of the servers in ``initialize`` (core/proxy/instructions.py),
        once started: their pinned instructions."""
        handshakes = {name: u.initialize_result for name, u in self.upstreams.items()}
        return instructions.for_host(self.names, handshakes, self.config.servers)

    async def _from_server(self, upstream: Upstream, message: dict[str, Any]) -> Any:
        """A server's own request or notification: the host session's to answer or pass on
        (core/proxy/hostsession.py rule 5), or, with no host, logged; tools/list_changed: rule 5."""
        if message.get("method") == "notifications/tools/list_changed" and "id" not in message:
            self.live.listed_changed(upstream.server.name)
            return None
        if self.on_server_message is not None:
            return await self.on_server_message(upstream, message)
        if "id" not in message:
            upstream.note(f"{message.get('method')} not passed on: no host".encode()[:300])
        return None

    # --- internals ----------------------------------------------------------------------

    def _require_gate(self) -> Gate:
        if self.gate is None:
            raise RuntimeError("the proxy was not started")
        return self.gate

    def _spec_hash(self, exposed: Exposed) -> str:
        tool = self._require_gate().tools.get(exposed.gate_name)  # None: withdrawn meanwhile
        return "" if tool is None else tool.spec_hash

    async def _grant(
        self, exposed: Exposed, arguments: Any, host: host_identity.Host
    ) -> Grant | None:
        """The operator's standing grant for exactly this call of this host, checked in the
        chain (core/grants.py rule 8)."""
        call = call_hash(spec_hash=self._spec_hash(exposed), tool=exposed.gate_name,
                         arguments=arguments)  # fmt: skip
        config = self._require_gate().config
        grant, refused = await live(
            self.store, config.operator, call, host=host.id, anchor=config.anchor
        )
        for why in refused:
            log.error("a grant claimed for this call is not honoured: %s", why)
        return grant

    def _within_window(self, updated: str) -> bool:
        age = datetime.now(UTC) - datetime.fromisoformat(updated)
        return age.total_seconds() < self.config.duplicate_window_seconds


def _call_key(exposed: Exposed, spec_hash: str, arguments: Any) -> str:
    return canonical.sha256_hex(
        {
            "server": exposed.server,
            "tool_spec": spec_hash,
            "tool": exposed.state.tool.name,
            "arguments": arguments,
        }
    )
