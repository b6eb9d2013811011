"""The tray tells the operator which servers have tools to review, one entry per server that
opens Settings on that server's tools, and the entry goes once nothing waits
(app/review_notice.py, core/proxy/review.py). A real store and files, the scripted server of
tests/proxy/fake_server.py listed by a real ``signoff servers test``, the pins and classes set
with the real commands."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtGui import QAction

from app.review_notice import REVIEW_WHY as WHY
from app.tray import TrayApp
from tests.app.test_settings import LISTED_MS, NOTE_TOOLS, fake
from tests.conftest import run_signoff


def entries(tray: TrayApp) -> list[QAction]:
    return [a for a in tray.menu.actions() if "to review" in a.text()]


def test_the_tray_names_the_server_with_tools_to_review_and_opens_its_tools(
    home: Path, tray: TrayApp, qtbot
) -> None:
    assert entries(tray) == []
    fake(home, "notes", NOTE_TOOLS)
    run_signoff("servers", "test", "notes", home=home)  # its listing, as a proxy's would be
    tray.refresh()
    [entry] = entries(tray)
    assert entry.text() == "notes has 2 tools to review…"
    assert entry.toolTip() == "read_note, write_note"
    title, text = tray.said[-1]
    assert (title, text) == ("Signoff: tools to review", f"notes has 2 tools to review. {WHY}")
    said = len(tray.said)
    tray.refresh()
    assert len(tray.said) == said  # said once

    entry.trigger()
    settings = tray.settings
    assert settings is not None and settings.isVisible()
    assert settings.tabs.currentWidget() is settings.tools
    assert settings.tools.server_name() == "notes"
    qtbot.waitUntil(lambda: "notes" in settings.state.listings, timeout=LISTED_MS)

    run_signoff("pin", "notes", "--accept", home=home)
    tray.refresh()
    [entry] = entries(tray)  # pinned, not yet classified: both still wait
    assert entry.text() == "notes has 2 tools to review…"
    run_signoff("classify", "notes", "read_note=read_only", home=home)
    tray.refresh()
    assert [e.text() for e in entries(tray)] == ["notes has 1 tool to review…"]
    run_signoff("classify", "notes", "write_note=local_mutation", home=home)
    # The record of the new configuration wakes the tray: no refresh asked for.
    qtbot.waitUntil(lambda: entries(tray) == [], timeout=10_000)
    assert len(tray.said) == said  # fewer tools waiting is not news


def test_settings_already_open_lists_the_server_afresh_to_show_the_tools_waiting(
    home: Path, tray: TrayApp, qtbot
) -> None:
    script = fake(home, "notes", NOTE_TOOLS[:1])
    run_signoff("pin", "notes", "--accept", home=home)
    run_signoff("classify", "notes", "read_note=read_only", home=home)
    settings = tray.open_settings()
    settings.tools.select_server("notes")  # listed now: read_note alone
    qtbot.waitUntil(lambda: "notes" in settings.state.listings, timeout=LISTED_MS)

    added = json.loads(script.read_text())
    added["listing"] = json.dumps(NOTE_TOOLS)  # the server adds write_note
    script.write_text(json.dumps(added))
    run_signoff("servers", "test", "notes", home=home)
    tray.refresh()
    [entry] = entries(tray)
    assert entry.text() == "notes has 1 tool to review…"
    entry.trigger()

    def listed_afresh() -> bool:
        listing = settings.state.listings.get("notes")
        return listing is not None and len(listing.tools) == 2

    qtbot.waitUntil(listed_afresh, timeout=LISTED_MS)
    assert settings.tabs.currentWidget() is settings.tools
