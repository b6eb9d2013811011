"""Tools as the gate knows them: a name, a description, a JSON schema, a side-effect class.

Rules:

1. A tool's class is the operator's statement of what calling it can change:
   ``read_only`` < ``local_mutation`` < ``remote_mutation`` < ``destructive``. A tool with no
   class is unavailable: it is not offered and a call to it is refused. A forgotten line is a
   missing capability, never a silent permission.
2. The input schema is compiled once, when the tool is registered. A schema that refers
   outside itself (a ``$ref`` not starting with ``#``), names an unknown ``$schema``, or is not
   a valid schema is refused (``SchemaRefused``): validation must never fetch anything.
3. A tool's spec (name, description, schema, class, idempotent) has one canonical form and a
   SHA-256 over it, the spec hash. Every decision records the spec hash of the tool it used,
   and the spec is stored once in ``tool_specs``.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import SchemaError

from core import canonical
from core.canonical import JSONValue
from core.errors import SchemaRefused


class SideEffect(enum.StrEnum):
    READ_ONLY = "read_only"
    LOCAL_MUTATION = "local_mutation"
    REMOTE_MUTATION = "remote_mutation"
    DESTRUCTIVE = "destructive"


ToolFunction = Callable[[dict[str, Any]], Any | Awaitable[Any]]


class _UnknownMetaschema:
    """Sentinel: ``validator_for`` found no validator for the schema's ``$schema``."""


@dataclass(frozen=True)
class Tool:
    """A tool registered with the gate. ``func`` gets a private copy of the arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]
    side_effect: SideEffect | None
    func: ToolFunction = field(compare=False, repr=False)
    idempotent: bool = False
    terminal: bool = False  # a successful call ends the run as COMPLETED with its result

    def spec(self) -> dict[str, JSONValue]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "side_effect": None if self.side_effect is None else self.side_effect.value,
            "idempotent": self.idempotent,
            "terminal": self.terminal,
        }


class CompiledTool:
    """A tool whose schema compiled, with its canonical spec and spec hash."""

    def __init__(self, tool: Tool) -> None:
        if not tool.name:
            raise SchemaRefused("a tool needs a name")
        self.tool = tool
        self.spec_text = canonical.dumps_text(tool.spec())
        self.spec_hash = canonical.sha256_hex(tool.spec())
        self._validator = compile_schema(tool.name, tool.input_schema)

    @property
    def name(self) -> str:
        return self.tool.name

    def schema_errors(self, arguments: JSONValue) -> list[str]:
        """Why ``arguments`` do not satisfy the schema; empty when they do."""
        if not isinstance(arguments, dict):
            return ["the arguments must be a JSON object"]
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
            for e in sorted(self._validator.iter_errors(arguments), key=lambda e: e.path)
        ]


def compile_schema(name: str, schema: Any) -> Any:
    if not isinstance(schema, dict):
        raise SchemaRefused(f"the input schema of {name} is not a JSON object")
    try:
        canonical.dumps(schema)
    except ValueError as e:
        raise SchemaRefused(f"the input schema of {name} is not exact JSON: {e}") from None
    _refuse_outside_references(name, schema)
    # No $schema: the latest draft (what MCP specifies). An unknown one: refused, not guessed.
    cls: Any = validators.validator_for(
        schema,
        default=_UnknownMetaschema if "$schema" in schema else validators.Draft202012Validator,  # type: ignore[arg-type]
    )
    if cls is _UnknownMetaschema:
        raise SchemaRefused(f"the input schema of {name} names an unknown $schema")
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise SchemaRefused(
            f"the input schema of {name} is not a valid schema: {e.message}"
        ) from None
    return cls(schema)


def _refuse_outside_references(name: str, schema: dict[str, Any]) -> None:
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("$ref", "$dynamicRef", "$recursiveRef"):
                ref = node.get(key)
                if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
                    raise SchemaRefused(
                        f"the input schema of {name} refers outside itself ({key}: {ref!r});"
                        " a schema must be self-contained"
                    )
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
