"""Pinning and classifying an upstream server's tools. Pure code.

Rules:

1. A tool's pin is SHA-256 over the raw bytes of what a model or a person reads of it, as the
   server sent them: ``[<name>,<description or null>,<inputSchema>]``, and when it has a title
   or an output schema (present and not null) ``[<name>,<description or null>,<inputSchema>,
   <title or null>,<outputSchema or null>]`` (decision 0031). Those bytes are the tool's ``raw``
   text, kept so that a later change can be shown (``core/proxy/pinstore.py``). The set's hash
   is SHA-256 over the sorted ``name:pin`` lines.
2. A tool pinned over its first three members alone (``short_pin``: every pin taken before
   titles and output schemas were pinned) stays pinned, and is offered without its title and
   output schema until the operator pins it again: no outage on upgrade, and nothing unpinned
   reaches the host.
3. A listing that names a tool twice, has more than ``MAX_TOOLS`` tools or more than
   ``MAX_LISTING_BYTES`` bytes, or nests deeper than ``rawjson.MAX_DEPTH`` levels is refused
   whole (``ListingRefused``), and so is an answer whose ``result.tools`` is not an array.
   A single tool that is malformed (not an object, no name, a key twice, a shape the SDK
   rejects, a name holding a character a reader cannot see, a lone UTF-16 surrogate in what is
   kept of it) is dropped and reported; the others stay.
4. A tool is available only when it is pinned and unchanged, classified, its annotations do not
   contradict its class, its fixed and denied parameters are sound, and its schema compiles.
   Otherwise it is unavailable, with the reason.
5. Annotations may refuse a class, never relax one: an explicit ``destructiveHint: true`` or
   ``readOnlyHint: false`` on a ``read_only`` tool, or ``destructiveHint: true`` on a
   ``local_mutation`` / ``remote_mutation`` tool, is a conflict until the operator reclassifies
   the tool or overrules the annotations. Defaults are not evidence; only explicit values count.
6. Annotations, ``execution`` and ``_meta`` are outside the pin: they are forwarded as sent,
   and annotations can only take a tool away (rule 5). ``icons`` are not forwarded: they are
   URLs or images a host fetches and shows, which Signoff would then have to pin and vouch for.
7. A fixed or denied parameter must be a top-level property that nothing else in the schema
   mentions (its own ``required`` entry aside); otherwise the tool is refused rather than partly
   rewritten. Both are removed from the schema the host sees; fixed values are set by the proxy.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from core.errors import ListingRefused, SchemaRefused
from core.proxy import rawjson
from core.proxy.config import ToolConfig
from core.tools import SideEffect, compile_schema

MAX_TOOLS = 512
MAX_LISTING_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ListedTool:
    """One tool as a server listed it, with its pin over the raw bytes (``raw``). Every value is
    parsed from those bytes; an optional member the server did not send, or sent as null, is
    None (``description``: "", ``annotations``: {}, ``sent`` says whether they were sent)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    pin: str
    raw: bytes = field(repr=False)  # what the pin is taken over: sha256(raw) == pin
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    execution: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None  # the tool's ``_meta``
    short_pin: str = ""  # over [name, description, inputSchema] alone (rule 2); pin when equal
    sent: frozenset[str] = frozenset()  # the optional members sent, not null, by their JSON key


@dataclass(frozen=True)
class Listing:
    tools: tuple[ListedTool, ...]
    dropped: tuple[tuple[str, str], ...]  # (what, why) for each tool left out
    set_hash: str


@dataclass(frozen=True)
class ToolState:
    """What the proxy does with a listed tool under the operator's configuration."""

    tool: ListedTool
    status: str  # new / pinned / changed
    side_effect: SideEffect | None
    available: bool
    reason: str  # why it is unavailable ("" when available)
    conflict: str = ""  # an annotation that contradicts the class
    exposed_schema: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    # Pinned over its short text (rule 2): offered without its title and output schema.
    repin_to_forward: bool = False

    @property
    def title(self) -> str | None:
        """The title the host is shown: the tool's, unless its pin does not cover it."""
        return None if self.repin_to_forward else self.tool.title

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The output schema the host is shown: the tool's, unless its pin does not cover it."""
        return None if self.repin_to_forward else self.tool.output_schema

    @property
    def pinned_as(self) -> str:
        """The pin the configuration names for what is offered: ``tool.pin``, or its
        ``short_pin`` when it is offered without its title and output schema."""
        return self.tool.short_pin if self.repin_to_forward else self.tool.pin


