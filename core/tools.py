"""Tools as the gate knows them: a name, a description, a JSON schema, a side-effect class.

Rules:

1. A tool's class is the operator's statement of what calling it can change:
   ``read_only`` < ``local_mutation`` < ``remote_mutation`` < ``destructive``. A tool with no
   class is unavailable: it is not offered and a call to it is refused. A forgotten line is a
   missing capability, never a silent permission.
2. The input schema is compiled once, when the tool is registered. A schema that refers
   outside itself (a ``$ref`` not starting with ``#``), refers to a place it does not have or
   to a value that is not a schema, names an unknown ``$schema``, is nested too deeply, or is
   not a valid schema is refused (``SchemaRefused``): validation must never fetch anything
   (its registry cannot retrieve).
   Arguments a compiled schema still cannot be evaluated against (a reference that loops
   without end, a validator that fails) fail validation with the reason: never an exception,
   never a pass.
3. A tool's spec (name, description, schema, class, idempotent) has one canonical form and a
   SHA-256 over it, the spec hash. Every decision records the spec hash of the tool it used,
   and the spec is stored once in ``tool_specs``.
4. A tool's ``hidden`` parameters (those its caller sets itself, or forbids) may not be set by a
   call under any spelling: an argument whose name folds to a hidden one's (NFKC, case-folded,
   ``-``, ``_``, ``.``, spaces and zero-width characters ignored: ``Account``, ``ACCOUNT``,
   ``ac_count``, ``ac\u200bcount`` for ``account``) fails the
   schema check, naming both. A server that reads its parameters loosely must not receive
   ``Account`` beside the ``account`` the operator fixed. ``hidden`` is part of the spec when
   it is not empty.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

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
    hidden: tuple[str, ...] = ()  # parameters no call may set, under any spelling (rule 4)

    def spec(self) -> dict[str, JSONValue]:
        spec: dict[str, JSONValue] = {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "side_effect": None if self.side_effect is None else self.side_effect.value,
            "idempotent": self.idempotent,
            "terminal": self.terminal,
        }
        if self.hidden:
            spec["hidden"] = list(self.hidden)
        return spec


def folded(name: str) -> str:
    """A parameter's name as rule 4 compares it: NFKC, case-folded, without ``-``, ``_``,
    ``.``, spaces and characters that draw nothing (zero-width and other format characters)."""
    return "".join(
        c
        for c in unicodedata.normalize("NFKC", name).casefold()
        if c not in "-_." and not c.isspace() and unicodedata.category(c) != "Cf"
    )


class CompiledTool:
    """A tool whose schema compiled, with its canonical spec and spec hash."""

    def __init__(self, tool: Tool) -> None:
        if not tool.name:
            raise SchemaRefused("a tool needs a name")
        self.tool = tool
        self.spec_text = canonical.dumps_text(tool.spec())
        self.spec_hash = canonical.sha256_hex(tool.spec())
        self._validator = compile_schema(tool.name, tool.input_schema)
        self._hidden = {folded(name): name for name in tool.hidden}

    @property
    def name(self) -> str:
        return self.tool.name

    def schema_errors(self, arguments: JSONValue) -> list[str]:
        """Why ``arguments`` do not satisfy the schema; empty when they do."""
        if not isinstance(arguments, dict):
            return ["the arguments must be a JSON object"]
        try:
            errors = list(self._validator.iter_errors(arguments))
        except RecursionError:
            return ["(schema): the arguments cannot be checked against it: it refers to itself"
                    " without end"]  # fmt: skip
        except Exception as e:  # a validator failing on a schema it accepted: fail closed
            return [f"(schema): the arguments cannot be checked against it: {type(e).__name__}"]
        hidden = [
            f"{key}: not allowed: the parameter {self._hidden[folded(key)]!r} is set or denied"
            " by the operator, under any spelling"
            for key in arguments
            if folded(key) in self._hidden
        ]
        return hidden + [
            f"{'/'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
            for e in sorted(errors, key=lambda e: e.path)
        ]


def compile_schema(name: str, schema: Any) -> Any:
    # jsonschema here, not at the top: a command that compiles no schema does not load it.
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    if not isinstance(schema, dict):
        raise SchemaRefused(f"the input schema of {name} is not a JSON object")
    try:
        canonical.dumps(schema)
    except ValueError as e:
        raise SchemaRefused(f"the input schema of {name} is not exact JSON: {e}") from None
    _refuse_outside_references(name, schema)
    if not isinstance(schema.get("$schema", ""), str):
        raise SchemaRefused(f"the input schema of {name} has a $schema that is not a string")
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
    except RecursionError:
        raise SchemaRefused(f"the input schema of {name} is nested too deeply") from None
    _refuse_unresolvable_references(name, schema, cls)
    # An empty registry of our own: the default one would fetch a remote $ref (with a warning).
    return cls(schema, registry=Registry())


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


def _refuse_unresolvable_references(name: str, schema: dict[str, Any], cls: Any) -> None:
    """Every reference must lead somewhere inside the schema, resolved as the validator will
    (each ``$id`` on the way changes the base), so that none fails at the first call."""
    import referencing.jsonschema
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    specification = referencing.jsonschema.specification_with(
        cls.ID_OF(cls.META_SCHEMA) or "", default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    stack = [(Registry().resolver_with_root(root), root)]
    while stack:
        resolver, resource = stack.pop()
        node = resource.contents
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            ref = node.get(key) if isinstance(node, dict) else None
            if not isinstance(ref, str):
                continue
            try:
                target = resolver.lookup(ref).contents
            except Unresolvable as e:
                raise SchemaRefused(
                    f"the input schema of {name} refers to a place it does not have"
                    f" ({key}: {ref!r}: {type(e).__name__})"
                ) from None
            if not isinstance(target, dict | bool):
                raise SchemaRefused(
                    f"the input schema of {name} refers to a value that is not a schema"
                    f" ({key}: {ref!r})"
                )
        stack.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())
