"""Results flattened and capped; the tray app woken by a datagram, or nothing when none listens."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from core.proxy import wake
from core.proxy.answers import RESULT_CAP, flatten


def test_text_is_kept_and_other_content_is_summarised() -> None:
    result = flatten({"content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "mimeType": "image/png", "data": "AAAA" * 10},
        {"type": "resource", "resource": {"uri": "file:///x", "text": "inside"}},
        {"type": "resource_link", "uri": "file:///y"},
    ], "isError": False})  # fmt: skip
    assert result["text"].splitlines() == [
        "hello", "[image: image/png, about 30 bytes]", "[resource: file:///x]", "inside",
        "[link: file:///y]",
    ]  # fmt: skip
    assert result["isError"] is False


def test_structured_content_alone_is_written_as_json() -> None:
    assert flatten({"content": [], "structuredContent": {"t": 1}})["text"] == '{"t": 1}'


def test_a_result_over_64_kib_is_capped_with_a_marker() -> None:
    big = "é" * RESULT_CAP  # two bytes each: the cap falls inside a character
    text = flatten({"content": [{"type": "text", "text": big}]})["text"]
    kept, marker = text.rsplit("\n", 1)
    assert len(kept.encode()) <= RESULT_CAP
    assert marker == f"[truncated by Signoff: {2 * RESULT_CAP - len(kept.encode())} more bytes]"


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets on this platform")
def test_wake_reaches_a_listening_app_and_costs_nothing_without_one(
    home: Path,
) -> None:
    assert wake.socket_path() == home / "run" / "wake.sock"
    assert wake.wake("approval") is False  # no app: the send fails at once, quietly
    path = wake.socket_path()
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as app:
        app.bind(str(path))
        app.settimeout(5)
        assert wake.wake("approval") is True
        assert app.recv(64) == b"approval"