REPIN_TO_FORWARD = "re-pin to forward its title and output schema"


def pinned_text(
    name: bytes,
    description: bytes | None,
    schema: bytes,
    title: bytes | None = None,
    output_schema: bytes | None = None,
) -> bytes:
    """The bytes a pin is taken over (rule 1): ``[<name>,<description or null>,<inputSchema>]``,
    or with ``,<title or null>,<outputSchema or null>`` after it when either is given."""
    text = b"[" + name + b"," + (description or b"null") + b"," + schema
    if title is not None or output_schema is not None:
        text += b"," + (title or b"null") + b"," + (output_schema or b"null")
    return text + b"]"


def pin_of(
    name: bytes,
    description: bytes | None,
    schema: bytes,
    title: bytes | None = None,
    output_schema: bytes | None = None,
) -> str:
    return hashlib.sha256(pinned_text(name, description, schema, title, output_schema)).hexdigest()


def read_listing(pages: list[bytes]) -> Listing:
    """Tools from the raw ``tools/list`` response lines, pinned over their raw bytes."""
    total = sum(len(p) for p in pages)
    if total > MAX_LISTING_BYTES:
        raise ListingRefused(f"the listing is {total} bytes, over the {MAX_LISTING_BYTES} allowed")
    tools: list[ListedTool] = []
    dropped: list[tuple[str, str]] = []
    for page in pages:
        try:
            root = rawjson.spans(page)
        except ValueError as e:
            raise ListingRefused(f"the listing cannot be read exactly: {e}") from None
        result = root.members.get("result")
        listed = None if result is None else result.members.get("tools")
        if listed is None:
            raise ListingRefused("a tools/list answer without result.tools")
        if listed.raw(page)[:1] != b"[":
            raise ListingRefused("a tools/list answer whose result.tools is not an array")
        for n, node in enumerate(listed.items):
            tool, why = _tool(page, node)
            if tool is None:
                dropped.append((f"tool #{len(tools) + len(dropped) + 1} ({why[0]})", why[1]))
            else:
                tools.append(tool)
            del n
    if len(tools) > MAX_TOOLS:
        raise ListingRefused(f"the listing has {len(tools)} tools, over the {MAX_TOOLS} allowed")
    names = [t.name for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ListingRefused(f"the listing names {', '.join(twice)} more than once")
    lines = "".join(f"{t.name}:{t.pin}\n" for t in sorted(tools, key=lambda t: t.name))
    return Listing(tuple(tools), tuple(dropped), hashlib.sha256(lines.encode()).hexdigest())


def _tool(page: bytes, node: rawjson.Node) -> tuple[ListedTool | None, tuple[str, str]]:
    raw = node.raw(page)
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None, ("unreadable", "not JSON")
    name = value.get("name") if isinstance(value, dict) else None
    label = name if isinstance(name, str) else "unnamed"
    if not isinstance(value, dict) or not isinstance(name, str) or not name:
        return None, (label, "a tool must be an object with a name")
    hidden = next((c for c in name if unicodedata.category(c) in _HIDDEN), None)
    if hidden is not None:
        # A name is what the operator reads, types and classifies: it must look like itself.
        return None, (ascii(name), f"its name holds U+{ord(hidden):04X}, which a reader cannot see")
    if _lone_surrogate([value.get(key) for key in ("description", *_FORWARDED)]):
        return None, (label, "it holds a lone UTF-16 surrogate, which has no UTF-8 form")
    repeated = rawjson.repeated_keys(node)
    if repeated:
        return None, (label, f"names the key {repeated[0]!r} twice")
    hints = value.get("annotations")
    if isinstance(hints, dict):
        for key, hint in hints.items():
            if key.endswith("Hint") and not isinstance(hint, bool):
                return None, (label, f"annotation {key} is {hint!r}, not true or false")
    refused = _sdk_refuses(value)
    if refused:
        return None, (label, f"not a valid MCP tool: {refused}")
    schema = value.get("inputSchema")
    description = value.get("description", "")
    if not isinstance(schema, dict) or not isinstance(description, str | None):
        return None, (label, "no input schema object")
    members = node.members

    def member(key: str) -> bytes | None:
        """The member's raw bytes, None when it was not sent or was sent as null."""
        return members[key].raw(page) if value.get(key) is not None else None

    first = (
        members["name"].raw(page),
        members["description"].raw(page) if "description" in members else None,
        members["inputSchema"].raw(page),
    )
    short = pinned_text(*first)
    text = pinned_text(*first, member("title"), member("outputSchema"))
    annotations = value.get("annotations") or {}
    return ListedTool(
        name=name,
        description=description or "",
        input_schema=schema,
        annotations=annotations if isinstance(annotations, dict) else {},
        pin=hashlib.sha256(text).hexdigest(),
        raw=text,
        title=value.get("title"),
        output_schema=value.get("outputSchema"),
        execution=value.get("execution"),
        meta=value.get("_meta"),
        short_pin=hashlib.sha256(short).hexdigest(),
        sent=frozenset(k for k in ("description", *_FORWARDED) if value.get(k) is not None),
    ), ("", "")


def _sdk_refuses(value: dict[str, Any]) -> str:
    """Why the mcp SDK's model of a tool refuses ``value`` (what a host built on it would
    refuse), or "". A tool of the plain shape every server sends (``_plainly_valid``) is one
    the model takes; any other is handed to the model itself, imported then: the SDK's types
    take a quarter of a second of CPU to import, which a proxy's start-up would pay before its
    first listing (decision 0033)."""
    if _plainly_valid(value):
        return ""
    import mcp_types
    from pydantic import ValidationError

    try:
        mcp_types.Tool.model_validate(value)
    except ValidationError as e:
        return str(e.errors()[0]["msg"])
    return ""


# The members of a tool, and of its annotations and execution, by their wire names. A key not
# here (an unknown member, or a field's Python name, which the model also reads) is left to the
# model; so is ``icons``.
_PLAIN_MEMBERS = frozenset(
    {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution",
     "_meta"}
)  # fmt: skip
_HINTS = frozenset({"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"})
_TASK_SUPPORT = (None, "forbidden", "optional", "required")


def _plainly_valid(value: dict[str, Any]) -> bool:
    """Whether ``value`` has the plain shape that the SDK's ``Tool`` model takes, checked
    strictly (true or false where the model would also read "true" or 1): a ``True`` here is
    a tool the model accepts; a ``False`` says nothing, and the model decides. A test holds the
    two together (tests/proxy/test_pins.py)."""
    if not value.keys() <= _PLAIN_MEMBERS or not isinstance(value.get("name"), str):
        return False
    if not isinstance(value.get("inputSchema"), dict):
        return False
    if not all(_is(value.get(k), str) for k in ("title", "description")):
        return False
    if not all(_is(value.get(k), dict) for k in ("outputSchema", "_meta")):
        return False
    annotations = value.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict) or not annotations.keys() <= _HINTS | {"title"}:
            return False
        if not _is(annotations.get("title"), str):
            return False
        if not all(type(annotations.get(h)) in (bool, type(None)) for h in _HINTS):
            return False
    execution = value.get("execution")
    if execution is not None:
        if not isinstance(execution, dict) or not execution.keys() <= {"taskSupport"}:
            return False
        if execution.get("taskSupport") not in _TASK_SUPPORT:
            return False
    return True


