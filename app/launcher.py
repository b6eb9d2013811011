"""The ``signoff`` console script.

A subcommand (``signoff verify``, later ``signoff proxy``...) runs the terminal commands in
``core.cli`` and imports no Qt, so a host launching ``signoff proxy`` pays nothing for the app.
With no subcommand it starts the tray app.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from core import cli


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        from app.main import run  # Qt only here: `signoff proxy` never loads it

        return run()
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
