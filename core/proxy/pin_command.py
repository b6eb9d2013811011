"""``signoff pin NAME``: a server's tools and instructions, what changed since they were
pinned, and pinning them (``--accept``).

Each tool is shown with its state (core/proxy/pins.py), a changed one with a diff against its
text as pinned (core/proxy/pindiff.py), and so are the server's instructions
(core/proxy/instructions.py). ``--accept`` pins the tools listed now and, unless ``--tool``
names one, the instructions sent now.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from core import paths
from core.errors import SignoffError
from core.marks import visible
from core.proxy import catalog, instructions, manage, pindiff, pinstore
from core.proxy import config as configuration
from core.proxy.config import ServerConfig
from core.proxy.pins import REPIN_TO_FORWARD, Listing, ToolState, evaluate, read_listing
from core.proxy.servers import START_TIMEOUT

EXIT_OK, EXIT_ERROR = 0, 2


Diff = pindiff.ToolDiff | pindiff.InstructionsDiff


def pin(args: argparse.Namespace) -> int:
    config = configuration.load(paths.config_path())
    server = config.servers.get(args.name)
    if server is None:
        return _error(f"no server {args.name}; add it with signoff servers add")
    listing, handshake, listed = asyncio.run(_listing(server))
    tools = [t for t in listing.tools if args.tool in (None, t.name)]
    if args.tool and not tools:
        return _error(f"server {args.name} lists no tool {args.tool}")
    pins = manage.pins_dir(paths.config_path())
    try:
        if args.accept:
            # The instructions are pinned with the server's tools, not with one of them.
            text = instructions.evaluate(handshake, None).text if args.tool is None else None
            config = manage.pin(paths.config_path(), args.name, tools, instructions=text)
            for kind, items in listed.items() if args.tool is None else ():  # catalog.py rule 3
                config = manage.pin_catalog(paths.config_path(), args.name, kind, items.items)
            server = config.servers[args.name]
        # A changed tool is shown against its text as pinned, when that text was kept; so is a
        # tool pinned before titles and output schemas were, with what re-pinning would add.
        changes: dict[str, pindiff.ToolDiff] = {}
        for tool in tools:
            pinned = server.tools.get(tool.name)
            if pinned is not None and pinned.pin not in (None, tool.pin):
                changes[tool.name] = pindiff.diff(pinstore.kept(pins, pinned.pin), tool)
        told = instructions.evaluate(handshake, server.instructions_pin)
        reworded = None
        if told.status == instructions.CHANGED and told.text and server.instructions_pin:
            old = pinstore.kept_instructions(pins, server.instructions_pin)
            reworded = pindiff.instructions_diff(args.name, old, told.text)
        others = {kind: [_item_row(pins, i, getattr(server, kind)) for i in items.items]
                  for kind, items in listed.items()}  # fmt: skip
    except (SignoffError, OSError) as e:
        return _error(str(e), type(e).__name__)
    rows = [_tool_row(evaluate(t, server.tools.get(t.name)), changes.get(t.name)) for t in tools]
    shown = _instructions_row(told, reworded)
    if args.json:
        print(json.dumps({"server": args.name, "set_hash": listing.set_hash, "tools": rows,
                          "instructions": shown, **others,
                          "dropped": [list(d) for d in listing.dropped]}))  # fmt: skip
        return EXIT_OK
    short = {r["tool"] for r in rows if r["repin_to_forward"]}
    for change in changes.values():
        if change.name in short:
            print(f"{change.name} was pinned before titles and output schemas were; pinning it"
                  " again forwards what it lists now:")  # fmt: skip
        else:
            print(f"{change.name} changed since it was pinned. {change.summary()}.")
        _print_diff(change)
    if reworded is not None:
        print(f"The instructions of {args.name} changed since they were pinned."
              f" {reworded.summary()}.")  # fmt: skip
        _print_diff(reworded)
    for row in rows:
        _print_tool(row)
    if shown is not None:
        _print_instructions(shown)
    for kind, rows_of_kind in others.items():
        for item in rows_of_kind:  # a prompt or template is shown unless pinned as it is
            print(f"{kind.split('_')[0]} {visible(item['key'])}: {item['status']}")
            if item["diff"]:
                print(visible(item["diff"]))
            elif item["status"] != "pinned":
                print(f"    {visible(item['text'])}")
    for what, why in listing.dropped:
        print(f"dropped {what}: {why}")
    waiting = any(r["status"] != "pinned" or r["repin_to_forward"] for r in rows) or any(
        i["status"] != "pinned" for items in others.values() for i in items
    )
    if not args.accept and (waiting or told.status in (instructions.NEW, instructions.CHANGED)):
        print(f"review the descriptions, then: signoff pin {args.name} --accept")
    poisoned = [c.name for c in changes.values() if c.reworded and c.name not in short]
    if poisoned:
        print(f"warning: the description or title of {', '.join(poisoned)} was reworded since"
              " it was pinned; a reworded description is how tool poisoning works: read it"
              " before accepting")  # fmt: skip
    if reworded is not None and reworded.reworded:
        print(f"warning: the instructions of {args.name} were reworded since they were pinned;"
              " a model reads them as it reads a tool's description: read them before"
              " accepting")  # fmt: skip
    return EXIT_OK


def _tool_row(state: ToolState, change: pindiff.ToolDiff | None) -> dict[str, Any]:
    tool = state.tool
    return {
        "tool": tool.name, "status": state.status, "pin": tool.pin,
        "class": state.side_effect.value if state.side_effect else None,
        "annotations": tool.annotations, "available": state.available,
        "reason": state.reason, "conflict": state.conflict, "description": tool.description,
        "input_schema": tool.input_schema, "title": tool.title,
        "output_schema": tool.output_schema, "repin_to_forward": state.repin_to_forward,
        "change": change.summary() if change else None,
        "diff": change.unified() if change and change.kept else None,
    }  # fmt: skip


def _item_row(pins: Path, item: catalog.Item, pinned: dict[str, str]) -> dict[str, Any]:
    """A prompt or template for ``signoff pin``: a changed one with a diff against its text as
    pinned, when that text was kept (core/proxy/pinstore.py rule 6)."""
    status, was = catalog.status(item, pinned), pinned.get(item.key)
    old = pinstore.kept_item(pins, was) if status == "changed" and was else None
    diff = "" if old is None else "".join(difflib.unified_diff(
        _lines(old), _lines(item.raw), "pinned", "now"))  # fmt: skip
    return {"key": item.key, "status": status, "pin": item.pin, "text": item.raw.decode(),
            "diff": diff or None}  # fmt: skip


def _lines(raw: bytes) -> list[str]:
    text = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    return [line + "\n" for line in text.split("\n")]


def _instructions_row(
    told: instructions.Instructions, change: pindiff.InstructionsDiff | None
) -> dict[str, Any] | None:
    """The server's instructions for ``signoff pin``: None when it sends none."""
    if told.status == instructions.NONE:
        return None
    return {
        "status": told.status, "pin": told.pin, "text": told.text, "reason": told.reason,
        "forwarded": told.forwarded,
        "change": change.summary() if change else None,
        "diff": change.unified() if change and change.kept else None,
    }  # fmt: skip


