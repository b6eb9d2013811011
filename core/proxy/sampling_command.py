"""``signoff servers sampling NAME [on|off]``: whether a server may ask the host's model.

Sampling is off for every server until the operator turns it on here (or writes
``sampling = true`` in its table); the change is saved like every change of the configuration,
and so recorded in the chain as the configuration in force (core/proxy/config_record.py). A
proxy takes it up when its host next starts it; one turned off is refused at once
(core/proxy/asks.py rules 1 and 3).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from core import paths
from core.errors import ConfigError

EXIT_OK, EXIT_ERROR = 0, 2


def register(servers_commands: Any) -> None:
    p = servers_commands.add_parser(
        "sampling",
        help="whether a server may ask the host's model (sampling/createMessage); off by default",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("state", nargs="?", choices=("on", "off"), help="none: say which it is")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from core.proxy import config as configuration
    from core.proxy import manage

    path = paths.config_path()
    try:
        if args.state is None:
            server = configuration.load(path).servers.get(args.name)
            if server is None:
                raise ConfigError(f"no server {args.name}")
            on = server.sampling
        else:
            on = args.state == "on"
            manage.set_sampling(path, args.name, on=on)
    except ConfigError as e:
        print(f"signoff: {e} [{type(e).__name__}]", file=sys.stderr)
        return EXIT_ERROR
    print(f"sampling for {args.name}: {'on' if on else 'off'}")
    return EXIT_OK
