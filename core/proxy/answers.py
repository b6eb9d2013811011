"""What the proxy tells the host: a result as text, a pending request, a call under way.

Rules:

1. A result is flattened to text (non-text content summarised) and capped at ``RESULT_CAP``
   bytes with a marker saying how much was cut.
2. A pending answer says what kind of wait it is, in words that never claim a call did not
   run when it may have (``core.effects``): an ordinary approval "has not run"; an unknown
   outcome "may or may not have taken effect"; a duplicate "may already have taken effect".
   Each names the approval id and the request hash's fingerprint, and how to collect it.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from core import canonical, present

STATUS_TOOL = "signoff_status"
RESULT_CAP = 64 * 1024


def under_way(run_id: str) -> types.CallToolResult:
    return text(
        f"Signoff: an identical call (run {run_id}) is under way in another Signoff process,"
        " or was cut off moments ago; it is not started twice. Call again with exactly the"
        " same arguments later to learn how it ended."
    )


def flatten(result: dict[str, Any]) -> dict[str, Any]:
    """An upstream result as text: non-text content summarised, capped at 64 KiB."""
    parts: list[str] = []
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(item.get("data", ""))) * 3 // 4
            parts.append(f"[{kind}: {item.get('mimeType', 'unknown type')}, about {size} bytes]")
        elif kind == "resource":
            resource = item.get("resource") or {}
            parts.append(f"[resource: {resource.get('uri', '?')}]")
            if isinstance(resource.get("text"), str):
                parts.append(resource["text"])
        elif kind == "resource_link":
            parts.append(f"[link: {item.get('uri', '?')}]")
        else:
            parts.append(f"[{kind} content]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    text = "\n".join(parts)
    data = text.encode("utf-8")
    if len(data) > RESULT_CAP:
        kept = data[:RESULT_CAP].decode("utf-8", "ignore")
        text = f"{kept}\n[truncated by Signoff: {len(data) - len(kept.encode())} more bytes]"
    return {"text": text, "isError": bool(result.get("isError"))}


def text(body: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=body)], is_error=error)


def result(observation: Any) -> types.CallToolResult:
    if not observation.ok:
        return text(f"The tool failed: {observation.error}", error=True)
    value = canonical.loads(observation.result or "null")
    return from_record({"ok": True, "result": value})


def from_record(observation: dict[str, Any]) -> types.CallToolResult:
    result = observation.get("result")
    if isinstance(result, dict) and "text" in result:
        return text(str(result["text"]), error=bool(result.get("isError")))
    return text(json.dumps(result, ensure_ascii=False))


_PENDING_FIRST = {
    "interrupted_side_effect": "This call was cut off and may or may not have taken effect; it"
    " will not be repeated unless the operator approves.",
    "duplicate": "An identical call may already have taken effect; this one waits for the"
    " operator before it is made again.",
}


def pending(
    tool: str, approval_id: str, request_hash: str, *, kind: str = "approval"
) -> types.CallToolResult:
    first = _PENDING_FIRST.get(kind, "This call needs the operator's approval and has not run.")
    return text(
        f"{first} It is pending as approval {approval_id} (request fingerprint"
        f" {present.fingerprint(request_hash)}). The"
        f" operator decides outside this conversation. Once it is approved, call {tool} again"
        " with exactly the same arguments to collect the result; until then, calling again"
        f" says it is still pending. {STATUS_TOOL} lists what waits."
    )
