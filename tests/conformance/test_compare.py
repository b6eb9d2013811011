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


def test_nothing_sent_either_way_is_not_a_feature_observed() -> None:
    context = Context("memory", SDK, Step("log-messages", "logging/message", "log"))
    assert cell([compare(context, [], [])]) == NOT_APPLICABLE
    assert cell([]) == NOT_APPLICABLE


def test_a_result_cut_at_the_limit_is_explained_only_as_a_start_with_the_marker() -> None:
    big = "x" * 70_000
    direct = result(text(big))
    marker = text("[Signoff: this result was 70039 bytes, over the limit of 65536 bytes the"
                  " operator set for server filesystem; cut: text of 70025 bytes (its first"
                  " 63000 bytes kept). The call ran; it is not repeated.]")  # fmt: skip
    context = Context("filesystem", SDK, Step("s", "result/over-limit", "call", "t", {}))
    cut = result(text("x" * 63000), marker, isError=True)
    assert ids(compare(context, direct, cut)) == ["D-RESULT-LIMIT"]
    assert compare(context, direct, result(text("x" * 63000), marker)).needed is None  # not isError
    changed = result(text("y" * 63000), marker, isError=True)  # not the server's start
    assert compare(context, direct, changed).needed is None


def test_a_difference_applies_only_where_it_is_listed() -> None:
    """D-RESULT-LIMIT is listed for server-filesystem's over-limit step: elsewhere it explains
    nothing."""
    marker = text("[Signoff: this result was 9 bytes, over the limit. The call ran.]")
    cut = result(text("x"), marker, isError=True)
    assert compare(call("result/over-limit"), result(text("x" * 9)), cut).needed is None
    large = Context("filesystem", SDK, Step("s", "result/large", "call", "t", {}))
    assert compare(large, result(text("x" * 9)), cut).needed is None


def test_a_json_rpc_error_must_reach_the_client_unchanged() -> None:
    context = Context("fake", SDK, Step("s", "error/json-rpc", "call", "t", {}))
    direct = {"error": {"code": -32000, "message": "the fake server refuses", "data": [1]}}
    assert ids(compare(context, direct, direct)) == []
    carried = result(text("The tool failed: server fake: the fake server refuses"), isError=True)
    assert compare(context, direct, carried).needed is None
    assert compare(context, direct, {"error": {**direct["error"], "data": None}}).needed is None
