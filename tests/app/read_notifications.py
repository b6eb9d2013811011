"""What xfce4-notifyd drew, read from its own widgets over the accessibility bus (AT-SPI).

    /usr/bin/python3 tests/app/read_notifications.py      (with a desktop's environment)

Prints JSON on stdout: one entry per notification window of xfce4-notifyd on the screen, with
its labels in order (the summary, then the body), each label's text as the daemon set it
(after its own markup handling), the links inside it, the rows it is drawn in (its characters
grouped by the row each is drawn on, so wrapping shows) and its box on the screen; and the
labels of the buttons it drew. Prints ``[]`` while there is nothing to read (the daemon not yet
on the accessibility bus, no window).

It runs under Debian's Python with python3-gi and gir1.2-atspi-2.0 (the venv has no gi), in a
process of its own, and imports nothing from the project. The desktop is
``Desktop(accessible=True)`` of tests/app/test_xvfb_desktop.py.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, GLib  # noqa: E402  (after require_version)

DAEMON = "xfce4-notifyd"
SCREEN = Atspi.CoordType.SCREEN


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for i in range(node.get_child_count()):
        child = node.get_child_at_index(i)
        if child is not None:
            yield from _walk(child)


def _showing(node: Any) -> bool:
    return bool(node.get_state_set().contains(Atspi.StateType.SHOWING))


def _box(node: Any) -> list[int]:
    r = Atspi.Component.get_extents(node, SCREEN)
    return [r.x, r.y, r.width, r.height]


def _rows(label: Any, text: str) -> list[dict[str, Any]]:
    """The text as drawn: consecutive characters on the same row, with the row's top and the
    offset of its first character. Line feeds end a row and are not part of it."""
    rows: list[dict[str, Any]] = []
    for i, c in enumerate(text):
        top = Atspi.Text.get_character_extents(label, i, SCREEN).y
        if c == "\n":
            continue
        if not rows or rows[-1]["top"] != top or text[i - 1] == "\n":
            rows.append({"top": top, "offset": i, "text": ""})
        rows[-1]["text"] += c
    return rows


def _link(node: Any) -> dict[str, str]:
    uri = ""
    with contextlib.suppress(GLib.Error, AttributeError):  # a link that cannot say where to
        uri = node.get_hyperlink().get_uri(0) or ""
    return {"name": node.get_name() or "", "uri": uri}


def _label(node: Any) -> dict[str, Any]:
    text = Atspi.Text.get_text(node, 0, Atspi.Text.get_character_count(node))
    links = [_link(n) for n in _walk(node) if n.get_role() == Atspi.Role.LINK]
    return {
        "text": text,
        "showing": _showing(node),
        "box": _box(node),
        "links": links,
        "rows": _rows(node, text),
    }


def read() -> list[dict[str, Any]]:
    desktop = Atspi.get_desktop(0)
    found = []
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is None or app.get_name() != DAEMON:
            continue
        for j in range(app.get_child_count()):
            window = app.get_child_at_index(j)
            if window is None or not _showing(window):
                continue
            nodes = list(_walk(window))
            found.append(
                {
                    "box": _box(window),
                    "labels": [_label(n) for n in nodes if n.get_role() == Atspi.Role.LABEL],
                    "buttons": [
                        n.get_name()
                        for n in nodes
                        if n.get_role() == Atspi.Role.PUSH_BUTTON and _showing(n)
                    ],
                }
            )
    return found


def main() -> int:
    Atspi.set_timeout(2000, -1)  # an answer within 2 s, or this reading fails
    try:
        found = read()
    except GLib.Error as e:  # the bus or a window went away mid-reading: nothing to read now
        print(f"read_notifications: {e}", file=sys.stderr)
        found = []
    json.dump(found, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