def _print_diff(change: Diff) -> None:
    if not change.kept:  # the text as it is now, whole, to be read
        for part, _, now in change.parts():
            print(f"{part} now:\n{now}")
    elif change.unified():
        print(change.unified())
    print()


def _print_tool(row: dict[str, Any]) -> None:
    marks = ", ".join(f"{k}={v}" for k, v in row["annotations"].items() if k.endswith("Hint"))
    usable = "available" if row["available"] else f"unavailable: {row['reason']}"
    if row["repin_to_forward"]:
        usable += f"; {REPIN_TO_FORWARD}"
    print(f"{row['tool']}: {row['status']}, class {row['class'] or '-'}"
          f"{f', annotations {marks}' if marks else ''}; {usable}")  # fmt: skip
    if row["status"] == "new":  # what the operator is asked to pin: the whole text
        if row["title"] is not None:
            print(f"    title: {visible(row['title'])}")
        for line in visible(row["description"] or "(no description)").splitlines():
            print(f"    {line}")


def _print_instructions(shown: dict[str, Any]) -> None:
    status = shown["status"]
    if status == instructions.PINNED:
        print("instructions: pinned, forwarded to hosts")
    elif status == instructions.REFUSED:
        print(f"instructions: refused, never forwarded: {shown['reason']}")
    else:
        print(f"instructions: {status}, withheld from hosts until pinned")
        if status == instructions.NEW:  # the whole text, as for a new tool
            for line in visible(shown["text"]).split("\n"):
                print(f"    {line}")


async def _listing(
    server: ServerConfig,
) -> tuple[Listing, dict[str, Any], dict[str, catalog.Catalog]]:
    """The server's tools, its ``initialize`` result (where its instructions are), and its
    prompts and templates (core/proxy/resources.py ``catalogs``)."""
    from core.proxy.asks import listing as greeting
    from core.proxy.http_upstream import upstream_for
    from core.proxy.resources import catalogs
    from core.proxy.upstream import no_roots

    log = paths.data_dir() / "logs" / f"{server.name}.log"
    upstream = upstream_for(server, log, on_message=no_roots)
    await upstream.start(START_TIMEOUT, greeting(server))
    try:
        listing = read_listing(await upstream.list_tools(START_TIMEOUT))
        return listing, upstream.initialize_result, await catalogs(upstream, START_TIMEOUT)
    finally:
        await upstream.close()


def _error(message: str, name: str = "UsageError") -> int:
    print(f"signoff: {message} [{name}]", file=sys.stderr)
    return EXIT_ERROR


async def raw_pages(server: ServerConfig, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
    """The server's ``initialize`` result and its raw ``tools/list`` answers."""
    from core import private_files
    from core.proxy.asks import listing as greeting
    from core.proxy.http_upstream import upstream_for
    from core.proxy.upstream import no_roots

    log_dir = paths.data_dir() / "logs"
    private_files.make_dir(log_dir)
    upstream = upstream_for(server, log_dir / f"{server.name}.log", on_message=no_roots)
    await upstream.start(timeout, greeting(server))
    try:
        return upstream.initialize_result, await upstream.list_tools(timeout)
    finally:
        await upstream.close()
