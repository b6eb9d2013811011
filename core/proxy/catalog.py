"""A server's prompts and resource templates, pinned over the raw bytes it sent them with, and
the configuration that turns them on. Pure code (decision 0055).

Rules:

1. A prompt (name, title, description, argument list) and a resource template (its URI
   template, name, description, MIME type) are model input, as a tool's description is: each is
   pinned over the raw bytes of the whole object as the server sent it (SHA-256 over exactly
   those bytes), and the host is offered that object as sent, whole, so that nothing reaches it
   that the operator did not pin. A prompt is known by its ``name``, a template by its
   ``uriTemplate``.
2. A listing is read exactly (core/proxy/rawjson.py). An answer whose ``result.prompts`` (or
   ``result.resourceTemplates``) is not an array, a listing past ``pins.MAX_LISTING_BYTES`` or
   ``MAX_ITEMS``, or one that names an item twice, is refused whole (``ListingRefused``). An
   item that is not an object, has no string key, names a member twice, or whose key holds a
   character a reader cannot see is dropped and reported; the others stay.
3. An item is offered only when the configuration names its pin: a new one, or one changed
   since it was pinned, is not offered until the operator pins it again (``signoff pin NAME
   --accept``).
4. The configuration, per server: ``prompts`` and ``resources``, true or false (default false:
   nothing but tools is offered until the operator turns it on), and the pins in the tables
   ``prompt_pins`` (by prompt name) and ``template_pins`` (by URI template).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from core.errors import ListingRefused
from core.proxy import rawjson

MAX_ITEMS = 1024
MAX_LISTING_BYTES = 4 * 1024 * 1024  # as core/proxy/pins.py's for tools

PROMPTS = ("prompts", "name", "prompt_pins")  # result member, key, configuration table
TEMPLATES = ("resourceTemplates", "uriTemplate", "template_pins")
Kind = tuple[str, str, str]
# The gate's tool for a prompt's get and a resource's read, by the kind a server must offer
# (core/proxy/resources.py rule 3): the operator's policy and rules name them.
GATED = {"prompts/get": "prompts", "resources/read": "resources"}

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_PIN = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Item:
    """One prompt or template as listed: its ``key`` (a name or a URI template), its pin over
    ``raw`` (the object's bytes as sent) and the parsed object."""

    key: str
    pin: str
    raw: bytes = field(repr=False)
    value: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Catalog:
    items: tuple[Item, ...]
    dropped: tuple[tuple[str, str], ...]  # (what, why) for each item left out


def read(pages: list[bytes], kind: Kind) -> Catalog:
    """The items of the raw listing answers ``pages`` (rules 1 and 2)."""
    member, key, _ = kind
    total = sum(len(p) for p in pages)
    if total > MAX_LISTING_BYTES:
        raise ListingRefused(f"the {member} listing is {total} bytes, over {MAX_LISTING_BYTES}")
    items: list[Item] = []
    dropped: list[tuple[str, str]] = []
    for page in pages:
        try:
            root = rawjson.spans(page)
        except ValueError as e:
            raise ListingRefused(f"the {member} listing cannot be read exactly: {e}") from None
        result = root.members.get("result")
        listed = None if result is None else result.members.get(member)
        if listed is None or listed.raw(page)[:1] != b"[":
            raise ListingRefused(f"a listing whose result.{member} is not an array")
        for node in listed.items:
            item, why = _item(page, node, key)
            if item is None:
                dropped.append(why)
            else:
                items.append(item)
    if len(items) > MAX_ITEMS:
        raise ListingRefused(f"the listing has {len(items)} {member}, over {MAX_ITEMS}")
    keys = [i.key for i in items]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ListingRefused(f"the {member} listing names {', '.join(twice)} more than once")
    return Catalog(tuple(items), tuple(dropped))


def _item(page: bytes, node: rawjson.Node, key: str) -> tuple[Item | None, tuple[str, str]]:
    raw = node.raw(page)
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None, ("unreadable", "not JSON")
    name = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, dict) or not isinstance(name, str) or not name:
        return None, ("unnamed", f"an item must be an object with a {key}")
    hidden = next((c for c in name if unicodedata.category(c) in _HIDDEN), None)
    if hidden is not None:
        return None, (
            ascii(name),
            f"its {key} holds U+{ord(hidden):04X}, which a reader cannot see",
        )
    repeated = rawjson.repeated_keys(node)
    if repeated:
        return None, (name, f"names the key {repeated[0]!r} twice")
    return Item(name, hashlib.sha256(raw).hexdigest(), raw, value), ("", "")


def status(item: Item, pins: dict[str, str]) -> str:
    """new, pinned or changed (rule 3)."""
    pinned = pins.get(item.key)
    return "new" if pinned is None else "pinned" if pinned == item.pin else "changed"


def offered(catalog: Catalog, pins: dict[str, str]) -> list[Item]:
    """The items offered: pinned and unchanged (rule 3)."""
    return [i for i in catalog.items if status(i, pins) == "pinned"]


def server_keys(table: dict[str, Any], key: tuple[str, ...], where: Any) -> dict[str, Any]:
    """A server's ``prompts``, ``resources``, ``prompt_pins`` and ``template_pins`` (rule 4);
    ``where`` makes the configuration's errors (core/proxy/config.py)."""
    found: dict[str, Any] = {}
    for flag in ("prompts", "resources"):
        value = table.get(flag, False)
        if not isinstance(value, bool):
            raise where.error((*key, flag), f"{value!r} is not true or false")
        found[flag] = value
    for name in ("prompt_pins", "template_pins"):
        pins = table.get(name, {})
        if not isinstance(pins, dict):
            raise where.error((*key, name), "must be a table of pins")
        for item, pin in pins.items():
            if not isinstance(pin, str) or not _PIN.fullmatch(pin):
                raise where.error((*key, name, item), "a pin is 64 lowercase hex digits")
        found[name] = dict(pins)
    return found


SERVER_KEYS = frozenset({"prompts", "resources", "prompt_pins", "template_pins"})
