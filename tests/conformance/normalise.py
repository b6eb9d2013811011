"""The normalisations the named differences apply (tests/conformance/differences.py), and the
shapes of the observations they read.

Each normaliser takes a step's two observations (copies: it may change them in place) and
returns them as they are once its difference is taken into account: most turn the direct
answer into what today's proxy makes of it, so that a step whose answers differ in any other
way still fails. A normaliser that finds nothing of its kind returns the two unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.conformance.script import Step

Normalise = Callable[[Any, Any, "Context"], tuple[Any, Any]]


@dataclass(frozen=True)
class Context:
    server: str
    client: str
    step: Step


# --- helpers: the shapes of the observations ----------------------------------------------
# A call is observed as {"result": R} or {"error": E} on the SDK's wire, and as R itself, or
# {"exit": N, "error": ...}, from the Inspector; a progress step as {"response": ..., ...}.

SIGNOFF_PREFIX = "Signoff"


def result_of(value: Any) -> dict[str, Any] | None:
    """The CallToolResult in an observation, or None (an error, no answer)."""
    if not isinstance(value, dict):
        return None
    if "response" in value:
        return result_of(value["response"])
    if isinstance(value.get("result"), dict):
        return value["result"]  # type: ignore[no-any-return]
    if "content" in value and "exit" not in value:
        return value
    return None


def blocks(value: Any) -> list[dict[str, Any]]:
    result = result_of(value)
    content = result.get("content") if result else None
    return content if isinstance(content, list) else []


def replace_blocks(value: Any, change: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> Any:
    result = result_of(value)
    if result is not None and isinstance(result.get("content"), list):
        result["content"] = [new for block in result["content"] for new in change(block)]
    return value


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def is_signoff_refusal(value: Any, *phrases: str) -> bool:
    """An isError text answer of Signoff's own, containing each of ``phrases``."""
    result = result_of(value)
    if result is None or result.get("isError") is not True:
        return False
    text = " ".join(str(b.get("text", "")) for b in blocks(value))
    return text.startswith(SIGNOFF_PREFIX) and all(p in text for p in phrases)


def is_refusal(value: Any) -> bool:
    """The server refused: a JSON-RPC error, an Inspector error exit, or an isError result."""
    if isinstance(value, dict) and "error" in value:
        return True
    result = result_of(value)
    return result is not None and result.get("isError") is True


# --- results -------------------------------------------------------------------------------

LIMIT_MARKER = "[Signoff: this result was "


def cut_at_the_limit(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """The result cut at the operator's limit: the proxied answer is an error whose text
    blocks, but for the marker ending it, are the start of the server's, and whose marker says
    the call ran. The Inspector, which prints no text of an isError result, exits with its
    "tool_is_error"."""
    if _inspector_code(proxied) == "tool_is_error" and result_of(direct) is not None:
        return {"cut": True}, {"cut": True}
    result = result_of(proxied)
    content = blocks(proxied)
    if result is None or result.get("isError") is not True or not content:
        return direct, proxied
    marker = str(content[-1].get("text", ""))
    kept = "".join(str(b.get("text", "")) for b in content[:-1])
    whole = "".join(str(b.get("text", "")) for b in blocks(direct))
    if marker.startswith(LIMIT_MARKER) and "The call ran" in marker and whole.startswith(kept):
        return {"cut": True}, {"cut": True}
    return direct, proxied


def refused_by_signoff(*phrases: str) -> Normalise:
    """The server would refuse; Signoff refuses first, in its own words."""

    def normalise(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
        if is_refusal(direct) and is_signoff_refusal(proxied, *phrases):
            return {"refused": True}, {"refused": True}
        return direct, proxied

    return normalise


def _inspector_code(value: Any) -> Any:
    """The code of the Inspector's error envelope on an error exit (None otherwise)."""
    if not (isinstance(value, dict) and "exit" in value and isinstance(value.get("error"), dict)):
        return None
    envelope = value["error"].get("error")
    return envelope.get("code") if isinstance(envelope, dict) else None


# --- the handshake and the listing ----------------------------------------------------------

STATUS_TOOL = "signoff_status"


def tools_of(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, dict):
        return None
    listing = value.get("result", value)
    tools = listing.get("tools") if isinstance(listing, dict) else None
    return tools if isinstance(tools, list) else None


def without_status_tool(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    tools = tools_of(proxied)
    if tools is not None:
        tools[:] = [t for t in tools if t.get("name") != STATUS_TOOL]
    return direct, proxied


def without_icons(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    for tool in tools_of(direct) or []:
        tool.pop("icons", None)
    return direct, proxied


def signoff_server_info(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    if isinstance(proxied, dict) and proxied.get("name") == "signoff":
        return "(the server's)", "(the server's)"
    return direct, proxied


SIGNOFF_CAPABILITIES = {"tools": {"listChanged": True}}


def tools_and_logging_only(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """Signoff declares tools (listChanged true) and, when the server declares them, logging,
    completions as the server does, and prompts and resources with listChanged true (Signoff
    tells the host when the operator turns them on or off or pins one, decision 0062) and
    resources' subscribe as the server declares it."""
    if not isinstance(direct, dict) or "tools" not in direct:
        return direct, proxied
    expected = dict(SIGNOFF_CAPABILITIES)
    if "logging" in direct:
        expected["logging"] = {}
    for kind in ("prompts", "resources", "completions"):
        if kind in direct:
            expected[kind] = direct[kind]
    for kind in ("prompts", "resources"):
        own = direct.get(kind)
        if isinstance(own, dict):
            subscribe = own.get("subscribe") if kind == "resources" else None
            said = {"subscribe": subscribe} if isinstance(subscribe, bool) else {}
            expected[kind] = {"listChanged": True, **said}
    if proxied == expected:
        return proxied, proxied
    return direct, proxied


# --- roots, progress, logging, notifications ------------------------------------------------


def is_error(value: Any) -> bool:
    """A JSON-RPC error (the SDK's wire), or the Inspector's error exit."""
    return isinstance(value, dict) and "error" in value


def no_list_changed(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    return [m for m in direct if not m.endswith("/list_changed")], proxied


MODERN = "2026-07-28"
MODERN_RESULT_KEYS = ("resultType", "cacheScope", "ttlMs")
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


# --- what differs between any two runs ------------------------------------------------------

TIME_OF_DAY = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?")


def mask_times(value: Any) -> Any:
    if isinstance(value, str):
        return TIME_OF_DAY.sub("<time>", value)
    if isinstance(value, list):
        return [mask_times(v) for v in value]
    if isinstance(value, dict):
        return {k: mask_times(v) for k, v in value.items()}
    return value
