"""What the load and soak suites share: hosts that start real `signoff proxy` processes with the
mcp SDK's client, a plan of calls with the answers each must get, a concurrent operator, and
the record's checks afterwards (one run per call, each approval executed at most once, the
events of each run as core/transitions.py says, the chain intact).

The upstream is tests/proxy/fake_server.py: ``lookup`` (read_only) echoes its arguments,
``write_note`` (local_mutation) appends its text to a notes file, the side effect seen from
outside.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession

from core import canonical
from core.approvals import approve, reject
from core.errors import SignoffError
from core.records import pending_requests
from core.store import Store
from core.verify import verify
from tests.core.gatekit import check_consistency
from tests.host import proxy_session, text
from tests.proxy.rig import Rig

SERVER = "notes"
TOOLS = [
    {"name": "lookup", "description": "Look a word up",
     "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}},
                     "required": ["q"]}},
    {"name": "write_note", "description": "Append a line to the notes",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
]  # fmt: skip
PENDING = "This call needs the operator's approval and has not run."
DUPLICATE = "An identical call may already have taken effect; this one waits for the operator"
UNDER_WAY = "Signoff: an identical call (run"  # another proxy is making the same call
REJECTED = "The operator rejected this call"
CALL_DEADLINE = 60.0  # seconds for one call and its re-calls; only a hang comes near it
# What no host may ever read, in any answer (a pending, rejected or denied answer is fine).
INTERNAL = ("database is locked", "StoreBusy", "StoreError", "Traceback", "LeaseLost",
            "RunLeased", "RunStateError", "unexpected state", "could not start",
            "Internal")  # fmt: skip

# The events of one proxy run, by how it ended (core/transitions.py; the proxy's paths in
# core/proxy/server.py and recall.py). Every sequence starts as Gate.begin, Session.step and
# OpenStep.propose write it; an allowed call then runs; one needing approval pauses.
_PROPOSED = ("run.started", "step.started", "step.decided", "step.policy")
_EXECUTED = ("step.tool_started", "step.observed", "run.ended", "run.collected")
EXPECTED_EVENTS = {
    # allowed: executed at once; the outcome and its collection in one transaction
    "read": (*_PROPOSED, *_EXECUTED),
    # approved (within the hold or later): the grant decided, the policy asked again at
    # attach (one more step.policy), then executed once, consuming the approval
    "approved": (*_PROPOSED, "approval.requested", "approval.decided", "step.policy",
                 *_EXECUTED),
    # rejected: the decision ends the step and the run in its transaction; the re-call
    # collects the operator's answer
    "rejected": (*_PROPOSED, "approval.requested", "approval.decided", "step.observed",
                 "run.ended", "run.collected"),
}  # fmt: skip


# --- the proxy process ----------------------------------------------------------------------


def setup_home(home: Path) -> Path:
    """A SIGNOFF_HOME with the fake notes server pinned and classified; returns the notes file."""
    rig = Rig(home)
    notes = home / "notes.txt"
    rig.add_fake(SERVER, TOOLS, notes=str(notes))
    rig.pin(SERVER)
    rig.classify(SERVER, lookup="read_only", write_note="local_mutation")
    return notes


def find_child(marker: str) -> int:
    """The pid of this process's child started with ``SIGNOFF_TEST_HOST=marker`` (read from
    /proc: the SDK's stdio_client does not say which process it started)."""
    me = str(os.getpid())
    wanted = f"SIGNOFF_TEST_HOST={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = stat[stat.rindex(")") + 2 :].split()[1]
            if ppid == me and wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    if len(found) != 1:
        raise AssertionError(f"expected one proxy marked {marker}, found {found}")
    return found[0]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


def open_fds(pid: int) -> Counter[str]:
    """What each open descriptor of ``pid`` points at, counted (pipes and sockets by kind)."""
    kinds: Counter[str] = Counter()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed while listing
        kinds[target.split(":", 1)[0] + ":" if ":[" in target else target] += 1
    return kinds


@dataclass
class Host:
    """One MCP host's connection: the SDK client session and the proxy process it started."""

    name: str
    session: ClientSession
    pid: int


