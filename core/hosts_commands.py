"""``signoff hosts``: list the MCP hosts' files, import their servers, wire them to ``signoff
proxy``, undo a write. Errors are ``HostConfigError`` (exit 2), reported by ``core.cli``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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
        print(f"next: review and pin their tools: signoff pin {imported[0]}")
    return EXIT_OK


def hosts_wire(args: argparse.Namespace) -> int:
    config_path = paths.config_path()
    hostfile = _read(args)
    config = configuration.load(config_path)
    if args.servers:
        keys = hostfile.select(args.servers)
    else:
        able = (Action.IMPORT, Action.IMPORTED)
        keys = [item.key for item in plan_import(hostfile, config) if item.action in able]
        if not keys:
            raise HostConfigError(f"{hostfile.path}: no server here can be wired")
    plan = plan_wire(hostfile, keys, signoff_command(), config=config)
    if not plan.changed:
        print(f"nothing to change: {hostfile.path} already launches signoff proxy for these")
        return EXIT_OK
    print(plan.diff)
    if args.dry_run:
        if not plan.writable:
            print(f"{hostfile.path} has comments or trailing commas: Signoff will not write it")
        print("(dry run: nothing changed)")
        return EXIT_OK
    from core.host_backups import write_wire  # only what writes a host's file loads it

    backup = write_wire(plan, config_path)
    for item in plan.imports:
        print(f"imported {item.name} into {config_path}")
    print(f"wrote {hostfile.path}; the original is kept at {backup.backup}")
    print(f"restart {hostfile.host.label} to use it; to undo: signoff hosts undo {args.host}")
    return EXIT_OK


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
