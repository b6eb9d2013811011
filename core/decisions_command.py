"""``signoff decisions``: how this database's decisions are authenticated, and the
operator's choice of it (core/operator_key.py rule 4)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from core import paths

EXIT_OK = 0


def register(commands: Any) -> None:
    p = commands.add_parser(
        "decisions",
        help="how decisions are authenticated: signed with the operator key in the OS keyring,"
        " or, chosen explicitly on a machine without one, not at all",
        description="With no argument, say the mode. 'unauthenticated' records in the chain"
        " that this database's decisions are not signed (for a machine with no OS keyring):"
        " whoever can write Signoff's files can then approve a request. 'authenticated' goes"
        " back to signed decisions.",
    )
    p.add_argument("mode", nargs="?", choices=("authenticated", "unauthenticated"))
    p.add_argument("--reason", default="", metavar="R")
    p.set_defaults(func=decisions)


def decisions(args: argparse.Namespace) -> int:
    from core import operator_key  # here: parsing the command line loads no keyring code
    from core.store import Store

    with Store.open(paths.database_path()) as store:
        if args.mode is not None:
            by = f"operator:{getpass.getuser()}"
            unauthenticated = args.mode == "unauthenticated"
            operator_key.choose_mode(store, unauthenticated=unauthenticated, by=by,
                                     reason=args.reason)  # fmt: skip
        with store.snapshot() as conn:
            unauthenticated = operator_key.unauthenticated_mode(conn)
    if unauthenticated:
        print("decisions: unauthenticated (chosen in the chain): they are not signed, and"
              " whoever can write Signoff's files can approve a request")  # fmt: skip
    else:
        print("decisions: authenticated: each is signed with this database's operator key in"
              " the OS keyring, and only a signed approval is executed")  # fmt: skip
    return EXIT_OK