@asynccontextmanager
async def host(home: Path, name: str, *, hold: float) -> AsyncIterator[Host]:
    """Start `signoff proxy notes` as a host does (the SDK's stdio_client) and initialize. Each
    host sends its own clientInfo: to Signoff they are different hosts (decision 0027)."""
    async with proxy_session(home, SERVER, hold=hold, env={"SIGNOFF_TEST_HOST": name},
                             errlog=home / f"host-{name}-stderr.log",
                             client=(f"load-{name}", "1.0")) as session:  # fmt: skip
        listed = {t.name for t in (await session.list_tools()).tools}
        assert {"lookup", "write_note"} <= listed, listed
        yield Host(name, session, find_child(name))


# --- the plan of calls ----------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One call a host makes (with its re-calls until it has its outcome), and that outcome."""

    tool: str
    arguments: dict[str, Any]
    outcome: str  # "read", "approved", "rejected", or "shared": approved or rejected
    kind: str = ""  # the approval's kind: "approval" or "duplicate"; "" for a read


def write_text(host_name: str, index: int, first: str, duplicate: str) -> str:
    """A write's text says how the operator decides it: ``first`` for its own approval,
    ``duplicate`` for an identical call's (``none`` when there is none)."""
    return f"{host_name}-w{index:03d}-{first}-{duplicate}"


def plan_host(host_name: str, *, reads: int, rejected: int, approved: int, duplicated: int,
              redone: int, shared: int, shared_reads: int = 10) -> list[list[Call]]:  # fmt: skip
    """Chains of calls for one host; each chain is made in order, the chains concurrently.

    Reads use a few arguments every host shares (identical reads from several hosts).
    Each duplicated write is followed, once it completed, by the identical call (the
    duplicate rule asks the operator): half approved, half rejected. A redone write is
    made three times: approved, then rejected twice as a duplicate (the third must still be
    a duplicate). Shared writes are the same on every host, at the same places in each plan,
    so that hosts make them at about the same time: the operator approves the first run and
    rejects every duplicate, so each is written once whoever asks.
    """
    chains: list[list[Call]] = []
    for i in range(shared):
        chains.append([Call("write_note", {"text": write_text("shared", i, "ok", "no")},
                            "shared")])  # fmt: skip
    for i in range(reads):
        chains.append([Call("lookup", {"q": f"r{i % shared_reads}"}, "read")])
    n = 0
    for _ in range(rejected):
        chains.append([Call("write_note", {"text": write_text(host_name, n, "no", "none")},
                            "rejected", "approval")])  # fmt: skip
        n += 1
    for _ in range(approved):
        chains.append([Call("write_note", {"text": write_text(host_name, n, "ok", "none")},
                            "approved", "approval")])  # fmt: skip
        n += 1
    for d in range(duplicated):
        second = "ok" if d % 2 == 0 else "no"
        args = {"text": write_text(host_name, n, "ok", second)}
        chains.append([Call("write_note", args, "approved", "approval"),
                       Call("write_note", args, "approved" if second == "ok" else "rejected",
                            "duplicate")])  # fmt: skip
        n += 1
    for _ in range(redone):
        args = {"text": write_text(host_name, n, "ok", "no")}
        chains.append([Call("write_note", args, "approved", "approval"),
                       Call("write_note", args, "rejected", "duplicate"),
                       Call("write_note", args, "rejected", "duplicate")])  # fmt: skip
        n += 1
    # Interleave the kinds so that every stretch of the run mixes reads and writes.
    return [chains[i] for i in sorted(range(len(chains)), key=lambda i: (i * 7919) % len(chains))]


def calls_of(plan: Iterable[list[Call]]) -> list[Call]:
    return [call for chain in plan for call in chain]


# --- driving the hosts ----------------------------------------------------------------------


@dataclass
class Tally:
    """What the hosts saw: answers by their meaning, and every answer that was not expected."""

    requests: int = 0  # tools/call requests sent, re-calls included
    pendings: int = 0  # answers saying to call again: pending, or under way elsewhere
    outcomes: Counter[str] = field(default_factory=Counter)
    # shared write -> [answered rejected, answered written]
    shared: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    bad: list[str] = field(default_factory=list)


def _internal(answer: str) -> str | None:
    return next((word for word in INTERNAL if word in answer), None)


