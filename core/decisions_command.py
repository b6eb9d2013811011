"""``signoff decisions``: how this database's decisions are authenticated, and the
operator's choice of it (core/operator_key.py rule 4)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from core import paths

EXIT_OK = 0
EXIT_CHANGED = 1  # the keyring reached is not the recorded one
EXIT_USAGE = 2


def register(commands: Any) -> None:
    p = commands.add_parser(
        "decisions",
        help="how decisions are authenticated: signed with the operator key in the OS keyring,"
        " or, chosen explicitly on a machine without one, not at all",
        description="With no argument, say the mode. 'unauthenticated' records in the chain"
        " that this database's decisions are not signed (for a machine with no OS keyring):"
        " whoever can write Signoff's files can then approve a request. 'authenticated' goes"
        " back to signed decisions. 'keyring' says which keyring the chain records as holding the"
        " operator key and which one this process reaches; 'keyring accept' records the one"
        " reached as the keyring from now on (nothing approved runs under another).",
    )
    p.add_argument("mode", nargs="?", choices=("authenticated", "unauthenticated", "keyring"))
    p.add_argument("action", nargs="?", choices=("accept",), help="with keyring only")
    p.add_argument("--reason", default="", metavar="R")
    p.set_defaults(func=decisions)


def decisions(args: argparse.Namespace) -> int:
    from core import operator_key  # here: parsing the command line loads no keyring code
    from core.store import Store

    if args.mode == "keyring":
        return keyring(args)
    if args.action is not None:
        print("signoff: 'accept' goes with 'keyring' only")
        return EXIT_USAGE
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


def keyring(args: argparse.Namespace) -> int:
    """Which keyring holds the operator key, as the chain records it and as this process
    reaches it; with ``accept``, record the one reached (core/operator_key.py rule 6)."""
    from core import operator_key
    from core.store import Store

    keys = operator_key.default().keys
    with Store.open(paths.database_path()) as store:
        if args.action == "accept":
            by = f"operator:{getpass.getuser()}"
            accepted = operator_key.accept_keyring(store, keys, by=by)
            if accepted is not None:
                print(f"keyring: {accepted} is recorded as holding the operator key from now on")
        with store.snapshot() as conn:
            recorded = operator_key.recorded_keyring(conn)
            problem = operator_key.keyring_problem(conn, keys)
    recorded = recorded or "none yet (the first signed decision records it)"
    print(f"keyring recorded in the chain: {recorded}")
    print(f"keyring this process reaches: {keys.keyring() or 'none'}")
    if problem:
        print(f"signoff: {problem}")
        return EXIT_CHANGED
    return EXIT_OK
