"""A tool's result as the host receives it, cut to the operator's limit, and as it is recorded.
Pure code (decision 0029).

Rules:

1. A result passes through as the server sent it: every content block (text, image, audio,
   resource_link, embedded resource with text or blob), ``structuredContent``, ``isError``,
   ``_meta`` and annotations, in order, unknown members too. Nothing is added or re-encoded
   beyond JSON's own (key order and values kept; white space and escapes are the writer's).
2. A result over the limit (``result_limit_bytes``, measured on the result as the host receives
   it) is cut: content blocks are kept in order while they fit, a text block that does
   not fit is cut at a character, an image, audio or embedded blob that does not fit is dropped
   whole, and nothing after the first block cut or dropped is kept; ``structuredContent`` is
   dropped (a part of it would not match the tool's output schema). A final text block says
   what was cut (the first ``SHOWN`` parts dropped by name, the rest counted), and ``isError`` is
   true. The call ran: its run is a recorded outcome.
3. An answer that cannot be passed on (too large to read at all, JSON Signoff cannot read
   exactly, a result that is not an object) ran too: the host gets a text block saying so, with
   ``isError`` true, and that is recorded.
4. What is recorded of a result (``record``) is: the SHA-256 and size of the canonical form of
   exactly what the host received, its ``isError``, the server's answer size, what a cut
   dropped, and either the whole result (when its canonical form is at most ``WHOLE`` bytes) or
   its ``parts``: each text block's start (up to ``EXCERPT`` bytes in all) with its size and
   hash, each binary by type, size and hash, a ``structuredContent`` by size and hash; past
   ``PARTS`` blocks, the rest by count, size and one hash. The whole
   of a larger result is kept apart (``result_blobs``) only while a re-call may still collect
   it, checked against the recorded hash when read (``from_record``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from core import canonical
from core.canonical import JSONValue

WHOLE = 64 * 1024  # bytes of a result recorded whole
EXCERPT = 16 * 1024  # bytes of text recorded of a larger result, over all its text blocks
MARKER_ROOM = 2048  # bytes kept free under the limit for the marker and the result's envelope
BINARY = ("image", "audio")
SHOWN = 20  # parts a cut names one by one, in its marker and its record; the rest are counted
PARTS = 100  # content blocks recorded one by one of a result not recorded whole


@dataclass(frozen=True)
class Shaped:
    """A result ready for the host (``result``), its record (``record``), and its canonical
    text when it is too large to be recorded whole (``whole``: kept apart for a re-call)."""

    result: dict[str, Any]
    record: dict[str, JSONValue]
    whole: bytes | None


def shape(result: dict[str, Any], size: int, limit: int, server: str) -> Shaped:
    """The server's ``result`` (its answer line ``size`` bytes long) for the host: whole, or cut
    to ``limit`` (rule 2); and its record (rule 4)."""
    cut: dict[str, Any] | None = None
    # The answer line is at least the result: only a large line is measured again (escapes
    # the server wrote may take more room than the result the host is sent).
    if size > limit and _size(result) > limit:
        result, cut = _cut(result, size, limit, server)
    return recorded(result, size, cut)


def unreadable(why: str, size: int) -> Shaped:
    """What the host is told of an answer that cannot be passed on (rule 3)."""
    text = (
        f"Signoff: the server answered this call, so it ran, but its answer cannot be passed on:"
        f" {why}"
    )
    result = {"content": [{"type": "text", "text": text}], "isError": True}
    return recorded(result, size, {"unreadable": why})


def recorded(result: dict[str, Any], size: int, cut: dict[str, Any] | None) -> Shaped:
    data = canonical.dumps(result)
    record: dict[str, Any] = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "isError": result.get("isError") is True,
        "server_bytes": size,
        "cut": cut,
    }
    if len(data) <= WHOLE:
        record["whole"] = result
        return Shaped(result, record, None)
    record["parts"] = _parts(result)
    return Shaped(result, record, data)


def from_record(record: Any, whole: bytes | None) -> dict[str, Any]:
    """The result the host received, from its record and the whole text kept apart (None when
    none is): exactly, or, when the whole is missing or no longer hashes to the record, the
    recorded parts with a marker, ``isError`` true."""
    if not isinstance(record, dict):
        return _note(f"Signoff: the recorded result cannot be read: {record!r}"[:500])
    if isinstance(record.get("whole"), dict):
        return dict(record["whole"])
    if whole is not None and hashlib.sha256(whole).hexdigest() == record.get("sha256"):
        value = canonical.loads(whole)
        if isinstance(value, dict):
            return value
    parts = _content({"content": record.get("parts")})
    content: list[Any] = [
        {"type": "text", "text": p["text"]} for p in parts if isinstance(p, dict) and "text" in p
    ]
    content.append(
        {
            "type": "text",
            "text": f"[Signoff: this result was {record.get('bytes')} bytes; only its start was"
            " kept, shown above. Its whole is no longer kept.]",
        }
    )
    return {"content": content, "isError": True}


def legacy(record: Any) -> dict[str, Any] | None:
    """A result recorded before results passed through (text flattened by Signoff), or None."""
    if isinstance(record, dict) and "text" in record and "sha256" not in record:
        return {
            "content": [{"type": "text", "text": str(record["text"])}],
            "isError": record.get("isError") is True,
        }
    return None


def _content(result: dict[str, Any]) -> list[Any]:
    found = result.get("content")
    return found if isinstance(found, list) else []


def _note(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _kind(block: Any) -> str:
    if not isinstance(block, dict):
        return "unknown"
    kind = block.get("type")
    if kind == "resource":
        inner = block.get("resource")
        return "resource/blob" if isinstance(inner, dict) and "blob" in inner else "resource/text"
    return str(kind)


def _cut(
    result: dict[str, Any], size: int, limit: int, server: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    budget = max(0, limit - MARKER_ROOM)
    content = _content(result)
    kept: list[Any] = []
    dropped: list[dict[str, Any]] = []
    for n, block in enumerate(content):
        block_size = _size(block)
        if not dropped and block_size <= budget:
            kept.append(block)
            budget -= block_size
            continue
        entry: dict[str, Any] = {"index": n, "type": _kind(block), "bytes": block_size}
        if not dropped and _kind(block) == "text" and isinstance(block.get("text"), str):
            part = _text_within(block, budget)
            if part is not None:
                kept.append(part)
                budget -= _size(part)
                entry["kept_bytes"] = len(part["text"].encode())
        dropped.append(entry)
    out = {k: v for k, v in result.items() if k not in ("content", "structuredContent")}
    if "structuredContent" in result:
        dropped.append({"structuredContent": True, "bytes": _size(result["structuredContent"])})
    if _size(out) > budget:  # an oversized _meta or unknown member goes too
        dropped.extend({"member": k, "bytes": _size(v)} for k, v in out.items() if k != "isError")
        out = {}
    shown = ", ".join(
        f"{d.get('type') or d.get('member') or 'structuredContent'} of {d['bytes']} bytes"
        + (f" (its first {d['kept_bytes']} bytes kept)" if "kept_bytes" in d else "")
        for d in dropped[:SHOWN]
    )
    rest = dropped[SHOWN:]
    if rest:
        more = {"more": len(rest), "bytes": sum(d["bytes"] for d in rest)}
        shown += f", and {more['more']} more parts of {more['bytes']} bytes"
        dropped = [*dropped[:SHOWN], more]
    marker = (
        f"[Signoff: this result was {size} bytes, over the limit of {limit} bytes the operator"
        f" set for server {server}; cut: {shown}. The call ran; it is not repeated.]"
    )
    out["content"] = [*kept, {"type": "text", "text": marker}]
    out["isError"] = True
    return out, {"limit": limit, "dropped": dropped}


def _text_within(block: dict[str, Any], budget: int) -> dict[str, Any] | None:
    """``block`` with its text cut at a character so that the block fits ``budget`` bytes."""
    room = budget - _size({**block, "text": ""})
    if room <= 0:
        return None
    data = block["text"].encode()[:room]
    while True:
        text = data.decode("utf-8", "ignore")
        part = {**block, "text": text}
        if _size(part) <= budget or not text:  # escapes may take more room than the text
            return part if text else None
        data = data[: max(0, len(data) - max(1, (_size(part) - budget)))]


def _parts(result: dict[str, Any]) -> list[JSONValue]:
    parts: list[JSONValue] = []
    room = EXCERPT
    content = _content(result)
    for block in content[:PARTS]:
        data = canonical.dumps(block)
        part: dict[str, JSONValue] = {
            "type": _kind(block),
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        if isinstance(block, dict):
            text = block.get("text")
            inner = block.get("resource")
            if isinstance(inner, dict):
                part["uri"] = inner.get("uri")
                part["mimeType"] = inner.get("mimeType")
                text = inner.get("text")
            elif block.get("type") in BINARY or block.get("type") == "resource_link":
                part["mimeType"] = block.get("mimeType")
                if block.get("type") == "resource_link":
                    part["uri"] = block.get("uri")
            if isinstance(text, str) and room > 0:
                start = text.encode()[:room].decode("utf-8", "ignore")
                part["text"] = start
                room -= len(start.encode())
        parts.append(part)
    if len(content) > PARTS:
        data = canonical.dumps(content[PARTS:])
        parts.append({"type": "more", "count": len(content) - PARTS, "bytes": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()})  # fmt: skip
    if "structuredContent" in result:
        data = canonical.dumps(result["structuredContent"])
        parts.append(
            {
                "type": "structuredContent",
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    return parts


def describe(record: Any, width: int = 300) -> list[str]:
    """What the host received, as the history shows it: a line for the whole, then a line per
    content block (its text's start, or a binary's type, size and hash), then what a cut
    dropped. A record of before results passed through is shown as it is."""
    if not isinstance(record, dict) or "sha256" not in record:
        return [f"result: {canonical.dumps_text(record)[:width]}"] if record is not None else []
    error = " (an error)" if record.get("isError") else ""
    lines = [
        f"what the host received{error}: {record.get('bytes')} bytes, sha256 {record['sha256']};"
        f" the server sent {record.get('server_bytes')} bytes"
    ]
    whole = record.get("whole")
    parts = _parts(whole) if isinstance(whole, dict) else record.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        where = f" {part['uri']}" if part.get("uri") else ""
        mime = f" {part['mimeType']}" if part.get("mimeType") else ""
        line = f"  {kind}{mime}{where}, {part.get('bytes')} bytes"
        text = part.get("text")
        if isinstance(text, str):
            shown = text[:width] + ("…" if len(text) > width else "")
            line += f": {json.dumps(shown, ensure_ascii=False)}"
        else:
            line += f", sha256 {part.get('sha256')}"
        lines.append(line)
    cut = record.get("cut")
    if isinstance(cut, dict) and "limit" in cut:
        dropped = _content({"content": cut.get("dropped")})
        lines.append(f"  cut to the limit of {cut['limit']} bytes: {len(dropped)} part(s) dropped")
    elif isinstance(cut, dict) and "unreadable" in cut:
        lines.append(f"  the server's answer could not be passed on: {cut['unreadable']}")
    return lines