async def make_call(session: ClientSession, call: Call, tally: Tally, who: str) -> None:
    """One call, re-called while it is pending, checked against the answer it must get."""
    with anyio.fail_after(CALL_DEADLINE):
        while True:
            tally.requests += 1
            try:
                result = await session.call_tool(call.tool, call.arguments)
            except Exception as e:  # an error response of the protocol: never expected
                tally.bad.append(f"{who} {call}: raised {type(e).__name__}: {e}")
                return
            answer = text(result)
            word = _internal(answer)
            if word is not None:
                tally.bad.append(f"{who} {call}: {word!r} in {answer!r}")
                return
            waits = answer.startswith((PENDING, DUPLICATE)) or (
                answer.startswith(UNDER_WAY) and call.outcome == "shared"
            )
            if not result.is_error and waits and call.outcome != "read":
                tally.pendings += 1
                continue  # call again with the same arguments, as the answer says
            break
    wrote = (False, f"wrote {call.arguments.get('text')!r}")
    expected = {
        "read": [(False, json.dumps(call.arguments))],
        "approved": [wrote],
        "rejected": [(True, REJECTED)],
        "shared": [wrote, (True, REJECTED)],
    }[call.outcome]
    got = (bool(result.is_error), answer)
    match = [e for e in expected if got[0] == e[0] and answer.startswith(e[1])]
    if not match:
        tally.bad.append(f"{who} {call}: answered {got}, expected one of {expected}")
        return
    tally.outcomes["rejected" if match[0][0] else "approved" if match[0] == wrote
                   else call.outcome] += 1  # fmt: skip
    if call.outcome == "shared":
        tally.shared[str(call.arguments["text"])][match[0] == wrote] += 1


async def drive(host: Host, plan: list[list[Call]], tally: Tally, workers: int) -> None:
    """Make the plan's chains over one host session, ``workers`` calls in flight at a time."""
    queue = list(reversed(plan))

    async def worker() -> None:
        while queue:
            for call in queue.pop():
                await make_call(host.session, call, tally, host.name)

    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)


class Operator(threading.Thread):
    """The operator at a terminal: decides each pending approval as ``signoff approve/reject
    --hash`` does (core.approvals with the hash it was shown), by what the write's text says.
    Its own store connection, concurrent with the proxies."""

    def __init__(self, database: Path) -> None:
        super().__init__(name="operator", daemon=True)
        self.database = database
        self.stop = threading.Event()
        self.decided: Counter[str] = Counter()
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            with Store.open(self.database) as store:
                while not self.stop.is_set():
                    with store.snapshot() as conn:
                        waiting = pending_requests(conn)
                    for p in waiting:
                        self._decide(store, p)
                    if not waiting:
                        self.stop.wait(0.01)
        except Exception as e:  # recorded for the test to report, never lost in a thread
            self.errors.append(f"operator stopped: {type(e).__name__}: {e}")

    def _decide(self, store: Store, p: Any) -> None:
        arguments = canonical.loads(p.arguments)
        assert isinstance(arguments, dict)
        _, _, first, duplicate = str(arguments["text"]).split("-")
        verdict = duplicate if p.kind == "duplicate" else first
        act = approve if verdict == "ok" else reject
        try:
            act(store, p.run_id, p.id, "operator:load", verdict, expected_hash=p.request_hash)
        except SignoffError as e:
            self.errors.append(f"{p.id}: {type(e).__name__}: {e}")
            return
        self.decided[f"{p.kind}:{verdict}"] += 1


# --- the record afterwards ------------------------------------------------------------------


@dataclass
class Record:
    runs: int
    events: int
    chain_head: int


