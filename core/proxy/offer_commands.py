"""``signoff servers set NAME --prompts on|off --resources on|off``: whether a server's prompts,
and its resources and resource templates, are offered to hosts (core/proxy/catalog.py rule 4;
both off until the operator turns them on). A change is saved, and recorded, as every change of
the configuration is (core/proxy/config_record.py)."""

from __future__ import annotations

import argparse
from typing import Any


def register(servers_commands: Any) -> None:
    p = servers_commands.add_parser(
        "set", help="offer a server's prompts or resources to hosts (both off until turned on)"
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--prompts", choices=["on", "off"])
    p.add_argument("--resources", choices=["on", "off"])
    p.set_defaults(func=servers_set)


def servers_set(args: argparse.Namespace) -> int:
    from core.proxy import manage
    from core.proxy.commands import _apply, _error

    offer = {k: None if v is None else v == "on"
             for k, v in (("prompts", args.prompts), ("resources", args.resources))}  # fmt: skip
    if all(v is None for v in offer.values()):
        return _error("say what to set: --prompts on|off, --resources on|off")
    said = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in offer.items() if v is not None)
    return _apply(lambda p: manage.set_offer(p, args.name, **offer), f"{args.name}: {said}")
