"""``signoff demo``'s command line. The demo itself (core/demo/run.py) is imported when it
runs: it needs asyncio and subprocesses, which ``signoff --help`` does not (decision 0033)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    p = commands.add_parser(
        "demo",
        help="see Signoff at work on a demo notes server, in a throw-away home",
        description="Sets up a small notes server in a fresh temporary home (your own"
        " configuration and database are not touched), starts the Signoff app on it, and plays"
        " an agent through `signoff proxy`: a read runs, a write waits for your approval, a"
        " delete (destructive) asks you in the dialog.",
    )
    p.add_argument("--no-app", action="store_true", help="do not start the tray app")
    p.add_argument(
        "--auto-approve",
        action="store_true",
        help="approve the requests from the demo itself (no desktop needed)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for each of your decisions (default: 120)",
    )
    p.add_argument(
        "--home",
        type=Path,
        metavar="DIR",
        help="use DIR (absent or empty) as the demo's home instead of a temporary directory",
    )
    p.set_defaults(func=demo)


def demo(args: argparse.Namespace) -> int:
    from core.demo.run import Options, run

    return run(Options(not args.no_app, args.auto_approve, args.wait, args.home))