def check_record(
    home: Path, calls: list[Call], notes: Path, tally: Tally, *, hosts_apart: bool
) -> Record:
    """Everything the hosts' calls must have left in the database and the notes file.
    ``hosts_apart``: each plan's calls went through a host of their own (else one host made
    them all, and its identical calls could join each other's run)."""
    with Store.open(home / "signoff.db") as store:
        head = verify(store).head  # raises ChainBroken naming the first bad event
        check_consistency(store)  # the tables say what the events say
        conn = store._conn
        runs = conn.execute(
            "SELECT r.id, r.status, r.end_reason, r.collected_at IS NOT NULL, s.arguments,"
            " s.tool_name, (SELECT a.kind FROM approvals a WHERE a.run_id = r.id)"
            " FROM runs r JOIN steps s ON s.run_id = r.id AND s.idx = 0"
        ).fetchall()
        events: dict[str, list[str]] = {}
        for run_id, kind in conn.execute(
            "SELECT run_id, kind FROM events WHERE run_id IS NOT NULL ORDER BY seq"
        ):
            events.setdefault(run_id, []).append(kind)
        approvals = conn.execute("SELECT id, kind, status FROM approvals").fetchall()
        started = Counter(
            canonical.loads(payload)["approval"]  # type: ignore[index]
            for (payload,) in conn.execute(
                "SELECT payload FROM events WHERE kind = 'step.tool_started'"
            )
        )
        total_runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]

    problems = []
    # Each run ended as a host was answered, handed back, with the events of its outcome.
    seen: Counter[tuple[str, str, str, str]] = Counter()
    for run_id, status, reason, collected, arguments, tool, kind in runs:
        outcome = {("COMPLETED", "completed"): "approved" if kind else "read",
                   ("CANCELLED", "rejected"): "rejected"}.get((status, reason))  # fmt: skip
        if outcome is None or not collected:
            problems.append(f"run {run_id} ended {status}/{reason}, collected={collected}")
            continue
        if tuple(events.get(run_id, ())) != EXPECTED_EVENTS[outcome]:
            problems.append(f"run {run_id} ({outcome}) has events {events.get(run_id)}")
        kind = "" if kind is None else "duplicate" if kind == "duplicate" else "approval"
        seen[(tool, arguments, outcome, kind)] += 1

    # One run per call: as many runs of each request as calls made with it, ended as told.
    own = [c for c in calls if c.outcome != "shared"]
    expected = Counter((f"{SERVER}/{c.tool}", canonical.dumps_text(c.arguments), c.outcome,
                        c.kind) for c in own)  # fmt: skip
    # A shared write: one approved run, whoever asked first. Hosts apart: every other host made
    # its own call of it, which waited as a duplicate (of a run that had, or might yet have,
    # taken effect) and was rejected; another host's run is never joined, nor its result handed
    # over. One host: its identical calls may also join the run of one under way.
    shared = Counter(str(c.arguments["text"]) for c in calls if c.outcome == "shared")
    shared_runs = 0
    for text_, asked in shared.items():
        key = (f"{SERVER}/write_note", canonical.dumps_text({"text": text_}))
        duplicates = seen.pop((*key, "rejected", "duplicate"), 0)
        first = seen.pop((*key, "approved", "approval"), 0)
        rejected, written = tally.shared[text_]
        shared_runs += first + duplicates
        apart = duplicates != asked - 1 or (rejected, written) != (asked - 1, 1)
        if (first != 1 or duplicates >= asked or rejected + written != asked or not written
                or (hosts_apart and apart)):  # fmt: skip
            problems.append(f"shared {text_}: {first} approved and {duplicates} duplicate runs"
                            f" for {asked} calls, answered {written} written, {rejected}"
                            " rejected")  # fmt: skip
    if seen != expected:
        problems.append(f"runs by call differ: extra {seen - expected}, missing {expected - seen}")
    if total_runs != len(own) + shared_runs:
        problems.append(f"{total_runs} runs for {len(own)} calls and {shared_runs} shared runs")

    # Each approval executed at most once: approved ones exactly once, rejected ones never.
    for approval_id, kind, status in approvals:
        want = {"consumed": 1, "rejected": 0}.get(status)
        if want is None or started[approval_id] != want:
            problems.append(f"approval {approval_id} ({kind}) is {status}, started"
                            f" {started[approval_id]} times")  # fmt: skip
    written_lines = Counter(notes.read_text().splitlines()) if notes.exists() else Counter()
    wanted = Counter(str(c.arguments["text"]) for c in own if c.tool == "write_note"
                     and c.outcome == "approved") + Counter(set(shared))  # fmt: skip
    if written_lines != wanted:
        problems.append(f"notes differ: extra {written_lines - wanted},"
                        f" missing {wanted - written_lines}")  # fmt: skip
    assert not problems, "\n".join(problems[:20])
    return Record(total_runs, sum(len(e) for e in events.values()), head.seq)


def log_errors(home: Path) -> list[str]:
    """ERROR lines and tracebacks the proxies wrote (their log and their stderr)."""
    found = []
    for path in [home / "logs" / "proxy.log", *home.glob("host-*-stderr.log")]:
        if path.exists():
            found += [f"{path.name}: {line}" for line in path.read_text().splitlines()
                      if " ERROR " in line or "Traceback" in line or "locked" in line]  # fmt: skip
    return found


def elapsed_since(start: float) -> float:
    return time.perf_counter() - start
