"""``signoff hosts``: list the MCP hosts' files, import their servers, wire them to ``signoff
proxy``, undo a write. Errors are ``HostConfigError`` (exit 2), reported by ``core.cli``."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import paths
from core.errors import SignoffError
from core.hosts import (
    Action,
    Host,
    HostConfigError,
    HostFile,
    apply_import,
    default_paths,
    existing_path,
    plan_import,
    plan_wire,
    read_host,
    selected,
    signoff_command,
)
from core.proxy import config as configuration

if TYPE_CHECKING:  # loaded by the wiring it describes (decision 0033)
    from core.host_tools import ServerTools

EXIT_OK = 0
HOSTS = [h.value for h in Host]


def register(commands: Any) -> None:
    hosts = commands.add_parser(
        "hosts",
        help="import servers from MCP hosts' configurations; wire hosts to signoff proxy",
    )
    actions = hosts.add_subparsers(dest="hosts_command", metavar="ACTION", required=True)

    p = actions.add_parser("list", help="the hosts' files Signoff knows and the servers in them")
    p.set_defaults(func=hosts_list)

    p = actions.add_parser("import", help="add a host's servers to Signoff's configuration")
    _host_and_file(p)
    _servers(p)
    p.add_argument(
        "--replace", action="store_true", help="overwrite Signoff's servers of the same name"
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be imported, only")
    p.set_defaults(func=hosts_import)

    p = actions.add_parser(
        "wire", help="make the host launch signoff proxy NAME for its servers (keeps a copy)"
    )
    _host_and_file(p)
    _servers(p)
    p.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    p.add_argument(
        "--force",
        action="store_true",
        help="wire even when the host would lose tools Signoff does not offer yet",
    )
    p.set_defaults(func=hosts_wire)

    p = actions.add_parser("undo", help="restore the host's file as it was before Signoff wrote")
    _host_and_file(p)
    p.add_argument(
        "--force", action="store_true", help="restore even if the file changed since Signoff wrote"
    )
    p.set_defaults(func=hosts_undo)


def _host_and_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("host", metavar="HOST", choices=HOSTS, help=", ".join(HOSTS))
    p.add_argument("--file", type=Path, metavar="F", help="this file, not the host's usual one")


def _servers(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="S",
        dest="servers",
        help="only this server (repeatable; default: every one that can be)",
    )


def hosts_list(args: argparse.Namespace) -> int:
    for host in Host:
        for path in default_paths(host):
            if not path.is_file():
                print(f"{host.value}: {path}: no file")
                continue
            try:
                hostfile = read_host(path, host)
            except SignoffError as e:
                print(f"{host.value}: {path}: cannot be read: {e} [{type(e).__name__}]")
                continue
            names = ", ".join(e.key for e in hostfile.entries) or "no servers"
            print(f"{host.value}: {path}: {names}")
    return EXIT_OK


def _read(args: argparse.Namespace) -> HostFile:
    host = Host(args.host)
    path = args.file or existing_path(host)
    if path is None:
        looked = ", ".join(str(p) for p in default_paths(host))
        raise HostConfigError(f"no {host.label} configuration at {looked}; give it with --file")
    return read_host(path, host)


def hosts_import(args: argparse.Namespace) -> int:
    config_path = paths.config_path()
    hostfile = _read(args)
    items = plan_import(hostfile, configuration.load(config_path))
    for item in items:
        print(f"{item.key}: {item.action.value}: {item.reason}")
    if args.servers:
        keys = hostfile.select(args.servers)
    else:
        wanted = (Action.IMPORT, Action.CONFLICT) if args.replace else (Action.IMPORT,)
        keys = [item.key for item in items if item.action in wanted]
    chosen = selected(items, keys, replace=args.replace)
    names = sorted({i.name for i in chosen if i.action is not Action.IMPORTED})
    if not names:
        print("nothing to import")
    elif args.dry_run:
        print(f"would import {', '.join(names)} (dry run: nothing changed)")
    else:
        imported = apply_import(config_path, items, keys, replace=args.replace)
        print(f"imported {', '.join(imported)} into {config_path}")
        print(f"next: review and pin their tools: {you()} pin {imported[0]}")
    return EXIT_OK


def hosts_wire(args: argparse.Namespace) -> int:
    config_path = paths.config_path()
    hostfile = _read(args)
    config = configuration.load(config_path)
    if args.servers:
        keys = hostfile.select(args.servers)
    else:
        able = (Action.IMPORT, Action.IMPORTED)
        planned = plan_import(hostfile, config)  # a remote server is imported, not wired
        keys = [item.key for item in planned if item.action in able and not item.url]
        if not keys:
            raise HostConfigError(f"{hostfile.path}: no server here can be wired")
    plan = plan_wire(hostfile, keys, signoff_command(), config=config)
    if not plan.changed:
        print(f"nothing to change: {hostfile.path} already launches signoff proxy for these")
        return EXIT_OK
    from core import host_tools

    kept = host_tools.after_wiring(plan.wired, config, paths.data_dir() / "status")
    for server in kept:
        print(f"{server.key}: {server.sentence()}")
    losing = [server for server in kept if server.loses]
    if args.dry_run:
        print(plan.diff)
        if not plan.writable:
            print(f"{hostfile.path} has comments or trailing commas: Signoff will not write it")
        if losing:
            print(_losses(losing, args, written="would be refused without --force"))
        print("(dry run: nothing changed)")
        return EXIT_OK
    if losing and not args.force:
        raise host_tools.ToolsWouldBeLost(_losses(losing, args, written="nothing was written"))
    print(plan.diff)
    from core.host_backups import write_wire  # only what writes a host's file loads it

    backup = write_wire(plan, config_path)
    for item in plan.imports:
        print(f"imported {item.name} into {config_path}")
    print(f"wrote {hostfile.path}; the original is kept at {backup.backup}")
    print(f"restart {hostfile.host.label} to use it; to undo: {you()} hosts undo {args.host}")
    return EXIT_OK


def _losses(losing: list[ServerTools], args: argparse.Namespace, *, written: str) -> str:
    """The tools the host would lose, server by server, and the commands that keep them."""
    host = Host(args.host)
    lines = [f"wiring takes tools away from {host.label}, so {written}:"]
    for server in losing:
        if server.today is None:
            lines.append(f"  {server.key}: every tool it has today (Signoff has not seen them)")
        else:
            lines.append(f"  {server.key}: {', '.join(server.lost)}")
    lines.append("to keep them, first:")
    for server in losing:
        lines += [f"  {step}" for step in _steps(server, host, args.file)]
    again = ["hosts", "wire", args.host]
    again += ["--file", str(args.file)] if args.file else []
    for server in args.servers:
        again += ["--server", server]
    lines.append(
        f"or wire anyway, and the host goes without them: {you()} {shlex.join(again)} --force"
    )
    return "\n".join(lines)


def _steps(server: ServerTools, host: Host, file: Path | None) -> list[str]:
    """The commands that make a server's tools offered, in order."""
    from core.host_tools import CHANGED, HINTS, UNPINNED

    name, signoff = shlex.quote(server.server), you()
    steps: list[str] = []
    if not server.in_signoff:
        where = ["--file", str(file)] if file else []
        steps.append(f"{signoff} " + shlex.join(["hosts", "import", host.value, *where,
                                              "--server", server.key]))  # fmt: skip
    waits = server.waiting
    if server.today is None or UNPINNED in waits or CHANGED in waits:
        steps.append(f"{signoff} pin {name}    (review the tools, then: {signoff} pin {name}"
                     " --accept)")  # fmt: skip
    if server.today is None:
        steps.append(f"{signoff} classify {name} TOOL=CLASS...    (each of its tools)")
    elif server.classless:
        entries = " ".join(f"{shlex.quote(tool)}=CLASS" for tool in server.classless)
        steps.append(f"{signoff} classify {name} {entries}")
    for tool in waits.get(HINTS, ()):
        steps.append(
            f"{signoff} classify {name} {shlex.quote(tool)} CLASS    (as its hints say), or:"
            f" {signoff} tool {name} {shlex.quote(tool)} --overrule-annotations yes"
        )
    return steps


def hosts_undo(args: argparse.Namespace) -> int:
    from core.host_backups import backups, undo

    config_path = paths.config_path()
    host = Host(args.host)
    path = args.file
    if path is None:
        written = [b for b in backups(config_path) if b.host is host and b.undone is None]
        if not written:
            raise HostConfigError(f"Signoff has no write to a {host.label} file to undo")
        path = written[-1].original
    restored = undo(path, config_path, force=args.force)
    print(f"restored {restored.original} from {restored.backup}")
    return EXIT_OK


def you() -> str:
    """``signoff`` as the person runs it here (core/invocation.py rule 2)."""
    from core.invocation import signoff_word

    return signoff_word()
