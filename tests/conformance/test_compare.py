"""The comparison itself, on observations written out here (no server): a listed difference
explains exactly what it names and nothing else, the smallest set needed is found, a difference
that no longer occurs is not needed (the suite calls it stale), and JSON is compared exactly."""

from __future__ import annotations

import base64
from typing import Any

from tests.conformance.compare import NOT_APPLICABLE, SAME, cell, compare
from tests.conformance.differences import Context
from tests.conformance.script import SDK, Step

IMAGE = base64.b64encode(bytes(range(201))).decode()


def call(feature: str) -> Context:
    return Context("everything", SDK, Step("s", feature, "call", "t", {}))


def result(*content: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"result": {"content": list(content), **more}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def ids(verdict: Any) -> list[str] | None:
    return None if verdict.needed is None else [d.id for d in verdict.needed]


def test_equal_answers_need_no_difference() -> None:
    same = result(text("a"))
    verdict = compare(call("content/text"), same, same)
    assert ids(verdict) == [] and cell([verdict]) == SAME


def test_todays_flattened_image_is_explained_by_exactly_the_differences_it_shows() -> None:
    direct = result(text("before"), {"type": "image", "data": IMAGE, "mimeType": "image/png"})
    proxied = result(text("before\n[image: image/png, about 201 bytes]"), isError=False)

    verdict = compare(call("content/image"), direct, proxied)

    assert ids(verdict) == ["D-IMAGE", "D-MERGED", "D-ISERROR-FALSE"]
    assert cell([verdict]) == ["D-IMAGE", "D-MERGED", "D-ISERROR-FALSE"]


def test_a_forwarded_image_needs_none_of_them_so_each_listed_one_is_stale() -> None:
    image = {"type": "image", "data": IMAGE, "mimeType": "image/png"}
    verdict = compare(call("content/image"), result(text("a"), image), result(text("a"), image))
    assert {d.id for d in verdict.applicable} >= {"D-IMAGE", "D-MERGED", "D-ISERROR-FALSE"}
    assert ids(verdict) == []


def test_a_partly_fixed_result_needs_only_what_remains() -> None:
    """The image passes now, isError is still added: D-IMAGE's normaliser would spoil it."""
    image = {"type": "image", "data": IMAGE, "mimeType": "image/png"}
    verdict = compare(call("content/image"), result(image), result(image, isError=False))
    assert ids(verdict) == ["D-ISERROR-FALSE"]


def test_a_difference_no_listed_one_names_is_not_explained() -> None:
    direct = result(text("the server's words"))
    for proxied in (result(text("other words"), isError=False), result(text("the server's")),
                    {"error": {"code": -32603, "message": "internal"}}):  # fmt: skip
        assert compare(call("content/text"), direct, proxied).needed is None, proxied


def test_a_changed_byte_in_an_image_is_not_explained() -> None:
    image = {"type": "image", "data": IMAGE, "mimeType": "image/png"}
    other = {**image, "data": IMAGE[:-4] + "AAAA"}
    assert compare(call("content/image"), result(image), result(other)).needed is None


def test_json_is_compared_exactly_but_for_key_order() -> None:
    direct = {"result": {"structuredContent": {"a": 1, "b": True}, "content": []}}
    reordered = {"result": {"content": [], "structuredContent": {"b": True, "a": 1}}}
    assert ids(compare(call("structuredContent"), direct, reordered)) == []
    for changed in ({"a": 1.0, "b": True}, {"a": 1, "b": 1}):
        proxied = {"result": {"content": [], "structuredContent": changed}}
        assert compare(call("structuredContent"), direct, proxied).needed is None


def test_the_cap_is_explained_only_at_64_kib_with_the_marker() -> None:
    big = "x" * 70_000
    direct = result(text(big))
    cut = f"{'x' * 65536}\n[truncated by Signoff: {70_000 - 65536} more bytes]"
    context = Context("filesystem", SDK, Step("s", "result/large", "call", "t", {}))
    assert ids(compare(context, direct, result(text(cut), isError=False))) == [
        "D-CAP-64K", "D-ISERROR-FALSE",
    ]  # fmt: skip
    elsewhere = f"{'x' * 60000}\n[truncated by Signoff: 10000 more bytes]"
    assert compare(context, direct, result(text(elsewhere), isError=False)).needed is None


def test_a_difference_applies_only_where_it_is_listed() -> None:
    """D-AUDIO is listed for server-filesystem: on another server it explains nothing."""
    audio = {"type": "audio", "data": IMAGE, "mimeType": "audio/wav"}
    proxied = result(text("[audio: audio/wav, about 201 bytes]"), isError=False)
    assert compare(call("content/audio"), result(audio), proxied).needed is None
    elsewhere = Context("filesystem", SDK, Step("s", "content/audio", "call", "t", {}))
    assert ids(compare(elsewhere, result(audio), proxied)) == ["D-AUDIO", "D-ISERROR-FALSE"]


def test_nothing_sent_either_way_is_not_a_feature_observed() -> None:
    context = Context("memory", SDK, Step("log-messages", "logging/message", "log"))
    assert cell([compare(context, [], [])]) == NOT_APPLICABLE
    assert cell([]) == NOT_APPLICABLE


def test_a_json_rpc_error_turned_into_is_error_is_explained_only_with_the_servers_message() -> None:
    context = Context("fake", SDK, Step("s", "error/json-rpc", "call", "t", {}))
    direct = {"error": {"code": -32000, "message": "the fake server refuses"}}
    carried = result(text("The tool failed: server fake: the fake server refuses"), isError=True)
    assert ids(compare(context, direct, carried)) == ["D-RPC-ERROR"]
    lost = result(text("The tool failed"), isError=True)
    assert compare(context, direct, lost).needed is None
    assert compare(context, direct, result(text("the fake server refuses"))).needed is None
