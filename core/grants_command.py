"""``signoff grants``: the operator's standing grants ("allow this exact call for a while",
core/grants.py), listed, and ended before their time."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from core import paths

EXIT_OK = 0


def register(commands: Any) -> None:
    p = commands.add_parser(
        "grants",
        help="the exact calls you allowed for a while: list them, or end one now",
        description="'list' prints the grants in force (--all: every grant recorded), one a"
        " line; 'revoke ID' ends one now: the next identical call asks again.",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="the grants in force")
    listing.add_argument("--all", action="store_true", help="every grant, ended ones too")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.set_defaults(func=list_grants)
    revoking = sub.add_parser("revoke", help="end a grant now")
    revoking.add_argument("grant", metavar="ID")
    revoking.set_defaults(func=revoke_grant)


def list_grants(args: argparse.Namespace) -> int:
    from core import grants
    from core.store import Store, utc_now

    with Store.open(paths.database_path()) as store, store.snapshot() as conn:
        found = grants.listed(conn, now=None if args.all else utc_now())
    for g in found:
        if args.json:
            print(json.dumps({
                "id": g.id, "server": g.server, "tool": g.tool, "call_hash": g.call_hash,
                "scope": g.scope, "until": g.until, "approval": g.approval_id, "by": g.by,
                "at": g.at, "revoked_at": g.revoked_at, "host": g.host,
                "host_label": g.host_label,
            }))  # fmt: skip
            continue
        ended = f", ended {g.revoked_at} by {g.revoked_by}" if g.revoked_at else ""
        print(f"{g.id}  {g.server}/{g.tool}  {grants.SCOPE_WORDS.get(g.scope, g.scope)},"
              f" until {g.until}  from {g.host_label or '(no host)'}  call {g.call_hash[:16]}"
              f"  approved by {g.by} at {g.at}{ended}")  # fmt: skip
    if not found and not args.json:
        print("No grant is in force." if not args.all else "No grant was ever made.")
    return EXIT_OK


def revoke_grant(args: argparse.Namespace) -> int:
    from core import grants
    from core.store import Store

    with Store.open(paths.database_path()) as store:
        ended = grants.revoke(store, args.grant, by=f"operator:{getpass.getuser()}")
        problem = grants.keep_end(store)  # so that cutting the end off is seen (rule 6)
    print(f"ended {ended.id} ({ended.server}/{ended.tool}): the next identical call asks again")
    if problem:
        print(f"signoff: the end is recorded but not kept in the keyring: {problem}",
              file=sys.stderr)  # fmt: skip
    return EXIT_OK
