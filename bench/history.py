"""Benchmark: the history window on a large record, against an empty one in the same run.

Builds a database of 100,000 runs (one tool call each, ten events a run: 1,000,000 events) and
an empty one, then, for each in a fresh process, opens the history window offscreen and
measures the time from creating it to its first paint with rows, and the peak memory (RSS) of
the process. Prints both and the extra for the large record.
Goals (issue 7): under 1 s to first paint, under 150 MB RSS extra at 100,000 runs.

    python bench/history.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core import canonical
from core.store import Store, utc_now

EVENTS_PER_RUN = 10
SPEC = {"name": "srv/read", "description": "read", "input_schema": {"type": "object"},
        "side_effect": "read_only", "idempotent": False, "terminal": True}  # fmt: skip


def build(path: Path, runs: int) -> None:
    store = Store.open(path)
    at = utc_now()
    spec_text = canonical.dumps_text(SPEC)
    spec_hash = canonical.sha256_hex(SPEC)
    with store.transaction() as tx:
        tx.execute("INSERT INTO tool_specs (hash, name, spec, created_at) VALUES (?, ?, ?, ?)",
                   (spec_hash, "srv/read", spec_text, at))  # fmt: skip
    batch = 5_000
    for start in range(0, runs, batch):
        ids = [f"call-{n:08d}" for n in range(start, min(runs, start + batch))]
        with store.transaction() as tx:
            tx.conn.executemany(
                "INSERT INTO runs (id, goal, status, end_reason, limits, step_count,"
                " created_at, updated_at, server, tool, call_key, collected_at)"
                " VALUES (?, 'bench', 'COMPLETED', 'completed', '{}', 1, ?, ?, 'srv', 'read',"
                " ?, ?)",
                [(i, at, at, i, at) for i in ids],
            )
            tx.conn.executemany(
                "INSERT INTO steps (run_id, idx, status, decision, tool_name, tool_spec_hash,"
                " arguments, request_hash, observation, started_at, ended_at)"
                " VALUES (?, 0, 'done', '{}', 'srv/read', ?, ?, ?, '{\"ok\":true}', ?, ?)",
                [(i, spec_hash, json.dumps({"n": n}), "h" * 64, at, at) for n, i in enumerate(ids)],
            )
            tx.append_events([
                (i, 0 if k else None, "step.observed" if k else "run.started", {"k": k}, at)
                for i in ids for k in range(EVENTS_PER_RUN)
            ])  # fmt: skip
    store.close()


PROBE = r"""
import os, resource, sys, time
from pathlib import Path
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from PySide6.QtWidgets import QApplication
app = QApplication([])
from core.heads import MemoryHeadStore
from core.store import Store
from app.history import HistoryWindow
store = Store.open(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
window = HistoryWindow(store, MemoryHeadStore(), Path(sys.argv[2]))
window.show()
app.processEvents()
window.repaint()
app.processEvents()
elapsed = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(elapsed, after * 1024, (after - before) * 1024)
"""


def probe(db: Path, home: Path) -> tuple[float, int, int]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(db), str(home / "config.toml")],
                          capture_output=True, text=True, timeout=600, check=True,
                          env={**os.environ, "SIGNOFF_HOME": str(home)})  # fmt: skip
    seconds, peak, grown = done.stdout.split()
    return float(seconds), int(peak), int(grown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        large, empty = Path(tmp) / "large", Path(tmp) / "empty"
        large.mkdir(mode=0o700)
        empty.mkdir(mode=0o700)
        t = time.perf_counter()
        build(large / "signoff.db", args.runs)
        built = time.perf_counter() - t
        Store.open(empty / "signoff.db").close()
        e_time, e_peak, _ = probe(empty / "signoff.db", empty)
        l_time, l_peak, _ = probe(large / "signoff.db", large)
    mib = 1024 * 1024
    print(f"runs:                {args.runs:,} ({args.runs * EVENTS_PER_RUN:,} events, built in"
          f" {built:.1f} s)")  # fmt: skip
    print(f"first paint, empty:  {e_time * 1000:.0f} ms, peak RSS {e_peak / mib:.0f} MiB")
    print(f"first paint, large:  {l_time * 1000:.0f} ms, peak RSS {l_peak / mib:.0f} MiB")
    extra = (l_peak - e_peak) / mib
    print(f"goal first paint < 1 s: {'met' if l_time < 1 else 'NOT met'}")
    print(f"goal extra RSS < 150 MiB: {'met' if extra < 150 else 'NOT met'}")
    print(f"extra for the large record: {extra:.0f} MiB, ratio paint large/empty:"
          f" {l_time / e_time:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
