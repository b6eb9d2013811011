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


# --- results: what today's proxy makes of a result (core/proxy/answers.py, flatten) --------


def _approximate_bytes(data: str) -> int:
    return len(data) * 3 // 4


def drop_annotations(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    def change(block: dict[str, Any]) -> list[dict[str, Any]]:
        block.pop("annotations", None)
        return [block]

    return replace_blocks(direct, change), proxied


def placeholder(kind: str) -> Normalise:
    def normalise(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
        def change(block: dict[str, Any]) -> list[dict[str, Any]]:
            if block.get("type") != kind:
                return [block]
            size = _approximate_bytes(str(block.get("data", "")))
            return [
                text_block(f"[{kind}: {block.get('mimeType', 'unknown type')}, about {size} bytes]")
            ]

        return replace_blocks(direct, change), proxied

    return normalise


def embedded_as_text(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    def change(block: dict[str, Any]) -> list[dict[str, Any]]:
        if block.get("type") != "resource":
            return [block]
        resource = block.get("resource") or {}
        out = [text_block(f"[resource: {resource.get('uri', '?')}]")]
        if isinstance(resource.get("text"), str):
            out.append(text_block(resource["text"]))
        return out

    return replace_blocks(direct, change), proxied


def link_as_text(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    def change(block: dict[str, Any]) -> list[dict[str, Any]]:
        if block.get("type") != "resource_link":
            return [block]
        return [text_block(f"[link: {block.get('uri', '?')}]")]

    return replace_blocks(direct, change), proxied


def merged(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """Several text blocks become one, joined by newlines."""
    result = result_of(direct)
    if result is not None and isinstance(result.get("content"), list):
        content = result["content"]
        if all(isinstance(b, dict) and set(b) == {"type", "text"} for b in content):
            result["content"] = [text_block("\n".join(str(b["text"]) for b in content))]
    return direct, proxied


RESULT_CAP = 64 * 1024


def capped(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """The text cut at 64 KiB (a UTF-8 boundary) with Signoff's marker."""
    result = result_of(direct)
    content = result.get("content") if result else None
    if isinstance(content, list) and len(content) == 1 and "text" in content[0]:
        data = str(content[0]["text"]).encode()
        if len(data) > RESULT_CAP:
            kept = data[:RESULT_CAP].decode("utf-8", "ignore")
            cut = len(data) - len(kept.encode())
            content[0]["text"] = f"{kept}\n[truncated by Signoff: {cut} more bytes]"
    return direct, proxied


def drop_structured(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    result = result_of(direct)
    if result is not None:
        result.pop("structuredContent", None)
    return direct, proxied


def explicit_is_error(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    result = result_of(direct)
    if result is not None and "isError" not in result:
        result["isError"] = False
    return direct, proxied


ROOTLESS_REFUSAL = re.compile(r"Access denied - path outside allowed directories: .* not in \Z")


def refused_without_roots(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """server-filesystem with no directory of its own and no roots refuses every path."""
    text = " ".join(str(b.get("text", "")) for b in blocks(proxied))
    result = result_of(proxied)
    if result is not None and result.get("isError") is True and ROOTLESS_REFUSAL.match(text):
        return "refused: no allowed directory", "refused: no allowed directory"
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


def rpc_error_as_failure(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """The server's JSON-RPC error reaches the client as a failed call (isError) whose text
    carries the server's message; the Inspector, which prints no text of an isError result,
    exits with its "tool_is_error" where the server's error made it exit with "error"."""
    error = direct.get("error") if isinstance(direct, dict) else None
    if isinstance(error, dict) and "code" in error and "exit" not in direct:
        text = " ".join(str(b.get("text", "")) for b in blocks(proxied))
        result = result_of(proxied)
        if result is not None and result.get("isError") is True and error["message"] in text:
            return {"failed": error["message"]}, {"failed": error["message"]}
    if _inspector_code(direct) == "error" and _inspector_code(proxied) == "tool_is_error":
        return {"failed": True}, {"failed": True}
    return direct, proxied


# --- the handshake and the listing ----------------------------------------------------------

SIGNOFF_INSTRUCTIONS = "Tool calls pass through Signoff: some wait for the operator's approval."
TOOL_METADATA = ("title", "annotations", "outputSchema", "execution", "_meta", "icons")
STATUS_TOOL = "signoff_status"
ROOTS_ONLY_TOOLS = ("get-roots-list",)  # server-everything lists it to roots-capable clients


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


def without_metadata(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    for tool in tools_of(direct) or []:
        for key in TOOL_METADATA:
            tool.pop(key, None)
    return direct, proxied


def without_roots_only_tools(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    tools = tools_of(direct)
    if tools is not None:
        tools[:] = [t for t in tools if t.get("name") not in ROOTS_ONLY_TOOLS]
    return direct, proxied


def signoff_instructions(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    if proxied == SIGNOFF_INSTRUCTIONS:
        return "(the server's)", "(the server's)"
    return direct, proxied


def signoff_server_info(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    if isinstance(proxied, dict) and proxied.get("name") == "signoff":
        return "(the server's)", "(the server's)"
    return direct, proxied


SIGNOFF_CAPABILITIES = {"tools": {"listChanged": False}}


def tools_capability_only(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """Signoff declares the tools capability alone, without listChanged."""
    if isinstance(direct, dict) and "tools" in direct and proxied == SIGNOFF_CAPABILITIES:
        return proxied, proxied
    return direct, proxied


# --- roots, progress, logging, notifications ------------------------------------------------


def roots_not_asked(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """The server never asks for roots: what it then does with its own is not compared."""
    if isinstance(direct, dict) and direct.get("asked") and not proxied.get("asked"):
        return {"asked": False}, {"asked": False}
    return direct, proxied


def no_progress(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    if isinstance(direct, dict) and "progress" in direct:
        direct["progress"], direct["tokens"] = [], []
    return direct, proxied


def is_error(value: Any) -> bool:
    """A JSON-RPC error (the SDK's wire), or the Inspector's error exit."""
    return isinstance(value, dict) and "error" in value


def no_set_level(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """The server takes the level; Signoff refuses it (or the client does, seeing no logging
    capability)."""
    if direct == {"result": {}} and is_error(proxied):
        return proxied, proxied
    return direct, proxied


def error_data_named(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    """The same error, with the method named in ``data``."""
    both = is_error(direct) and is_error(proxied) and isinstance(proxied["error"], dict)
    if both and "data" not in direct["error"]:
        proxied["error"].pop("data", None)
    return direct, proxied


def no_log_messages(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    return [], proxied


def no_list_changed(direct: Any, proxied: Any, _: Context) -> tuple[Any, Any]:
    return [m for m in direct if not m.endswith("/list_changed")], proxied


MODERN = "2026-07-28"
MODERN_RESULT_KEYS = ("resultType", "cacheScope", "ttlMs")
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def modern_era(direct: Any, proxied: Any, context: Context) -> tuple[Any, Any]:
    """The auto client settles on 2026-07-28 with Signoff, on the handshake with the server;
    the modern era's answers carry their own fields."""
    if context.step.kind == "initialize":
        if isinstance(proxied, dict) and proxied.get("negotiated") == MODERN:
            return "(the era)", "(the era)"
        return direct, proxied
    answer = proxied.get("result") if isinstance(proxied, dict) else None
    if isinstance(answer, dict):
        for key in MODERN_RESULT_KEYS:
            answer.pop(key, None)
        meta = answer.get("_meta")
        if isinstance(meta, dict):
            meta.pop(SERVER_INFO_META, None)
            if not meta:
                del answer["_meta"]
    return direct, proxied


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
