"""Decisions a loop proposes: call a tool, complete the run, or fail it.

Rules:

1. A decision is recorded verbatim (``record()``) before anything checks it, so the log shows
   what was asked for and not only what was accepted.
2. ``origin`` says who proposed it: ``model``, ``plan`` or ``operator``. It is recorded, has no
   behaviour, is never part of an approval's hash, and is not stored when empty (a decision
   without one is recorded exactly as before). Any other value makes the decision invalid.
3. A tool call's arguments are JSON text, parsed losslessly (core/canonical.py); text that
   cannot be parsed exactly makes the decision invalid. A caller that parsed them already (the
   proxy, for its call key) hands the parsed value along with the text, and it is not parsed
   again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import canonical
from core.canonical import JSONValue


class Kind(enum.StrEnum):
    TOOL_CALL = "tool_call"
    COMPLETE = "complete"
    FAIL = "fail"


ORIGINS = frozenset({"model", "plan", "operator"})


@dataclass(frozen=True)
class Decision:
    kind: str
    tool: str = ""
    arguments: str = ""  # JSON text, as proposed
    rationale: str = ""
    result: str = ""  # JSON text, with complete
    error: str = ""  # with fail
    origin: str = ""
    # ``arguments`` parsed, when the caller already did (rule 3); never recorded or compared.
    parsed: canonical.Canonical | None = field(default=None, compare=False, repr=False)

    @classmethod
    def tool_call(
        cls, tool: str, arguments: str | Mapping[str, Any], rationale: str = "", *, origin: str = ""
    ) -> Decision:
        text = arguments if isinstance(arguments, str) else canonical.dumps_text(dict(arguments))
        return cls(Kind.TOOL_CALL, tool=tool, arguments=text, rationale=rationale, origin=origin)

    @classmethod
    def complete(cls, result: str = "null", *, origin: str = "") -> Decision:
        return cls(Kind.COMPLETE, result=result, origin=origin)

    @classmethod
    def fail(cls, error: str, *, origin: str = "") -> Decision:
        return cls(Kind.FAIL, error=error, origin=origin)

    def record(self) -> dict[str, JSONValue]:
        """The decision verbatim, as a JSON object (empty fields left out)."""
        fields = {
            "kind": self.kind,
            "tool": self.tool,
            "arguments": self.arguments,
            "rationale": self.rationale,
            "result": self.result,
            "error": self.error,
            "origin": self.origin,
        }
        # Text that has no UTF-8 form (a lone surrogate from a Python caller) is kept visibly
        # escaped rather than dropped: the record must still show what was asked.
        return {k: _encodable(v) for k, v in fields.items() if v}

    def problem(self) -> str | None:
        """Why this decision is invalid before any tool is looked at, or None."""
        if self.kind not in set(Kind):
            return f"unknown decision kind {self.kind!r}"
        if self.origin and self.origin not in ORIGINS:
            return f"unknown origin {self.origin!r} (known: model, plan, operator)"
        if self.kind == Kind.TOOL_CALL and not self.tool:
            return "a tool call names no tool"
        return None

    def parsed_arguments(self) -> JSONValue:
        """The arguments as an exact JSON value; raises ``JSONRefused``."""
        return self.canonical_arguments().value

    def canonical_arguments(self) -> canonical.Canonical:
        """The arguments' exact value and canonical text; raises ``JSONRefused``. ``parsed`` is
        taken only when it was parsed from these very arguments (a caller's value that says
        otherwise is not what is recorded, so it is not what is checked and run either)."""
        if self.parsed is not None and self.parsed.source == self.arguments:
            return self.parsed
        return canonical.Canonical.parse(self.arguments or "{}")

    def parsed_result(self) -> JSONValue:
        return canonical.loads(self.result or "null")


def _encodable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
