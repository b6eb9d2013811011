"""Prompts and resource templates read from the raw bytes a server sent, pinned whole, and
offered only as pinned (core/proxy/catalog.py)."""

from __future__ import annotations

import hashlib

import pytest

from core.errors import ListingRefused
from core.proxy import catalog


def page(items: bytes, member: bytes = b"prompts") -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":{"' + member + b'":' + items + b"}}"


@pytest.mark.guarantee("G-PROMPT-1")
def test_a_prompt_is_pinned_over_its_bytes_as_sent_so_a_change_of_spelling_is_a_change() -> None:
    sent = b'{"name":"greet","description":"Greets \\u0041"}'
    [item] = catalog.read([page(b"[" + sent + b"]")], catalog.PROMPTS).items
    assert (item.key, item.pin, item.raw) == ("greet", hashlib.sha256(sent).hexdigest(), sent)
    respelt = b'{"name":"greet","description":"Greets A"}'  # the same text, other bytes
    [again] = catalog.read([page(b"[" + respelt + b"]")], catalog.PROMPTS).items
    assert catalog.status(again, {"greet": item.pin}) == "changed"
    assert catalog.offered(catalog.Catalog((again,), ()), {"greet": item.pin}) == []


@pytest.mark.guarantee("G-PROMPT-1")
def test_only_pinned_and_unchanged_items_are_offered() -> None:
    listed = catalog.read([page(b'[{"name":"a"},{"name":"b"}]')], catalog.PROMPTS)
    a, b = listed.items
    assert catalog.status(b, {}) == "new"
    assert catalog.offered(listed, {"a": a.pin}) == [a]


def test_templates_are_known_by_their_uri_template() -> None:
    sent = b'[{"uriTemplate":"demo://{id}","name":"demo"}]'
    [item] = catalog.read([page(sent, b"resourceTemplates")], catalog.TEMPLATES).items
    assert item.key == "demo://{id}"


@pytest.mark.parametrize(
    "items",
    [b'{"not":"an array"}', b'[{"name":"a"},{"name":"a"}]'],
    ids=["not an array", "a name twice"],
)
@pytest.mark.guarantee("G-PROMPT-1")
def test_a_listing_that_cannot_be_trusted_whole_is_refused_whole(items: bytes) -> None:
    with pytest.raises(ListingRefused):
        catalog.read([page(items)], catalog.PROMPTS)


def test_a_malformed_item_is_dropped_and_the_others_stay() -> None:
    items = (b'[{"name":"ok"},{"name":"twice","name":"again"},{"description":"no name"},'
             b'{"name":"hid\\u200bden"},7]')  # fmt: skip
    listed = catalog.read([page(items)], catalog.PROMPTS)
    assert [i.key for i in listed.items] == ["ok"]
    assert len(listed.dropped) == 4
