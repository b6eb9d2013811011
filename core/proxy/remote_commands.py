"""The commands for remote servers: ``servers add NAME --url URL [--header 'Name: value']...``
and ``secret set NAME`` (a header's secret, read from standard input, kept in the OS keyring).

Rules:

1. A remote server is added as core/proxy/manage.py adds any (rule 1 there): the whole file
   validated before it is written, a refused URL or header (core/proxy/remote.py) named and
   the file left as it was. ``--replace`` turns a server into a remote one (or changes its URL
   and headers), keeping its tools' settings.
2. ``secret set`` reads the secret from standard input, never from the command line (which
   other users' ``ps`` can read) and never echoed on a terminal; it is written only to the
   keyring, and no message names its value.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core import paths
from core.errors import ConfigError, RemoteConfigRefused, SignoffError
from core.proxy import remote
from core.proxy.config import SERVER_NAME, Config, Editor

EXIT_OK, EXIT_ERROR = 0, 2


def add_options(parser: argparse.ArgumentParser) -> None:
    """``servers add``'s options for a remote server (also read from after NAME: ``wanted``)."""
    parser.add_argument("--url", help="a remote server's address (Streamable HTTP)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a header sent to a remote server; ${VAR} or ${keyring:NAME} for its secret",
    )


def wanted(args: argparse.Namespace) -> bool:
    """Whether ``servers add`` was given a URL (before any ``--``)."""
    before = args.argv[: args.argv.index("--")] if "--" in args.argv else args.argv
    return bool(args.url) or any(a == "--url" or a.startswith("--url=") for a in before)


def servers_add(args: argparse.Namespace) -> int:
    url, headers, replace = args.url, list(args.header), bool(args.replace)
    rest = list(args.argv)
    try:
        while rest:
            option = rest.pop(0)
            name, equals, given = option.partition("=")
            if name in ("--url", "--header") and not equals:
                if not rest:
                    raise ConfigError(f"{name} needs a value")
                given = rest.pop(0)
            if name == "--url":
                url = given
            elif name == "--header":
                headers.append(given)
            elif option == "--replace":
                replace = True
            else:
                raise ConfigError(f"unexpected {option!r}: a remote server has a URL, no command")
        parsed = dict(remote.parse_header(h) for h in headers)
        if len({h.lower() for h in parsed}) != len(headers):
            raise RemoteConfigRefused("a header is given twice")
        add_remote(paths.config_path(), args.name, url, parsed, replace=replace)
    except ConfigError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return EXIT_ERROR
    print(f"{'changed' if replace else 'added'} server {args.name}; next: signoff pin {args.name}")
    return EXIT_OK


def add_remote(
    path: Path, name: str, url: str, headers: Mapping[str, str], *, replace: bool = False
) -> Config:
    """Add a remote server, or with ``replace`` make an existing one remote (rule 1)."""
    import tomlkit

    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"{name!r}: a server name is letters, digits, '-' and '_' (at most 32)")
    remote.check_url(url)
    for header, value in headers.items():
        remote.check_header(header, value)
    editor = Editor(path)
    servers: Any = editor.document.get("servers", {})
    if name in servers and not replace:
        raise ConfigError(f"a server named {name} is already configured")
    table = editor.table("servers", name)
    for key in ("command", "args", "env", "headers"):
        if key in table:
            del table[key]
    table["url"] = url
    if headers:
        inline = tomlkit.inline_table()
        inline.update(headers)
        table["headers"] = inline
    return editor.save()


# --- signoff secret set NAME ---------------------------------------------------------------


def register(commands: Any) -> None:
    secret = commands.add_parser("secret", help="keep a remote server's secret in the OS keyring")
    actions = secret.add_subparsers(dest="secret_command", metavar="ACTION", required=True)
    p = actions.add_parser(
        "set",
        help="read a secret from standard input (never echoed) and keep it in the OS keyring,"
        " for a header's or a URL query value's ${keyring:NAME}",
    )
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=secret_set)


def secret_set(args: argparse.Namespace) -> int:
    if sys.stdin.isatty():
        import getpass

        value = getpass.getpass(f"secret {args.name} (not shown): ")
    else:
        value = sys.stdin.readline().rstrip("\r\n")
    try:
        remote.store_secret(args.name, value)
    except SignoffError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # the keyring's own failures, in words
        from core import keyring_calls

        print(f"signoff: the OS keyring refused the secret: {keyring_calls.describe(e)}"
              " [KeyringError]", file=sys.stderr)  # fmt: skip
        return EXIT_ERROR
    print(f"kept secret {args.name} in the OS keyring; use it as ${{keyring:{args.name}}}")
    return EXIT_OK
