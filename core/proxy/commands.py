"""The proxy's terminal commands: servers, pins, classes, policy, the proxy, approvals, runs."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import sys
from typing import Any

from core import paths
from core.approvals import approve, reject
from core.canonical import loads
from core.errors import SignoffError, UnknownApproval
from core.proxy import config as configuration
from core.proxy import wake
from core.proxy.config import SERVER_NAME, ServerConfig
from core.proxy.pins import evaluate
from core.proxy.server import START_TIMEOUT, serve
from core.records import pending_requests, read_approval
from core.store import Store
from core.tools import SideEffect

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


def register(commands: Any) -> None:
    servers = commands.add_parser("servers", help="add and list upstream MCP servers")
    servers_commands = servers.add_subparsers(
        dest="servers_command", metavar="ACTION", required=True
    )
    p = servers_commands.add_parser(
        "add", help="add a server: NAME [--env VAR]... -- COMMAND [ARG]..."
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR",
        help="pass this environment variable through (its name only is stored)",
    )
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG]...")
    p.set_defaults(func=servers_add)
    p = servers_commands.add_parser("list", help="list the configured servers")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=servers_list)

    p = commands.add_parser("pin", help="connect to a server, review its tools, pin them")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--accept", action="store_true", help="pin the tools as listed now")
    p.add_argument("--tool", metavar="T", help="only this tool")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=pin)

    p = commands.add_parser("classify", help="set a tool's side-effect class")
    p.add_argument("name", metavar="NAME")
    p.add_argument("tool", metavar="TOOL")
    p.add_argument("side_effect", metavar="CLASS", choices=[s.value for s in SideEffect])
    p.set_defaults(func=classify)

    p = commands.add_parser(
        "policy", help="CLASS allow|approve|deny, or NAME TOOL allow|approve|deny"
    )
    p.add_argument("target", nargs="+", metavar="CLASS | NAME TOOL")
    p.set_defaults(func=policy)

    p = commands.add_parser("proxy", help="serve the named servers to an MCP host over stdio")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument(
        "--hold",
        type=float,
        metavar="SECONDS",
        help="how long a call needing approval is held (default: configuration)",
    )
    p.set_defaults(func=proxy)

    p = commands.add_parser("pending", help="the approvals waiting for a decision (JSON)")
    p.set_defaults(func=pending)
    for name, helptext in (("approve", "approve a pending request"), ("reject", "reject one")):
        p = commands.add_parser(name, help=helptext)
        p.add_argument("approval", metavar="ID")
        p.add_argument("--reason", default="", metavar="R")
        p.add_argument("--hash", metavar="SHA256", help="refuse unless the request has this hash")
        p.set_defaults(func=decide, decision=name)

    p = commands.add_parser("runs", help="the most recent runs")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=runs)


# --- configuration ---------------------------------------------------------------------------


def servers_add(args: argparse.Namespace) -> int:
    # argparse's REMAINDER also takes --env options given after NAME: read them here. (A "--"
    # right after NAME is consumed by argparse itself.)
    env, rest = list(args.env), list(args.argv)
    while rest and rest[0].startswith("--env"):
        option = rest.pop(0)
        if option == "--env" and rest:
            env.append(rest.pop(0))
        elif option.startswith("--env="):
            env.append(option.removeprefix("--env="))
        else:
            return _error(f"unexpected {option!r}; put the server's command after --")
    argv = rest[1:] if rest[:1] == ["--"] else rest
    if not argv:
        return _error("give the server's command after --, e.g. signoff servers add fs -- npx ...")
    if not SERVER_NAME.fullmatch(args.name):
        return _error("a server name is letters, digits, '-' and '_' (at most 32)")
    editor = configuration.Editor(paths.config_path())
    table = editor.table("servers", args.name)
    table["command"] = argv[0]
    table["args"] = argv[1:]
    table["env"] = env
    editor.save()
    print(f"added server {args.name}; next: signoff pin {args.name}")
    return EXIT_OK


def servers_list(args: argparse.Namespace) -> int:
    config = configuration.load(paths.config_path())
    rows = [
        {"name": s.name, "command": [s.command, *s.args], "env": list(s.env),
         "tools": {t: (c.side_effect.value if c.side_effect else None) for t, c in s.tools.items()}}
        for s in config.servers.values()
    ]  # fmt: skip
    if args.json:
        print(json.dumps(rows))
    for row in [] if args.json else rows:
        print(f"{row['name']}: {' '.join(row['command'])} ({len(row['tools'])} tools configured)")
    return EXIT_OK


def pin(args: argparse.Namespace) -> int:
    config = configuration.load(paths.config_path())
    server = config.servers.get(args.name)
    if server is None:
        return _error(f"no server {args.name}; add it with signoff servers add")
    listing = asyncio.run(_listing(server))
    tools = [t for t in listing.tools if args.tool in (None, t.name)]
    if args.tool and not tools:
        return _error(f"server {args.name} lists no tool {args.tool}")
    if args.accept:
        editor = configuration.Editor(paths.config_path())
        for tool in tools:
            editor.table("servers", args.name, "tools", tool.name)["pin"] = tool.pin
        config = editor.save()
        server = config.servers[args.name]
    rows = []
    for tool in tools:
        state = evaluate(tool, server.tools.get(tool.name))
        rows.append({
            "tool": tool.name, "status": state.status, "pin": tool.pin,
            "class": state.side_effect.value if state.side_effect else None,
            "annotations": tool.annotations, "available": state.available,
            "reason": state.reason, "conflict": state.conflict, "description": tool.description,
        })  # fmt: skip
    if args.json:
        print(json.dumps({"server": args.name, "set_hash": listing.set_hash, "tools": rows,
                          "dropped": [list(d) for d in listing.dropped]}))  # fmt: skip
        return EXIT_OK
    for row in rows:
        marks = ", ".join(f"{k}={v}" for k, v in row["annotations"].items() if k.endswith("Hint"))
        usable = "available" if row["available"] else f"unavailable: {row['reason']}"
        print(f"{row['tool']}: {row['status']}, class {row['class'] or '-'}"
              f"{f', annotations {marks}' if marks else ''}; {usable}")  # fmt: skip
    for what, why in listing.dropped:
        print(f"dropped {what}: {why}")
    if not args.accept and any(r["status"] != "pinned" for r in rows):
        print(f"review the descriptions, then: signoff pin {args.name} --accept")
    return EXIT_OK


async def _listing(server: ServerConfig) -> Any:
    from core.proxy.pins import read_listing
    from core.proxy.upstream import Upstream

    upstream = Upstream(server, paths.data_dir() / "logs" / f"{server.name}.log")
    await upstream.start(START_TIMEOUT)
    try:
        return read_listing(await upstream.list_tools(START_TIMEOUT))
    finally:
        await upstream.close()


def classify(args: argparse.Namespace) -> int:
    editor = configuration.Editor(paths.config_path())
    if args.name not in editor.document.get("servers", {}):
        return _error(f"no server {args.name}")
    editor.table("servers", args.name, "tools", args.tool)["class"] = args.side_effect
    editor.save()
    print(f"{args.name}/{args.tool} is {args.side_effect}")
    return EXIT_OK


def policy(args: argparse.Namespace) -> int:
    rules = ("allow", "approve", "deny")
    target = args.target
    if len(target) not in (2, 3) or target[-1] not in rules:
        return _error("usage: signoff policy CLASS allow|approve|deny, or NAME TOOL RULE")
    editor = configuration.Editor(paths.config_path())
    if len(target) == 2:
        if target[0] not in [s.value for s in SideEffect]:
            return _error(f"{target[0]} is not a side-effect class")
        editor.table("policy")[target[0]] = target[1]
    else:
        if target[0] not in editor.document.get("servers", {}):
            return _error(f"no server {target[0]}")
        editor.table("servers", target[0], "tools", target[1])["policy"] = target[2]
    editor.save()
    print(f"policy: {' '.join(target[:-1])} -> {target[-1]}")
    return EXIT_OK


# --- serving ---------------------------------------------------------------------------------


def proxy(args: argparse.Namespace) -> int:
    config = configuration.load(paths.config_path())
    unknown = [n for n in args.names if n not in config.servers]
    if unknown:
        return _error(f"no server named {', '.join(unknown)} in {paths.config_path()}")
    log_dir = paths.data_dir() / "logs"
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    logging.basicConfig(
        filename=log_dir / "proxy.log", level=logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(message)s",
    )  # fmt: skip
    with Store.open(paths.database_path()) as store:
        asyncio.run(serve(config, args.names, store, log_dir=log_dir, hold_seconds=args.hold))
    return EXIT_OK


# --- approvals and runs ----------------------------------------------------------------------


def pending(args: argparse.Namespace) -> int:
    with Store.open(paths.database_path()) as store, store.snapshot() as conn:
        waiting = pending_requests(conn)
    for p in waiting:
        print(json.dumps({
            "id": p.id, "run_id": p.run_id, "server": p.server, "tool": p.tool,
            "arguments": loads(p.arguments), "hash": p.request_hash, "kind": p.kind,
            "class": p.side_effect, "created_at": p.created_at, "reason": p.reason,
        }, ensure_ascii=False))  # fmt: skip
    return EXIT_OK


def decide(args: argparse.Namespace) -> int:
    by = f"operator:{getpass.getuser()}"
    with Store.open(paths.database_path()) as store:
        with store.snapshot() as conn:
            approval = read_approval(conn, args.approval)
        if approval is None:
            return _error(f"no approval {args.approval}", UnknownApproval.__name__)
        act = approve if args.decision == "approve" else reject
        try:
            act(store, approval.run_id, approval.id, by, args.reason, expected_hash=args.hash)
        except SignoffError as e:
            return _error(str(e), type(e).__name__)
    wake.wake(args.decision)
    verb = "approved" if args.decision == "approve" else "rejected"
    print(f"{verb} {approval.id} (run {approval.run_id}, request {approval.request_hash[:16]})")
    return EXIT_OK


def runs(args: argparse.Namespace) -> int:
    with Store.open(paths.database_path()) as store, store.snapshot() as conn:
        rows = conn.execute(
            "SELECT id, created_at, server, tool, status, end_reason, updated_at FROM runs"
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (args.limit,),
        ).fetchall()
    keys = ("id", "created_at", "server", "tool", "status", "end_reason", "updated_at")
    for row in rows:
        if args.json:
            print(json.dumps(dict(zip(keys, row, strict=True))))
        else:
            what = f"{row[2]}/{row[3]}" if row[2] else row[0]
            print(f"{row[1]}  {what:40}  {row[4]}{f' ({row[5]})' if row[5] else ''}")
    return EXIT_OK


def _error(message: str, name: str = "UsageError") -> int:
    print(f"signoff: {message} [{name}]", file=sys.stderr)
    return EXIT_ERROR
