"""The proxy's terminal commands: servers, pins, classes, policy, the proxy, approvals, runs."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import paths
from core.canonical import loads
from core.errors import ConfigError, SignoffError
from core.proxy import (
    approval_commands,
    catalog_command,
    offer_commands,
    remote_commands,
    rule_commands,
    sampling_command,
)
from core.proxy import config as configuration
from core.proxy.config import SERVER_NAME, ServerConfig
from core.store import Store
from core.tools import SideEffect

# What only some commands use (the proxy's serving, a server's listing, the keyring's operator
# key, the asyncio loop) is imported in the function that uses it: ``signoff pending`` and
# ``signoff --help`` load none of it (decision 0033; tests/test_commands_load.py).

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
    p.add_argument(
        "--replace", action="store_true", help="change an existing server's command (tools kept)"
    )
    remote_commands.add_options(p)  # --url, --header: a remote server
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG]...")
    p.set_defaults(func=servers_add)
    p = servers_commands.add_parser("list", help="list the configured servers and their state")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=servers_list)
    p = servers_commands.add_parser("remove", help="remove a server and its tools' settings")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=servers_remove)
    p = servers_commands.add_parser("rename", help="rename a server, keeping its tools' settings")
    p.add_argument("name", metavar="NAME")
    p.add_argument("new_name", metavar="NEW")
    p.set_defaults(func=servers_rename)
    offer_commands.register(servers_commands)  # servers set: prompts and resources
    p = servers_commands.add_parser(
        "test",
        help="start a server and list its tools, changing nothing: NAME, or NAME [--env VAR]..."
        " -- COMMAND [ARG]... to try a command before adding it",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--env", action="append", default=[], metavar="VAR")
    p.add_argument(
        "--raw", action="store_true", help="print the raw tools/list answers, one per line"
    )
    p.add_argument(
        "--handshake",
        action="store_true",
        help="with --raw: print the server's initialize result first, on a line of its own",
    )
    p.add_argument("--timeout", type=float, metavar="SECONDS")  # None: servers.START_TIMEOUT
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG]...")
    p.set_defaults(func=servers_test)
    sampling_command.register(servers_commands)
    catalog_command.register(servers_commands)  # servers catalog: prompts and templates

    p = commands.add_parser("pin", help="connect to a server, review its tools, pin them")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--accept", action="store_true", help="pin the tools as listed now")
    p.add_argument("--tool", metavar="T", help="only this tool")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_pin)

    classes = ", ".join(s.value for s in SideEffect)
    p = commands.add_parser(
        "classify",
        usage="signoff classify NAME TOOL... CLASS\n       signoff classify NAME TOOL=CLASS..."
        " [--all-unclassified CLASS | --all CLASS]",
        help="set tools' side-effect classes in one change, all or none: NAME TOOL... CLASS (the"
        " same class for each), or NAME TOOL=CLASS... (each its own); --all-unclassified CLASS:"
        " every pinned tool with no class yet",
        description=f"Set the side-effect class ({classes}) of one tool or of many in one change"
        " of the configuration, recorded once: all of them, or, when any entry is refused, none"
        " (each problem is listed). TOOL... CLASS gives each tool named the one class at the"
        " end; TOOL=CLASS... gives each its own. A line that reads both ways (classify S"
        " x=read_only destructive: x read only, or a tool named x=read_only made destructive?)"
        " is refused as ambiguous: give every tool as TOOL=CLASS (a tool named x=read_only is"
        " x=read_only=destructive), or only tool names then one class. A tool named keeps its"
        " own class over --all-unclassified and --all.",
    )
    p.add_argument("name", metavar="NAME")
    # REMAINDER, read by classifying.read_words: argparse takes no optional after a "*"
    # positional (an option between the words would be refused).
    p.add_argument("entries", nargs=argparse.REMAINDER, metavar="TOOL... CLASS | TOOL=CLASS...",
                   help="tool names then one class, or TOOL=CLASS for each tool")  # fmt: skip
    which = p.add_mutually_exclusive_group()
    which.add_argument("--all-unclassified", "--rest", dest="rest", metavar="CLASS",
                       help="every pinned tool that has no class yet and is not named"
                       " (--rest: the same, its older name)")  # fmt: skip
    which.add_argument("--all", dest="every", metavar="CLASS",
                       help="every pinned tool that is not named, classified or not")  # fmt: skip
    p.set_defaults(func=classify, parser=p)

    p = commands.add_parser(
        "policy", help="CLASS allow|approve|deny|default, or NAME TOOL allow|approve|deny|default"
    )
    p.add_argument("target", nargs="+", metavar="CLASS | NAME TOOL")
    p.set_defaults(func=policy)

    rule_commands.register(commands)

    p = commands.add_parser(
        "tool", help="a tool's fixed and denied parameters and annotation overrule"
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("tool", metavar="TOOL")
    p.add_argument("--fix", action="append", default=[], metavar="PARAM=JSON",
                   help="set PARAM to this value on every call, hidden from the model")  # fmt: skip
    p.add_argument("--unfix", action="append", default=[], metavar="PARAM")
    p.add_argument("--deny", action="append", default=[], metavar="PARAM",
                   help="remove PARAM from the schema; a call setting it fails")  # fmt: skip
    p.add_argument("--undeny", action="append", default=[], metavar="PARAM")
    p.add_argument("--overrule-annotations", choices=["yes", "no"],
                   help="yes: keep the class even if the server's hints disagree")  # fmt: skip
    p.set_defaults(func=tool_settings)

    p = commands.add_parser(
        "settings",
        help="show the settings, or set one: NAME VALUE|default; diff, accept or restore a"
        " config.toml changed outside Signoff",
    )
    p.add_argument("setting", nargs="*", metavar="NAME VALUE")
    p.add_argument("--server", metavar="NAME",
                   help="call_timeout_seconds or result_limit_bytes for this server")  # fmt: skip
    p.add_argument("--tool", metavar="TOOL",
                   help="call_timeout_seconds for this tool only (with --server)")  # fmt: skip
    p.set_defaults(func=settings)

    p = commands.add_parser("proxy", help="serve the named servers to an MCP host over stdio")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument(
        "--hold",
        type=float,
        metavar="SECONDS",
        help="how long a call needing approval is held (default: configuration)",
    )
    p.set_defaults(func=proxy)

    p = commands.add_parser(
        "pending",
        help="the approvals waiting for a decision, one JSON object a line (hash: the request"
        " hash that approve --hash takes; fingerprint: its first 16 hex digits; fixed: the"
        " values set by Signoff, sent with the arguments)",
    )
    p.set_defaults(func=approval_commands.pending)
    for name, helptext in (("approve", "approve a pending request"), ("reject", "reject one")):
        p = commands.add_parser(name, help=helptext)
        p.add_argument("approval", metavar="ID")
        p.add_argument("--reason", default="", metavar="R")
        p.add_argument(
            "--hash",
            metavar="SHA256",
            help="refuse unless the request hash is this one (the full 64 hex digits shown as"
            " hash by signoff pending): the request you read is the request decided",
        )
        if name == "approve":  # "until Signoff quits" is the app's: it has no session here
            p.add_argument(
                "--for",
                dest="scope",
                choices=("15min", "1h"),
                help="also allow this exact call, without asking, for that long",
            )
        p.set_defaults(func=approval_commands.decide, decision=name)

    p = commands.add_parser("runs", help="the most recent runs")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=approval_commands.runs)
    remote_commands.register(commands)  # signoff secret set


# --- configuration ---------------------------------------------------------------------------


def _command_line(args: argparse.Namespace) -> tuple[list[str], list[str], bool]:
    """(argv, env names, replace) from NAME's options and the command after ``--``.

    argparse's REMAINDER also takes options given after NAME: read them here. (A "--" right
    after NAME is consumed by argparse itself.)"""
    env, rest = list(args.env), list(args.argv)
    replace = bool(getattr(args, "replace", False))
    while rest and rest[0].startswith("--") and rest[0] != "--":
        option = rest.pop(0)
        if option == "--env" and rest:
            env.append(rest.pop(0))
        elif option.startswith("--env="):
            env.append(option.removeprefix("--env="))
        elif option == "--replace":
            replace = True
        elif option == "--raw" and hasattr(args, "raw"):
            args.raw = True
        elif option == "--handshake" and hasattr(args, "handshake"):
            args.handshake = True
        elif option == "--timeout" and hasattr(args, "timeout") and rest:
            try:
                args.timeout = float(rest.pop(0))
            except ValueError:
                raise ConfigError("--timeout takes a number of seconds") from None
        else:
            raise ConfigError(f"unexpected {option!r}; put the server's command after --")
    return (rest[1:] if rest[:1] == ["--"] else rest), env, replace


def servers_add(args: argparse.Namespace) -> int:
    from core.proxy import manage

    if remote_commands.wanted(args):
        return remote_commands.servers_add(args)
    try:
        argv, env, replace = _command_line(args)
        if not argv:
            raise ConfigError(
                "give the server's command after --, e.g. signoff servers add fs -- npx ..."
            )
        manage.add_server(paths.config_path(), args.name, argv[0], argv[1:], env, replace=replace)
    except ConfigError as e:
        return _error(str(e), type(e).__name__)
    print(f"{'changed' if replace else 'added'} server {args.name}; next: signoff pin {args.name}")
    return EXIT_OK


def servers_list(args: argparse.Namespace) -> int:
    from core.proxy import remote, status

    config = configuration.load(paths.config_path())
    rows: list[dict[str, Any]] = []
    for s in config.servers.values():
        last = status.read(paths.data_dir() / "status", s.name)
        rows.append({
            "name": s.name, "command": [s.command, *s.args] if s.command else [remote.shown(s.url)],
            "env": list(s.env),
            "sampling": s.sampling,  # may ask the host's model (core/proxy/asks.py)
            "tools": {t: (c.side_effect.value if c.side_effect else None)
                      for t, c in s.tools.items()},
            "last_connection": None if last is None else {
                "at": last.at, "error": last.error, **last.summary(s)},
        })  # fmt: skip
    if args.json:
        print(json.dumps(rows))
    for row in [] if args.json else rows:
        seen: dict[str, Any] | None = row["last_connection"]
        state = "never connected" if seen is None else (
            f"last connection failed at {seen['at']}: {seen['error']}" if seen["error"] else
            f"{seen['pinned']} pinned, {seen['new']} new, {seen['changed']} changed,"
            f" {seen['unclassified']} unclassified, {seen['conflicts']} annotation conflicts"
        )  # fmt: skip
        sampling = ", may ask the host's model (sampling on)" if row["sampling"] else ""
        print(f"{row['name']}: {' '.join(row['command'])}\n  {state}{sampling}")
    return EXIT_OK


def servers_remove(args: argparse.Namespace) -> int:
    from core.proxy import manage

    name = args.name
    return _apply(lambda p: manage.remove_server(p, name), f"removed server {name}")


def servers_rename(args: argparse.Namespace) -> int:
    from core.proxy import manage

    name, new_name = args.name, args.new_name

    def rename(path: Path) -> configuration.Config:
        server = configuration.load(path).servers.get(name)
        if server is None:
            raise ConfigError(f"no server {name}")
        return manage.edit_server(path, name, command=server.command, args=server.args,
                                  env=server.env, new_name=new_name)  # fmt: skip

    return _apply(rename, f"renamed server {name} to {new_name}")


def servers_test(args: argparse.Namespace) -> int:
    """Start a server, list its tools, stop it; the configuration is not touched."""
    import asyncio

    from core.proxy import instructions, status
    from core.proxy.pin_command import raw_pages
    from core.proxy.pins import read_listing
    from core.proxy.servers import START_TIMEOUT

    noted = False
    try:
        argv, env, _ = _command_line(args)
        if not SERVER_NAME.fullmatch(args.name):
            raise ConfigError("a server name is letters, digits, '-' and '_' (at most 32)")
        configured = configuration.load(paths.config_path()).servers.get(args.name)
        if argv:
            server = ServerConfig(args.name, argv[0], tuple(argv[1:]), tuple(env))
        elif configured is None:
            raise ConfigError(f"no server {args.name}; to try a command: NAME -- COMMAND [ARG]...")
        else:
            server = configured
        # Only a configured server's own command leaves a status for the settings dialog.
        noted = argv == [] and configured is not None
        timeout = START_TIMEOUT if args.timeout is None else args.timeout
        handshake, pages = asyncio.run(raw_pages(server, timeout))
        listing = read_listing(pages)
    except SignoffError as e:
        if noted:
            status.record(paths.data_dir() / "status", args.name, None, f"{e} [{type(e).__name__}]")
        return _error(str(e), type(e).__name__)
    if noted:
        status.record(paths.data_dir() / "status", args.name, listing, handshake=handshake)
    if args.raw:
        if args.handshake:  # as parsed: Signoff keeps no raw handshake (instructions.py rule 2)
            sys.stdout.buffer.write(json.dumps(handshake).encode() + b"\n")
        for page in pages:
            sys.stdout.buffer.write(page.rstrip(b"\r\n") + b"\n")
        sys.stdout.flush()
        return EXIT_OK
    for tool in listing.tools:
        first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        print(f"{tool.name}: {first[:100]}")
    for what, why in listing.dropped:
        print(f"dropped {what}: {why}")
    told = instructions.evaluate(handshake, None)
    if told.text is not None:
        print(f"instructions: {len(told.text)} characters (signoff pin {args.name} shows them)")
    elif told.reason:
        print(f"instructions refused: {told.reason}")
    return EXIT_OK


def classify(args: argparse.Namespace) -> int:
    """One tool, or many in one change (core/proxy/classifying.py); the notes after say which
    of them are not offered yet, and why."""
    from core.proxy import classifying, manage, status

    name, path = args.name, paths.config_path()
    if {"-h", "--help"} & set(args.entries):  # after NAME, REMAINDER takes it
        args.parser.print_help()
        return EXIT_OK
    words = classifying.read_words(args.entries)
    rest = [
        *([args.rest] if args.rest is not None else []),
        *words.options[classifying.UNCLASSIFIED],
    ]
    every = [*([args.every] if args.every is not None else []), *words.options[classifying.EVERY]]
    if len(rest) > 1 or len(every) > 1:
        return _error("give --all-unclassified (or --rest) or --all once")
    try:
        before = configuration.load(path)
        after, classes = manage.classify(path, name, words.entries, problems=words.problems,
                                         rest=rest[0] if rest else None,
                                         every=every[0] if every else None)  # fmt: skip
    except ConfigError as e:
        return _error(str(e), type(e).__name__)
    _record_policy(before, after)
    if not classes:
        print(f"{name}: every pinned tool has a class already; nothing changed")
    for tool, side_effect in classes.items():
        print(f"{name}/{tool} is {side_effect.value}")
    last = status.read(paths.data_dir() / "status", name)
    listed, at = (last.tools, last.at) if last is not None and not last.error else (None, "")
    for note in classifying.notes(name, after.servers[name], classes, listed, at):
        print(f"note: {note}")
    return EXIT_OK


def tool_settings(args: argparse.Namespace) -> int:
    config = configuration.load(paths.config_path())
    server = config.servers.get(args.name)
    current = server.tools.get(args.tool) if server else None
    fixed = dict(current.fixed) if current else {}
    deny = list(current.deny) if current else []
    for item in args.fix:
        name, sep, text = item.partition("=")
        if not sep or not name:
            return _error(f"--fix takes PARAM=JSON, not {item!r}")
        try:
            fixed[name] = loads(text)
        except SignoffError:
            fixed[name] = text  # a bare word is a string
    for name in args.unfix:
        fixed.pop(name, None)
    deny = [d for d in [*deny, *args.deny] if d not in args.undeny]
    deny = list(dict.fromkeys(deny))
    settings: dict[str, Any] = {"fixed": fixed, "deny": deny}
    if args.overrule_annotations:
        settings["overrule_annotations"] = args.overrule_annotations == "yes"
    summary = f"{args.name}/{args.tool}: fixed {json.dumps(fixed)}, denied {deny}"
    if args.overrule_annotations:
        summary += f", annotations {'overruled' if settings['overrule_annotations'] else 'kept'}"
    return _set_tool(args.name, args.tool, summary, **settings)


def _set_tool(server: str, tool: str, done: str, **settings: Any) -> int:
    from core.proxy import manage

    return _apply(lambda p: manage.set_tool(p, server, tool, **settings), done)


def _apply(change: Callable[[Path], configuration.Config], done: str) -> int:
    """Make one change to the configuration, record a change of the rules, say what was done."""
    try:
        before = configuration.load(paths.config_path())
        after = change(paths.config_path())
    except ConfigError as e:
        return _error(str(e), type(e).__name__)
    _record_policy(before, after)
    print(done)
    return EXIT_OK


def policy(args: argparse.Namespace) -> int:
    from core.policy.policy import Rule
    from core.proxy import manage

    rules = ("allow", "approve", "deny", "default")
    target = args.target
    if len(target) not in (2, 3) or target[-1] not in rules:
        return _error("usage: signoff policy CLASS RULE, or NAME TOOL RULE"
                      " (RULE: allow, approve, deny or default)")  # fmt: skip
    rule = None if target[-1] == "default" else Rule(target[-1])
    path = paths.config_path()
    try:
        before = configuration.load(path)
        if len(target) == 2:
            if target[0] not in [s.value for s in SideEffect]:
                raise ConfigError(f"{target[0]} is not a side-effect class")
            after = manage.set_class_rule(path, SideEffect(target[0]), rule)
        else:
            after = manage.set_tool(path, target[0], target[1], policy=rule)
    except ConfigError as e:
        return _error(str(e), type(e).__name__)
    recorded = _record_policy(before, after)
    print(f"policy: {' '.join(target[:-1])} -> {target[-1]}"
          f"{'; recorded in the history' if recorded else ' (no change)'}")  # fmt: skip
    return EXIT_OK


def _own_setting(server: str | None, tool: str | None, name: str, text: str) -> int:
    """``settings call_timeout_seconds VALUE --server S [--tool T]``, or
    ``settings result_limit_bytes VALUE --server S``."""
    from core.proxy import manage

    if name not in manage.OWN_SETTINGS or not server or (tool and name != "call_timeout_seconds"):
        return _error("--server sets call_timeout_seconds or result_limit_bytes, --tool (with"
                      " --server) call_timeout_seconds only")  # fmt: skip
    try:
        value = None if text == "default" else _number(name, text)
    except ValueError:
        return _error(f"{name} takes a number, not {text!r}", "ConfigError")
    where = f"{server}/{tool}" if tool else server
    return _apply(lambda p: manage.set_own(p, name, value, server, tool),
                  f"{name} for {where} = {text}")  # fmt: skip


def _number(name: str, text: str) -> int | float:
    value = float(text)
    if name == "result_limit_bytes" or value.is_integer():
        if not value.is_integer():
            raise ValueError(text)
        return int(value)
    return value


def settings(args: argparse.Namespace) -> int:
    from core.proxy import config_commands, config_record, manage

    path = paths.config_path()
    names = (*manage.TIMINGS, "notifications", "result_limit_bytes")
    if args.setting and args.setting[0] in config_commands.WORDS:
        if len(args.setting) > (2 if args.setting[0] == "accept" else 1):
            return _error("usage: signoff settings diff | accept FINGERPRINT | restore")
        return config_commands.run(*args.setting)
    if not args.setting:
        with Store.open(paths.database_path()) as store:
            now = config_record.state(store, path)  # what is in force, whatever the file says
        config = now.config()
        for name in names:
            shown = getattr(config, name)
            print(f"{name} = {configuration.NEVER if shown is None else shown}")
        for side_effect in SideEffect:
            print(f"policy.{side_effect.value} = {config.policy().classes[side_effect].value}")
        if now.changed_outside:
            return _error(now.why(), "ConfigChangedOutside")
        return EXIT_OK
    if len(args.setting) != 2 or args.setting[0] not in names:
        return _error(f"usage: signoff settings NAME VALUE|default (NAME: {', '.join(names)})")
    name, text = args.setting
    if args.server or args.tool:
        return _own_setting(args.server, args.tool, name, text)
    value: Any = None
    if text != "default":
        try:
            words = name == "notifications" or (
                name == "grant_ttl_seconds" and text == configuration.NEVER
            )
            value = text if words else _number(name, text)
        except ValueError:
            return _error(f"{name} takes a number, not {text!r}", "ConfigError")
    try:
        manage.set_setting(path, name, value)
    except ConfigError as e:
        return _error(str(e), type(e).__name__)
    print(f"{name} = {text}")
    return EXIT_OK


def _record_policy(before: configuration.Config, after: configuration.Config) -> bool:
    """Record a change of the rules in the chain, so the history shows when they changed."""
    from core.proxy import manage

    if before.policy().identity() == after.policy().identity():
        return False
    with Store.open(paths.database_path()) as store:
        return manage.record_policy_change(store, before, after, by=f"operator:{getpass.getuser()}")


# --- serving ---------------------------------------------------------------------------------


def proxy(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from core import private_files
    from core.errors import KeyringUnreachable
    from core.proxy import config_record, keyring_reach, remote
    from core.proxy.hostsession import serve

    log_dir = paths.data_dir() / "logs"
    logging.basicConfig(
        stream=private_files.open_log(log_dir / "proxy.log"), level=logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(message)s",
    )  # fmt: skip
    remote.show_urls_in_logs()  # a remote server's URL may carry a key (remote.py rule 7)
    with Store.open(paths.database_path()) as store:
        problem, names = "", list(args.names)
        changed = keyring_reach.another_keyring(store)
        if changed:  # its calls wait (KeyringChanged); the tray shows why (keyring_reach rule 1)
            keyring_reach.record(paths.data_dir(), names, changed)
        try:  # the rules in force are the recorded ones, whatever the file says now
            now = config_record.state(store, paths.config_path())
            config = now.config()
            if now.changed_outside:
                logging.getLogger("signoff.proxy").error("%s", now.why())
                print(f"signoff: {now.why()}", file=sys.stderr)
        except SignoffError as e:
            # Served with no server started (none is trusted) and each call refused saying why.
            problem = f"{e} [{type(e).__name__}]"
            print(f"signoff: no rules in force, every call is refused: {problem}", file=sys.stderr)
            config, names = configuration.Config(), []
            if isinstance(e, KeyringUnreachable):  # the tray shows it (keyring_reach rule 1)
                keyring_reach.record(paths.data_dir(), list(args.names), str(e))
        unknown = [n for n in names if n not in config.servers]
        if unknown:
            return _error(f"no server named {', '.join(unknown)} in {paths.config_path()}")
        try:
            asyncio.run(serve(config, names, store, log_dir=log_dir, hold_seconds=args.hold,
                              config_path=paths.config_path(), rules_problem=problem))  # fmt: skip
        finally:
            keyring_reach.clear(paths.data_dir())
    return EXIT_OK


def _pin(args: argparse.Namespace) -> int:
    from core.proxy.pin_command import pin

    return pin(args)


def _error(message: str, name: str = "UsageError") -> int:
    print(f"signoff: {message} [{name}]", file=sys.stderr)
    return EXIT_ERROR
