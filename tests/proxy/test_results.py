"""Results as the server sent them, cut to the operator's limit and recorded (core/proxy/
results.py)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core import canonical
from core.proxy import results

IMAGE = base64.b64encode(bytes(range(256)) * 64).decode()  # 16 KiB of bytes, 21.8 KB as text
EVERY_BLOCK: dict[str, Any] = {
    "content": [
        {"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 1}},
        {"type": "image", "data": IMAGE, "mimeType": "image/png", "_meta": {"k": 1}},
        {"type": "audio", "data": IMAGE, "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///x", "mimeType": "text/plain",
                                          "text": "inside"}},
        {"type": "resource", "resource": {"uri": "file:///b", "blob": IMAGE}},
        {"type": "resource_link", "uri": "file:///y", "name": "y", "size": 3},
        {"type": "some-future-kind", "whatever": [1, 2.5, None]},
    ],
    "structuredContent": {"t": 1},
    "isError": False,
    "_meta": {"server": "note"},
    "unknownMember": True,
}  # fmt: skip


def size_of(result: dict[str, Any]) -> int:
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())


def test_a_result_under_the_limit_passes_exactly_as_sent() -> None:
    shaped = results.shape(EVERY_BLOCK, size_of(EVERY_BLOCK), 1 << 20, "fake")
    assert shaped.result == EVERY_BLOCK
    assert list(shaped.result) == list(EVERY_BLOCK)  # the members in the server's order
    assert shaped.record["cut"] is None and shaped.record["isError"] is False
    digest = hashlib.sha256(canonical.dumps(EVERY_BLOCK)).hexdigest()
    assert shaped.record["sha256"] == digest
    assert shaped.whole is not None  # over 64 KiB as canonical text: kept apart when needed
    assert results.from_record(shaped.record, shaped.whole) == EVERY_BLOCK


def test_a_small_result_is_recorded_whole_and_rebuilt_from_the_record_alone() -> None:
    small = {"content": [{"type": "text", "text": "ok"}], "structuredContent": {"a": [1]}}
    shaped = results.shape(small, size_of(small), 1 << 20, "fake")
    assert shaped.whole is None and shaped.record["whole"] == small
    assert results.from_record(canonical.loads(canonical.dumps(shaped.record)), None) == small


def test_a_large_result_whose_kept_whole_was_altered_gives_its_recorded_start() -> None:
    big = {"content": [{"type": "text", "text": "a" * 100_000}], "isError": False}
    shaped = results.shape(big, size_of(big), 1 << 20, "fake")
    assert shaped.whole is not None and "whole" not in shaped.record
    altered = shaped.whole.replace(b"aaaa", b"bbbb", 1)
    back = results.from_record(shaped.record, altered)
    assert back["isError"] is True
    assert back["content"][0]["text"] == "a" * results.EXCERPT
    assert "no longer kept" in back["content"][-1]["text"]
    assert results.from_record(shaped.record, None) == back


def test_a_result_over_the_limit_is_cut_in_order_marked_and_an_error() -> None:
    limit = 64 * 1024
    big = {
        "content": [
            {"type": "text", "text": "first"},
            {"type": "image", "data": IMAGE, "mimeType": "image/png"},
            {"type": "text", "text": "é" * limit},  # two bytes each: cut inside the text
            {"type": "image", "data": IMAGE, "mimeType": "image/png"},
        ],
        "structuredContent": {"x": 1},
    }
    shaped = results.shape(big, size_of(big), limit, "fake")
    content = shaped.result["content"]
    assert content[:2] == big["content"][:2]  # what fits, whole, in order
    assert content[2]["text"] and big["content"][2]["text"].startswith(content[2]["text"])
    assert "structuredContent" not in shaped.result  # a part would not match its schema
    assert shaped.result["isError"] is True
    assert size_of(shaped.result) <= limit
    marker = content[-1]["text"]
    assert "over the limit of 65536 bytes" in marker and "image of" in marker
    assert len(content) == 4  # the last image dropped whole, after the marker's place
    assert shaped.record["cut"]["dropped"][-2]["type"] == "image"  # type: ignore[index]


def test_an_image_that_does_not_fit_is_dropped_whole_never_cut() -> None:
    big = {"content": [{"type": "image", "data": IMAGE * 8, "mimeType": "image/png"}]}
    shaped = results.shape(big, size_of(big), 64 * 1024, "fake")
    assert [b["type"] for b in shaped.result["content"]] == ["text"]
    assert "image of" in shaped.result["content"][0]["text"]


def test_a_result_of_many_blocks_is_cut_and_recorded_within_bounds() -> None:
    """However many blocks a server sends, what the host gets fits the limit and what the chain
    keeps stays small: the first blocks by name, the rest counted and hashed."""
    many = {"content": [{"type": "text", "text": "x" * 200_000}]
            + [{"type": "text", "text": ""}] * 100_000}  # fmt: skip
    limit = 100_000
    shaped = results.shape(many, size_of(many), limit, "fake")
    assert size_of(shaped.result) <= limit
    assert "and 99981 more parts of" in shaped.result["content"][-1]["text"]
    dropped = shaped.record["cut"]["dropped"]  # type: ignore[index]
    assert len(dropped) == results.SHOWN + 1 and dropped[-1]["more"] == 99_981
    assert len(canonical.dumps(shaped.record)) < 40_000

    under = {"content": [{"type": "text", "text": ""}] * 40_000}  # under 1 MiB, not cut
    record = results.shape(under, size_of(under), 1 << 20, "fake").record
    assert record["cut"] is None and len(record["parts"]) == results.PARTS + 1  # type: ignore[arg-type]
    rest = record["parts"][-1]  # type: ignore[index]
    assert rest["count"] == 40_000 - results.PARTS
    assert (
        rest["sha256"]
        == hashlib.sha256(canonical.dumps(under["content"][results.PARTS :])).hexdigest()
    )
    assert len(canonical.dumps(record)) < 40_000


def test_a_result_within_the_limit_is_not_cut_however_the_server_escaped_it() -> None:
    """The limit is on the result the host receives: a server that writes each character as a
    six-byte escape sends a longer line, not a larger result."""
    result = {"content": [{"type": "text", "text": "日本語" * 30_000}], "structuredContent": {}}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()  # \u escapes
    limit = 300_000
    assert len(line) > limit >= size_of(result)
    shaped = results.shape(result, len(line), limit, "fake")
    assert shaped.result == result and shaped.record["cut"] is None


@given(st.text(min_size=1, max_size=3000), st.integers(2200, 9000))
def test_a_cut_text_is_a_prefix_at_a_character_and_fits(text: str, limit: int) -> None:
    big = {"content": [{"type": "text", "text": text * 40}]}
    shaped = results._cut(big, size_of(big), limit, "fake")[0]
    kept = shaped["content"][0]["text"] if len(shaped["content"]) > 1 else ""
    assert (text * 40).startswith(kept)
    assert size_of(shaped) <= limit + 600  # the marker's own words, within its room