def _is(member: Any, kind: type) -> bool:
    """An optional member: absent or null, or of ``kind``."""
    return member is None or isinstance(member, kind)


# Forwarded to the host as sent beside the name, description and input schema (rules 1 and 6).
_FORWARDED = ("title", "outputSchema", "annotations", "execution", "_meta")

# Control and format characters, lone surrogates, line and paragraph separators: what
# core/proxy/pindiff.py shows as ⟨U+XXXX⟩ in a description is refused in a name.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if _SURROGATE.search(current):
                return True
        elif isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            stack.extend(current.keys())
            stack.extend(current.values())
    return False


def conflict(side_effect: SideEffect, annotations: dict[str, Any]) -> str:
    """The annotation that contradicts ``side_effect``, described for the operator, or ""."""
    destructive = annotations.get("destructiveHint") is True
    writes = annotations.get("readOnlyHint") is False
    if side_effect is SideEffect.READ_ONLY and (destructive or writes):
        said = "destructive" if destructive else "not read-only"
        return f"the server says this tool is {said}; you classified it read_only"
    if side_effect in (SideEffect.LOCAL_MUTATION, SideEffect.REMOTE_MUTATION) and destructive:
        return f"the server says this tool is destructive; you classified it {side_effect}"
    return ""


def evaluate(tool: ListedTool, config: ToolConfig | None) -> ToolState:
    """The tool's state under the operator's configuration (None: never configured)."""
    cfg = config or ToolConfig()
    # A pin over the short text still holds (rule 2): what it does not cover is not offered.
    short = cfg.pin is not None and cfg.pin != tool.pin and cfg.pin == tool.short_pin
    status = "new" if cfg.pin is None else ("pinned" if cfg.pin == tool.pin or short else "changed")
    side_effect = cfg.side_effect

    def unavailable(reason: str, clash: str = "") -> ToolState:
        return ToolState(tool, status, side_effect, False, reason, clash, repin_to_forward=short)

    if status == "new":
        return unavailable("not pinned: run `signoff pin` to review and pin it")
    if status == "changed":
        return unavailable("changed since it was pinned: review it with `signoff pin`")
    if side_effect is None:
        return unavailable("not classified: run `signoff classify`")
    clash = conflict(side_effect, tool.annotations)
    if clash and not cfg.overrule_annotations:
        return unavailable(f"annotation conflict: {clash}", clash)
    try:
        exposed = rewrite_schema(tool.input_schema, [*cfg.fixed, *cfg.deny])
        compile_schema(tool.name, tool.input_schema)
    except SchemaRefused as e:
        return unavailable(str(e))
    return ToolState(
        tool, status, side_effect, True, "", clash, exposed, dict(cfg.fixed), repin_to_forward=short
    )


