"""``signoff servers catalog NAME [--raw]``: a server's prompts and resource templates as it
lists them now, each with its pin state (core/proxy/catalog.py rule 3); nothing is changed.

``--raw`` prints one JSON line for Settings (app/settings_catalog.py): by the configuration
table the pins go in (``prompt_pins``, ``template_pins``), the listing's raw answers, each in
base64, so that the window reads them with ``catalog.read``, the same code the proxy and
``signoff pin`` read them with, and pins exactly the bytes the server sent. A kind the server
did not declare is absent; one it declared and failed to list is under ``errors``, in words.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from core import paths
from core.errors import ConfigError, SignoffError, UpstreamError
from core.proxy.config import ServerConfig

EXIT_OK, EXIT_ERROR = 0, 2
# Each kind: what the server declares, the method that lists it, its pin table.
KINDS = (("prompts", "prompts/list", "prompt_pins"),
         ("resources", "resources/templates/list", "template_pins"))  # fmt: skip


def register(servers_commands: Any) -> None:
    p = servers_commands.add_parser(
        "catalog", help="list a server's prompts and resource templates with their pin states"
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--raw", action="store_true", help="one JSON line of the raw listings")
    p.add_argument("--timeout", type=float, metavar="SECONDS")
    p.set_defaults(func=run)


async def raw_listings(
    server: ServerConfig, timeout: float
) -> tuple[dict[str, list[bytes]], dict[str, str]]:
    """The server's raw prompt and template listings, every page, by pin table; and why a kind
    it declared could not be listed."""
    from core.proxy.asks import listing as greeting
    from core.proxy.http_upstream import upstream_for
    from core.proxy.resources import listed_pages
    from core.proxy.upstream import no_roots

    log = paths.data_dir() / "logs" / f"{server.name}.log"
    upstream = upstream_for(server, log, on_message=no_roots)
    await upstream.start(timeout, greeting(server))
    found: dict[str, list[bytes]] = {}
    errors: dict[str, str] = {}
    try:
        for kind, method, table in KINDS:
            if kind not in upstream.capabilities:
                continue
            try:
                found[table] = await listed_pages(upstream, method, timeout)
            except UpstreamError as e:
                errors[table] = str(e)
    finally:
        await upstream.close()
    return found, errors


def run(args: argparse.Namespace) -> int:
    import asyncio

    from core.proxy import catalog
    from core.proxy import config as configuration
    from core.proxy.servers import START_TIMEOUT

    try:
        server = configuration.load(paths.config_path()).servers.get(args.name)
        if server is None:
            raise ConfigError(f"no server {args.name}")
        timeout = START_TIMEOUT if args.timeout is None else args.timeout
        found, errors = asyncio.run(raw_listings(server, timeout))
    except SignoffError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return EXIT_ERROR
    if args.raw:
        line = {k: [base64.b64encode(p).decode() for p in pages] for k, pages in found.items()}
        print(json.dumps({**line, "errors": errors}))
        return EXIT_OK
    for what in (catalog.PROMPTS, catalog.TEMPLATES):
        kind, table = what[0], what[2]
        if table in errors:
            print(f"{kind}: not listed: {errors[table]}")
        if table not in found:
            continue
        try:
            listed = catalog.read(found[table], what)
        except SignoffError as e:
            print(f"{kind}: refused: {e} [{type(e).__name__}]")
            continue
        pins = getattr(server, table)
        for item in listed.items:
            print(f"{kind} {item.key}: {catalog.status(item, pins)}")
        for key, why in listed.dropped:
            print(f"{kind} {key}: dropped: {why}")
    return EXIT_OK
