"""The ``signoff`` commands an operator runs in a terminal. No Qt here.

Exit codes: 0 success; 1 the check failed (a broken chain); 2 the command could not do its
work (no database, unsafe permissions, a newer schema, bad usage).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core import paths
from core.decisions_command import register as register_decisions_command
from core.demo.command import register as register_demo_command
from core.errors import ChainBroken, DatabaseRestored, SignoffError, StateDisagrees
from core.grants_command import register as register_grants_command
from core.hosts_commands import register as register_hosts_commands
from core.proxy.commands import register as register_proxy_commands

if TYPE_CHECKING:
    from core.policy.policy import PolicyDecision
    from core.store import Store

# Each command imports what it uses in its own function: parsing the command line loads none of
# it, and no command loads another's (decision 0033; tests/test_commands_load.py).

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="signoff",
        description="Signoff: the operator's gate for AI agents' MCP tool calls.",
        epilog="SIGNOFF_HOME=DIR keeps the database and configuration in DIR.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = commands.add_parser(
        "verify",
        help="check the audit chain of the database",
        description="Recompute every event's hash, compare the chain with the head kept in the"
        " OS keyring, rebuild the runs, steps and approvals from the events and compare them"
        " with the tables, and check every decision's MAC with the operator key. Exit 0 when"
        " intact, 1 naming the first bad event or row, 2 when the database cannot be read.",
    )
    p.add_argument("--no-keyring", action="store_true", help="do not compare with the keyring")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=_verify)

    p = commands.add_parser(
        "anchor",
        help="confirm that the database here is yours, after another was anchored here",
        description="The OS keyring keeps the chain's head by the database's id, and notes which"
        " database was anchored where. Another database lying where one was anchored (a fresh"
        " start, or another Signoff home moved to its place) stops every approved call until"
        " you confirm it: 'signoff anchor accept' says which database this is and anchors it"
        " here. A copy of a database the keyring knows is never accepted this way: it must hold"
        " the head kept for it. Exit 0 when confirmed, 2 when it cannot be.",
    )
    p.add_argument("action", choices=["accept"], help="accept: anchor this database here")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=_anchor)

    p = commands.add_parser(
        "recheck",
        help="would today's policy decide a run's steps the same?",
        description="Hand every recorded policy evaluation of RUN, rebuilt from the record, to"
        " today's policy (from the configuration). Exit 0 when it decides the same, 1 listing"
        " each difference, 2 when the run cannot be re-checked.",
    )
    p.add_argument("run", metavar="RUN", help="the run's id")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=_recheck)

    p = commands.add_parser(
        "export",
        help="write runs and their events as JSON Lines",
        description="Write a header line, then one JSON object a line per run (all runs, newest"
        " first, or each --run), with its steps, approvals and events; each event carries the"
        " hash before it, so it can be checked away from the database. Exit 0 when written, 2"
        " when a run is unknown or the database cannot be read.",
    )
    p.add_argument(
        "--run", action="append", metavar="ID", dest="runs", help="export this run (repeatable)"
    )
    p.add_argument("--out", metavar="FILE", help="write to FILE (created 0600), not stdout")
    p.add_argument("--otlp", metavar="URL", help="send the runs' spans to this OTLP/HTTP traces"
                   " endpoint instead (e.g. http://127.0.0.1:4318/v1/traces)")  # fmt: skip
    p.set_defaults(func=_export, json=False)

    register_proxy_commands(commands)
    register_decisions_command(commands)
    register_grants_command(commands)
    register_hosts_commands(commands)
    register_demo_command(commands)
    return parser


# Hidden commands: a bundle has no ``python -m``, so what Signoff starts as a module runs as
# ``signoff _NAME ARGS``. Not in the parser, so neither in ``--help`` nor in the README.
HIDDEN = {"_demo-server": "core.demo.server"}


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in HIDDEN:
        module = importlib.import_module(HIDDEN[given[0]])
        hidden: int = module.main(given[1:])
        return hidden
    parser = build_parser()
    args = parser.parse_args(given)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        code: int = args.func(args)
    except SignoffError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return EXIT_ERROR
    return code


def _verify(args: argparse.Namespace) -> int:
    from core import operator_key
    from core.heads import KeyringHeadStore
    from core.replay import check_state
    from core.store import Store
    from core.verify import verify

    path = paths.database_path()
    try:
        with Store.open(path, create=False, readonly=True) as store:
            heads = None if args.no_keyring else KeyringHeadStore()
            report = verify(store, heads)
            operator = None if args.no_keyring else operator_key.default()
            signed = check_state(store, operator)
            with store.snapshot() as conn:
                unauthenticated = operator_key.unauthenticated_mode(conn)
                (macs,) = conn.execute(
                    "SELECT count(*) FROM events WHERE kind = 'approval.decided'"
                    ' AND payload LIKE \'%"mac":"%\''
                ).fetchone()
            unchecked = macs - signed  # signed decisions whose key could not be read
    except StateDisagrees as e:
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "row": e.row, "message": str(e)},
            f"the record disagrees with its events at {e.row}: {e} [{type(e).__name__}]",
        )
        return EXIT_FAILED
    except ChainBroken as e:
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "seq": e.seq, "message": str(e)},
            f"broken at event {e.seq}: {e} [{type(e).__name__}]",
        )
        return EXIT_FAILED
    except DatabaseRestored as e:  # another database where one was anchored
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "message": str(e)},
            f"not the database anchored here: {e} [{type(e).__name__}]",
        )
        return EXIT_FAILED
    except SignoffError as e:
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "message": str(e)},
            f"cannot verify: {e} [{type(e).__name__}]",
        )
        return EXIT_ERROR
    witnessed = report.witnessed
    _say(
        args,
        {
            "ok": True,
            "database": report.head.database_id,
            "events": report.head.seq,
            "head": report.head.hash,
            "anchor": report.anchor.value,
            "witnessed_seq": None if witnessed is None else witnessed.seq,
            "detail": report.detail,
            "decisions_checked": signed,
            "decisions_unchecked": unchecked,
            "decisions": "unauthenticated" if unauthenticated else "authenticated",
        },
        f"{report.summary()}; state tables agree with the events; "
        + (
            "decisions UNAUTHENTICATED (chosen in the chain): whoever can write Signoff's"
            " files can approve a request"
            if unauthenticated
            else f"{signed} decisions checked against the operator key"
        )
        + (
            f"; {unchecked} signed decisions NOT checked: the operator key cannot be read"
            " (--no-keyring, or a keyring that holds none or is locked)"
            if unchecked
            else ""
        ),
    )
    return EXIT_OK


def _anchor(args: argparse.Namespace) -> int:
    from core.anchor import holds
    from core.heads import KeyringHeadStore, confirm
    from core.store import Store

    heads = KeyringHeadStore()
    try:
        with Store.open(paths.database_path(), create=False, readonly=True) as store:
            kept = heads.load(store.database_id)
            if kept is not None:  # a database the keyring knows must hold its kept head
                holds(store, kept)
            head = store.head()
            confirmed = confirm(heads, store.path, head)
    except SignoffError as e:
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "message": str(e)},
            f"signoff: {e} [{type(e).__name__}]",
        )
        return EXIT_ERROR
    _say(
        args,
        {"ok": True, "database": head.database_id, "events": head.seq, "places": list(confirmed)},
        f"database {head.database_id} ({head.seq} events) is now the one anchored at "
        + " and ".join(confirmed),
    )
    return EXIT_OK


def _recheck(args: argparse.Namespace) -> int:
    from core.proxy import config as configuration
    from core.recheck import recheck
    from core.store import Store

    try:
        policy = configuration.load(paths.config_path()).policy()
        with Store.open(paths.database_path(), create=False, readonly=True) as store:
            result = recheck(store, args.run, policy)
    except SignoffError as e:
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "message": str(e)},
            f"cannot re-check: {e} [{type(e).__name__}]",
        )
        return EXIT_ERROR
    differences = [
        {
            "step": d.step,
            "then": d.then.as_json(),
            "now": d.now.as_json(),
            "then_policy": d.then_policy,
            "now_policy": d.now_policy,
        }
        for d in result.differences
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "ok": not differences,
                    "run": result.run_id,
                    "evaluations": result.evaluations,
                    "differences": differences,
                }
            )
        )
    elif not differences:
        print(
            f"same: today's policy decides all {result.evaluations} evaluations of run"
            f" {result.run_id} as recorded"
        )
    else:
        for d in result.differences:
            print(f"run {d.run_id} step {d.step}: then {_describe(d.then)}, now {_describe(d.now)}")
    return EXIT_FAILED if differences else EXIT_OK


def _export(args: argparse.Namespace) -> int:
    import io

    from core.export import export_runs
    from core.store import Store

    if args.otlp is not None:  # OpenTelemetry is loaded for this alone (core/telemetry.py)
        from core.telemetry import export_command

        return export_command(args, _say)
    try:
        with Store.open(paths.database_path(), create=False, readonly=True) as store:
            if args.out is None:
                if isinstance(sys.stdout, io.TextIOWrapper):
                    sys.stdout.reconfigure(encoding="utf-8", newline="\n")
                export_runs(store, sys.stdout, args.runs)
            else:
                _export_to_file(store, Path(args.out), args.runs)
    except (SignoffError, OSError) as e:
        _say(
            args,
            {"ok": False, "error": type(e).__name__, "message": str(e)},
            f"cannot export: {e} [{type(e).__name__}]",
        )
        return EXIT_ERROR
    return EXIT_OK


def _export_to_file(store: Store, out: Path, runs: Sequence[str] | None) -> None:
    """Write beside ``out`` (0600) and move it into place: no partial or readable export."""
    import os
    import tempfile

    from core.export import export_runs

    fd, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            export_runs(store, f, runs)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _describe(decision: PolicyDecision) -> str:
    kind = f" ({decision.kind})" if decision.kind else ""
    return f"{decision.outcome.value}{kind}"


def _say(args: argparse.Namespace, obj: dict[str, object], line: str) -> None:
    if args.json:
        print(json.dumps(obj, ensure_ascii=False))
    else:
        print(line, file=sys.stdout if obj.get("ok") else sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
