"""Benchmark: what `signoff proxy` adds to a call, against the same server called directly.

One run, one upstream server, the mcp SDK client on both sides:

- direct: the SDK client spawns the upstream server itself;
- proxied: the SDK client spawns ``signoff proxy bench``, which spawns the same server, pinned,
  with the tool classified ``read_only`` (allowed by the default policy). Every proxied call is
  a gated run recorded in SQLite with synced commits (the database is under the home
  directory, not /tmp, so that a commit's fsync is real).

First each side is spawned a few times from nothing to its first ``tools/list`` answer (spawn,
initialize, list; median). Then both sessions are open at once and the N calls alternate
(direct, proxied, direct, ...) so that a noisy machine slows both alike; a few warm-up calls
each are not counted.

The upstream is tests/proxy/fake_server.py by default (read_note, answered at once, so what
shows is the proxy's own cost), or mcp-server-time with ``--server time`` (get_current_time;
install it with ``bash scripts/mcp-servers.sh``).

Prints p50 and p95 per call and the spawn-to-first-listing times for both, then the added
milliseconds and the ratio. With the fake server, the same for a result of a 1 MiB image (the
proxy parses it exactly, hashes its canonical form and passes it on whole: decision 0029), N/10
calls each way, the server's result limit set to 4 MiB so that it passes whole.
Goals (issue "Speed"): at most 1.0 ms added at p50 and 2.0 ms at p95 per call, with the
durable record; the first listing at most 0.25 s later than direct (the first wave's were
1.5 ms and 0.6 s).

Then an approved write, from the operator's approve to the tool's result, through the
library gate, N/10 times each way: decisions unsigned and unanchored (as before decisions 0022
and 0023) against signed with the OS keyring's operator key and anchored there before the
effect (needs a keyring: run it under ``make bench``'s Secret Service, or a desktop's).

    python bench/proxy.py [--calls N] [--server fake|time] [--spawns K]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from core.store import Store

ROOT = Path(__file__).resolve().parent.parent
SIGNOFF = Path(sys.executable).with_name("signoff")
FAKE_SERVER = ROOT / "tests" / "proxy" / "fake_server.py"
TIME_SERVER = ROOT / ".cache" / "mcp-servers" / "time" / "bin" / "mcp-server-time"
NAME = "bench"
WARMUP = 10
GOAL_ADDED_P50_MS = 1.0
GOAL_ADDED_P95_MS = 2.0
GOAL_LISTING_ADDED_S = 0.25

FAKE_LISTING = json.dumps(
    [
        {
            "name": "read_note",
            "description": "Read the notes",
            "inputSchema": {"type": "object", "properties": {}},
        },
        {
            "name": "image",
            "description": "A 1 MiB image",
            "inputSchema": {"type": "object", "properties": {}},
        },
    ]
)
IMAGE_BYTES = 1024 * 1024
IMAGE_LIMIT = 4 * 1024 * 1024  # the bench server's result limit: the image passes whole


class Upstream:
    """How to start the upstream server, and the one call to make."""

    def __init__(self, label: str, argv: list[str], tool: str, arguments: dict[str, Any]) -> None:
        self.label = label
        self.argv = argv
        self.tool = tool
        self.arguments = arguments


def upstream_for(server: str, home: Path) -> Upstream:
    if server == "time":
        if not TIME_SERVER.is_file():
            sys.exit(f"{TIME_SERVER} is missing: run bash scripts/mcp-servers.sh")
        return Upstream(
            "mcp-server-time",
            [str(TIME_SERVER), "--local-timezone", "UTC"],
            "get_current_time",
            {"timezone": "UTC"},
        )
    script = home / "fake.json"
    image = base64.b64encode(os.urandom(IMAGE_BYTES)).decode()
    result = {"content": [{"type": "image", "data": image, "mimeType": "image/png"}]}
    script.write_text(json.dumps({"listing": FAKE_LISTING, "notes": str(home / "notes.txt"),
                                  "on_call": {"image": "raw"},
                                  "results": {"image": json.dumps(result)}}))  # fmt: skip
    (home / "notes.txt").write_text("a note\n")
    return Upstream(
        "fake_server.py", [sys.executable, str(FAKE_SERVER), str(script)], "read_note", {}
    )


def signoff(home: Path, *args: str) -> None:
    done = subprocess.run(
        [str(SIGNOFF), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SIGNOFF_HOME": str(home)},
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"signoff {' '.join(args)} failed: {done.stderr.strip()}")


def configure(home: Path, upstream: Upstream) -> None:
    signoff(home, "servers", "add", NAME, "--", *upstream.argv)
    signoff(home, "pin", NAME, "--accept")
    signoff(home, "classify", NAME, upstream.tool, "read_only")
    if upstream.label == "fake_server.py":
        signoff(home, "classify", NAME, "image", "read_only")
        signoff(home, "settings", "result_limit_bytes", str(IMAGE_LIMIT), "--server", NAME)


def direct_params(upstream: Upstream) -> StdioServerParameters:
    return StdioServerParameters(command=upstream.argv[0], args=upstream.argv[1:])


# The session's keyring, as a desktop's proxies find it (at the session bus's standard place, which
# a private bus such as the tests' is not): the proxy checks the recorded configuration with it.
KEYRING_VARIABLES = ("DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND", "XDG_DATA_HOME")


def proxy_params(home: Path) -> StdioServerParameters:
    # PYTHONPATH: the tree being measured, when it is not the installed one.
    keyring = {k: os.environ[k] for k in (*KEYRING_VARIABLES, "PYTHONPATH") if k in os.environ}
    return StdioServerParameters(
        command=str(SIGNOFF), args=["proxy", NAME], env={"SIGNOFF_HOME": str(home), **keyring}
    )


async def first_listing(params: StdioServerParameters, tool: str, errlog: TextIO) -> float:
    """Seconds from spawning the server to the answer of its first tools/list."""
    t = time.perf_counter()
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listing = await session.list_tools()
        elapsed = time.perf_counter() - t
    assert tool in [x.name for x in listing.tools], f"{tool} is not offered"
    return elapsed


async def timed_calls(
    direct: StdioServerParameters,
    proxied: StdioServerParameters,
    upstream: Upstream,
    calls: int,
    errlog: TextIO,
    tool: str = "",
) -> tuple[list[float], list[float]]:
    """Seconds per call of ``tool`` (the upstream's own when not given), direct and proxied,
    the calls alternating between the two."""
    async with (
        stdio_client(direct, errlog=errlog) as (dread, dwrite),
        ClientSession(dread, dwrite) as dsession,
        stdio_client(proxied, errlog=errlog) as (pread, pwrite),
        ClientSession(pread, pwrite) as psession,
    ):
        for session in (dsession, psession):
            await session.initialize()
            await session.list_tools()  # as a host does; the SDK also caches output schemas

        async def call(session: ClientSession) -> float:
            t = time.perf_counter()
            result = await session.call_tool(tool or upstream.tool, upstream.arguments)
            elapsed = time.perf_counter() - t
            assert not getattr(result, "is_error", True), result
            return elapsed

        times: tuple[list[float], list[float]] = ([], [])
        for n in range(WARMUP + calls):
            for kept, session in zip(times, (dsession, psession), strict=True):
                elapsed = await call(session)
                if n >= WARMUP:
                    kept.append(elapsed)
        return times


def percentile(values: list[float], p: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def runs_completed(home: Path) -> int:
    with Store.open(home / "signoff.db") as store, store.snapshot() as conn:
        row = conn.execute("SELECT count(*) FROM runs WHERE status = 'COMPLETED'").fetchone()
    return int(row[0])


def approved_latencies(home: Path, calls: int) -> tuple[list[float], list[float]]:
    """Seconds from the operator's approve to the tool's result, alternating between a gate
    whose decisions are neither signed with the OS keyring nor anchored there (as before
    decision 0022 and 0023: a key in memory, no anchor) and one whose are (the OS keyring's
    key, read once and kept, and the head anchored before the effect), on one database."""
    from core.anchor import Anchor
    from core.approvals import approve
    from core.decisions import Decision
    from core.gate import Gate, GateConfig
    from core.heads import KeyringHeadStore
    from core.operator_key import KeyringKeyStore, MemoryKeyStore, OperatorKey
    from core.tools import SideEffect, Tool

    tool = Tool("write", "write a note", {"type": "object"}, SideEffect.LOCAL_MUTATION,
                lambda args: "written")  # fmt: skip
    times: tuple[list[float], list[float]] = ([], [])
    with Store.open(home / "approved.db") as store:
        before = Gate(GateConfig(store, [tool], operator=OperatorKey(MemoryKeyStore()),
                                 anchor=None))  # fmt: skip
        after_key = OperatorKey(KeyringKeyStore())
        after = Gate(GateConfig(store, [tool], operator=after_key,
                                anchor=Anchor(KeyringHeadStore())))  # fmt: skip
        for n in range(WARMUP + calls):
            for kept, gate in zip(times, (before, after), strict=True):
                run_id = f"{id(gate)}-{n}"
                session = gate.begin(run_id, "bench", None)
                verdict = session.step().propose(Decision.tool_call("write", {"n": n}))
                assert verdict.approval is not None, verdict
                t = time.perf_counter()
                approve(store, run_id, verdict.approval.id, "bench", operator=gate.config.operator)
                attached, _ = gate.attach(run_id)
                observation = anyio.run(attached.current().execute)
                elapsed = time.perf_counter() - t
                assert observation.ok, observation
                if n >= WARMUP:
                    kept.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--server", choices=("fake", "time"), default="fake")
    parser.add_argument(
        "--spawns", type=int, default=5, help="spawn-to-first-listing: median of this many"
    )
    args = parser.parse_args()
    if args.calls < 1 or args.spawns < 1:
        parser.error("--calls and --spawns are at least 1")

    with (
        tempfile.TemporaryDirectory(dir=Path.home()) as tmp,
        open(os.devnull, "w") as errlog,
    ):
        home = Path(tmp)
        upstream = upstream_for(args.server, home)
        configure(home, upstream)
        direct, proxied = direct_params(upstream), proxy_params(home)

        spawn_direct: list[float] = []
        spawn_proxy: list[float] = []
        for _ in range(args.spawns):
            spawn_direct.append(anyio.run(first_listing, direct, upstream.tool, errlog))
            spawn_proxy.append(anyio.run(first_listing, proxied, upstream.tool, errlog))

        direct_times, proxy_times = anyio.run(
            timed_calls, direct, proxied, upstream, args.calls, errlog
        )
        recorded = runs_completed(home)
        images: tuple[list[float], list[float]] | None = None
        if args.server == "fake":
            images = anyio.run(
                timed_calls, direct, proxied, upstream, max(1, args.calls // 10), errlog, "image"
            )
        unsigned, signed = approved_latencies(home, max(1, args.calls // 10))

    assert recorded == WARMUP + args.calls, f"{recorded} runs recorded"
    ms = 1000.0
    d50, d95 = percentile(direct_times, 50) * ms, percentile(direct_times, 95) * ms
    p50, p95 = percentile(proxy_times, 50) * ms, percentile(proxy_times, 95) * ms
    list_direct, list_proxy = statistics.median(spawn_direct), statistics.median(spawn_proxy)
    added50, added95, list_added = p50 - d50, p95 - d95, list_proxy - list_direct

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    n = args.calls
    print(
        f"upstream:              {upstream.label}, {upstream.tool}, {n:,} calls each way"
        f" (alternating, after {WARMUP} warm-up calls each)"
    )
    print(f"direct call:           p50 {d50:.2f} ms, p95 {d95:.2f} ms")
    print(f"through the proxy:     p50 {p50:.2f} ms, p95 {p95:.2f} ms")
    print(f"runs recorded:         {recorded:,} completed gated runs in the proxy's database")
    print(f"first listing direct:  {list_direct:.3f} s (spawn to tools/list, median of"
          f" {args.spawns})")  # fmt: skip
    print(f"first listing proxied: {list_proxy:.3f} s")
    print(
        f"listing added:         {list_added:+.3f} s;"
        f" goal <= {GOAL_LISTING_ADDED_S} s: {met(list_added <= GOAL_LISTING_ADDED_S)}"
    )
    print(
        f"added per call:        p50 {added50:+.2f} ms, p95 {added95:+.2f} ms;"
        f" goal p50 <= {GOAL_ADDED_P50_MS} ms, p95 <= {GOAL_ADDED_P95_MS} ms:"
        f" {met(added50 <= GOAL_ADDED_P50_MS and added95 <= GOAL_ADDED_P95_MS)}"
    )
    print(f"ratio proxied/direct:  p50 {p50 / d50:.2f}x, p95 {p95 / d95:.2f}x")
    if images is not None:
        i50, j50 = percentile(images[0], 50) * ms, percentile(images[1], 50) * ms
        print(
            f"1 MiB image result:    {len(images[0]):,} calls each way; direct p50 {i50:.2f} ms,"
            f" through the proxy p50 {j50:.2f} ms; added {j50 - i50:+.2f} ms, ratio"
            f" {j50 / i50:.2f}x"
        )
    u50, s50 = percentile(unsigned, 50) * ms, percentile(signed, 50) * ms
    print(
        f"approve -> result:     {len(signed):,} approved writes each way (alternating);"
        f" unsigned, unanchored p50 {u50:.2f} ms; signed with the keyring's operator key and"
        f" anchored before the effect p50 {s50:.2f} ms"
    )
    print(f"approved call added:   p50 {s50 - u50:+.2f} ms; ratio p50 {s50 / u50:.2f}x"
          " (the read-only calls above make no keyring call)")  # fmt: skip


if __name__ == "__main__":
    main()
