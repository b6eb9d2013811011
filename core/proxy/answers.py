"""What the proxy tells the host: a tool's result, a pending request, a call under way.

Every answer is the JSON object the host receives as the ``result`` of its ``tools/call``.

Rules:

1. A tool's result is the server's, as it sent it (core/proxy/results.py: passed through, cut
   to the operator's limit); a re-call collects it from the record.
2. A pending answer says what kind of wait it is, in words that never claim a call did not
   run when it may have (``core.effects``): an ordinary approval "has not run"; an unknown
   outcome "may or may not have taken effect"; a duplicate "may already have taken effect".
   Each names the approval id and the request hash's fingerprint, and how to collect it. For a
   tool that declares an output schema it is ``isError`` (a host checks a result's
   structuredContent against the schema unless it is an error).
"""

from __future__ import annotations

from typing import Any

from core import canonical, present
from core.proxy import results

STATUS_TOOL = "signoff_status"
Result = dict[str, Any]


def under_way(run_id: str, *, error: bool = False) -> Result:
    """``error``: the tool declares an output schema, so a result that is not an error would
    need ``structuredContent`` (as ``pending``)."""
    return text(
        f"Signoff: an identical call (run {run_id}) is under way in another Signoff process,"
        " or was cut off moments ago; it is not started twice. Call again with exactly the"
        " same arguments later to learn how it ended.",
        error=error,
    )


def text(body: str, *, error: bool = False) -> Result:
    return {"content": [{"type": "text", "text": body}], "isError": error}


def from_record(observation: dict[str, Any], whole: bytes | None = None) -> Result:
    """A completed call's result from its recorded observation (and the whole of a large
    result, when it is kept: core/proxy/results.py rule 4)."""
    record = observation.get("result")
    return results.legacy(record) or results.from_record(record, whole)


def failed(observation: dict[str, Any]) -> Result:
    return text(f"The tool failed: {observation.get('error')}", error=True)


def recorded(observation_text: str | None) -> dict[str, Any]:
    value = canonical.loads(observation_text or "{}")
    return value if isinstance(value, dict) else {}


_PENDING_FIRST = {
    "interrupted_side_effect": "This call was cut off and may or may not have taken effect; it"
    " will not be repeated unless the operator approves.",
    "duplicate": "An identical call may already have taken effect; this one waits for the"
    " operator before it is made again.",
}


def pending(
    tool: str, approval_id: str, request_hash: str, *, kind: str = "approval", error: bool = False
) -> Result:
    first = _PENDING_FIRST.get(kind, "This call needs the operator's approval and has not run.")
    return text(
        f"{first} It is pending as approval {approval_id} (request fingerprint"
        f" {present.fingerprint(request_hash)}). The"
        f" operator decides outside this conversation. Once it is approved, call {tool} again"
        " with exactly the same arguments to collect the result; until then, calling again"
        f" says it is still pending. {STATUS_TOOL} lists what waits.",
        error=error,
    )