def rewrite_schema(schema: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The schema without ``names``, each of which must be a property used nowhere else."""
    if not names:
        return schema
    names = list(dict.fromkeys(names))  # a name given twice is removed once
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        raise SchemaRefused("fixed or denied parameters need a schema with properties")
    for name in names:
        if name not in properties:
            raise SchemaRefused(f"{name!r} is not a top-level property of the schema")
        rest = copy.deepcopy(schema)
        del rest["properties"][name]
        if isinstance(rest.get("required"), list):
            rest["required"] = [r for r in rest["required"] if r != name]
        if _mentions(rest, name):
            raise SchemaRefused(
                f"{name!r} is mentioned elsewhere in the schema; the tool is refused rather than"
                " partly rewritten"
            )
    exposed = copy.deepcopy(schema)
    for name in names:
        del exposed["properties"][name]
    if isinstance(exposed.get("required"), list):
        exposed["required"] = [r for r in exposed["required"] if r not in names]
    return exposed


# Where a property's name can stand in a JSON Schema: a mention there means the schema says
# something about the property that removing it would silently change.
_NAME_MAPS = ("properties", "dependentRequired", "dependentSchemas", "dependencies")
_NAME_LISTS = ("required",)


def _mentions(node: Any, name: str) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, list):
            stack.extend(current)
            continue
        if not isinstance(current, dict):
            continue
        for key, value in current.items():
            if key in _NAME_MAPS and isinstance(value, dict):
                if name in value or any(isinstance(v, list) and name in v for v in value.values()):
                    return True
            elif (key in _NAME_LISTS and isinstance(value, list) and name in value) or (
                key == "$ref"
                and isinstance(value, str)
                and (value.endswith(f"/{name}") or f"/{name}/" in value)
            ):
                return True
            stack.append(value)
    return False
