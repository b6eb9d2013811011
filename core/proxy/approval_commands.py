"""The approval and run commands: ``signoff pending``, ``approve``, ``reject`` and ``runs``.

They read and decide what waits in the store, and load nothing of the proxy's (tests/
test_commands_load.py holds them to it).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from core import paths, present
from core.canonical import loads
from core.errors import SignoffError, UnknownApproval
from core.records import decided_by_rule, pending_requests, read_approval
from core.store import Store

EXIT_OK, EXIT_ERROR = 0, 2  # as core/cli.py's


def pending(args: argparse.Namespace) -> int:
    with Store.open(paths.database_path()) as store, store.snapshot() as conn:
        waiting = pending_requests(conn)
    for p in waiting:
        print(json.dumps({
            "id": p.id, "run_id": p.run_id, "server": p.server, "tool": p.tool,
            "arguments": loads(p.arguments), "fixed": loads(p.fixed), "hash": p.request_hash,
            "fingerprint": present.fingerprint(p.request_hash), "kind": p.kind,
            "class": p.side_effect, "created_at": p.created_at, "reason": p.reason,
        }, ensure_ascii=False))  # fmt: skip
    return EXIT_OK


def decide(args: argparse.Namespace) -> int:
    from core.approvals import approve, reject

    by = f"operator:{getpass.getuser()}"
    with Store.open(paths.database_path()) as store:
        with store.snapshot() as conn:
            approval = read_approval(conn, args.approval)
        if approval is None:
            return _error(f"no approval {args.approval}", UnknownApproval.__name__)
        scope = getattr(args, "scope", None)
        try:
            if args.decision == "approve":
                approve(store, approval.run_id, approval.id, by, args.reason,
                        expected_hash=args.hash, scope=scope)  # fmt: skip
            else:
                reject(store, approval.run_id, approval.id, by, args.reason,
                       expected_hash=args.hash)  # fmt: skip
        except SignoffError as e:
            return _error(str(e), type(e).__name__)
    verb = "approved" if args.decision == "approve" else "rejected"
    verb += f" (and this exact call for {scope})" if scope else ""
    fingerprint = present.fingerprint(approval.request_hash)
    print(f"{verb} {approval.id} (run {approval.run_id}, request fingerprint {fingerprint})")
    return EXIT_OK


def runs(args: argparse.Namespace) -> int:
    """The most recent runs; ``rule``: the rule on the arguments that decided
    (core/policy/rules.py), shown as "allowed by rule R..." or "rejected by rule R...";
    ``grant``: the standing grant a run was allowed under (core/grants.py)."""
    from core.grants import used_by

    with Store.open(paths.database_path()) as store, store.snapshot() as conn:
        rows = conn.execute(
            "SELECT id, created_at, server, tool, status, end_reason, updated_at FROM runs"
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (args.limit,),
        ).fetchall()
        ids = [str(row[0]) for row in rows]
        decided = decided_by_rule(conn, ids)
        under = used_by(conn, ids)
    keys = ("id", "created_at", "server", "tool", "status", "end_reason", "updated_at")
    for row in rows:
        rule = decided.get(row[0])
        grant = under.get(row[0])
        if args.json:
            found = dict(zip(keys, row, strict=True))
            print(json.dumps({**found, "rule": rule[0] if rule else None, "grant": grant}))
        else:
            what = f"{row[2]}/{row[3]}" if row[2] else row[0]
            by = f"  {rule[1]} by rule {rule[0]}" if rule else ""
            by += f"  allowed under grant {grant}" if grant else ""
            print(f"{row[1]}  {what:40}  {row[4]}{f' ({row[5]})' if row[5] else ''}{by}")
    return EXIT_OK


def _error(message: str, name: str = "UsageError") -> int:
    print(f"signoff: {message} [{name}]", file=sys.stderr)
    return EXIT_ERROR
