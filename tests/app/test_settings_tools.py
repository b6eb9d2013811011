"""The tools page never loses a choice (app/settings_tools.py, decision 0041): a class is saved
as it is chosen, by the CLI's own code, into the file and the recorded configuration; several
tools are classified in one write; the server's hints are a suggestion applied only on a click;
each server counts its tools offered and waiting; a choice that cannot be saved is kept and
said in words; unsaved parameters ask before they are left. Real windows, real files, and the
scripted server of tests/proxy/fake_server.py listed by a real ``signoff servers test``."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox

from app.settings import SettingsWindow
from app.settings_tools import ToolsPage
from core import paths
from core.proxy import config_record
from core.store import Store
from core.tools import SideEffect
from tests.app.test_settings import config, fake, open_settings, test_tools

TOOLS = [
    {"name": f"tool_{n}", "description": f"Tool {n}.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    for n in range(14)
]  # fmt: skip


def pinned(home: Path, qtbot, store: Store, tools: list[dict[str, object]]) -> SettingsWindow:
    """A window on the server ``s`` listing ``tools``, each pinned, none classified."""
    fake(home, "s", tools)
    window = open_settings(home, qtbot, store)
    test_tools(window, qtbot, "s")
    window.tabs.setCurrentWidget(window.tools)
    window.tools.select_server("s")
    window.tools.pin_all_new()
    return window


def recorded(store: Store) -> list[str]:
    """The texts of the configurations recorded in the chain, oldest first."""
    with store.snapshot() as conn:
        rows = conn.execute(
            "SELECT payload FROM events WHERE kind = ? ORDER BY seq", (config_record.KIND,)
        ).fetchall()
    return [json.loads(payload)["text"] for (payload,) in rows]


def choose(page: ToolsPage, value: str | None) -> None:
    """Choose a class in the detail's box, as the operator does."""
    page.detail.side_effect.setCurrentIndex(page.detail.side_effect.findData(value))


def answer(page: ToolsPage, button: QMessageBox.StandardButton) -> None:
    """Answer the question the page is about to ask, once it shows it."""

    def click() -> None:
        assert page.question is not None, "the page asked nothing"
        page.question.button(button).click()

    QTimer.singleShot(0, click)


def on_disk(tool: str) -> SideEffect | None:
    return config().servers["s"].tools[tool].side_effect


def test_a_class_choice_survives_switching_tools_and_is_in_the_file_and_the_record(
    home: Path, qtbot, store: Store
) -> None:
    window = pinned(home, qtbot, store, TOOLS[:3])
    page = window.tools
    page.select_tool("tool_0")
    choose(page, "read_only")
    page.select_tool("tool_1")
    assert page.detail.side_effect.currentData() is None  # tool_1 has its own (no) class
    page.select_tool("tool_0")
    assert page.detail.side_effect.currentData() == "read_only"
    assert page.detail.side_effect.currentText() == "Read-only"  # in words
    assert on_disk("tool_0") is SideEffect.READ_ONLY
    text = paths.config_path().read_text()
    assert recorded(store)[-1] == text  # the configuration in force is the file
    assert not config_record.state(store, paths.config_path()).changed_outside
    row = next(r for r in range(page.table.rowCount()) if page.table.item(r, 0).text() == "tool_0")
    assert page.table.item(row, 2).text() == "Read-only"


def test_several_selected_tools_are_classified_at_once_in_one_write(
    home: Path, qtbot, store: Store
) -> None:
    window = pinned(home, qtbot, store, TOOLS)
    page = window.tools
    chosen = ["tool_2", "tool_3", "tool_7", "tool_13"]
    page.select_tools(chosen)
    assert page.selected_tools() == chosen
    assert page.bulk_button.text() == "Classify 4 tools"
    page.bulk_class.setCurrentIndex(page.bulk_class.findData("destructive"))
    before = len(recorded(store))
    page.bulk_button.click()
    assert len(recorded(store)) == before + 1  # one write, recorded once
    assert {t: on_disk(t) for t in chosen} == dict.fromkeys(chosen, SideEffect.DESTRUCTIVE)
    assert all(on_disk(f"tool_{n}") is None for n in (0, 1, 4, 5, 6, 8, 9, 10, 11, 12))
    assert page.message.text() == (
        "Saved: tool_2, tool_3, tool_7, tool_13 now have the class “Destructive”."
    )
    assert page.selected_tools() == chosen  # still selected, for the next step


def test_the_servers_hint_is_shown_as_a_suggestion_and_applied_only_on_a_click(
    home: Path, qtbot, store: Store
) -> None:
    hinted = [{**TOOLS[0], "annotations": {"readOnlyHint": True}}, TOOLS[1]]
    window = pinned(home, qtbot, store, hinted)
    page = window.tools
    page.select_tool("tool_0")
    offer = page.detail.use_suggestion
    assert not page.detail.suggestion.isHidden()
    assert offer.text() == "Use the server's suggestion: Read-only"
    assert on_disk("tool_0") is None  # shown, not applied
    page.select_tool("tool_1")
    assert page.detail.suggestion.isHidden()  # no hints, no suggestion
    page.select_tool("tool_0")
    assert on_disk("tool_0") is None
    offer.click()
    assert on_disk("tool_0") is SideEffect.READ_ONLY
    assert page.detail.suggestion.isHidden()  # taken: nothing left to suggest
    assert page.detail.availability.text() == "yes"


def test_each_server_counts_its_tools_offered_and_waiting_in_the_picker_and_header(
    home: Path, qtbot, store: Store
) -> None:
    fake(home, "s", TOOLS[:4])
    fake(home, "quiet", TOOLS[:1])
    window = open_settings(home, qtbot, store)
    page = window.tools
    texts = [page.server.itemText(i) for i in range(page.server.count())]
    assert texts == ["s: not listed yet", "quiet: not listed yet"]
    test_tools(window, qtbot, "s")
    page.select_server("s")
    assert page.server.currentText() == "s: 0 offered, 4 waiting for you"
    page.pin_all_new()
    page.select_tools(["tool_0", "tool_1"])
    page.bulk_class.setCurrentIndex(page.bulk_class.findData("read_only"))
    page.bulk_button.click()
    assert page.server.currentText() == "s: 2 offered, 2 waiting for you"
    assert page.counts.text() == (
        "2 of 4 tools offered to hosts, 2 waiting for you: 2 without a class."
    )
    window.close()
    # Another window, which has listed nothing itself: the counts of the last connection.
    again = open_settings(home, qtbot, store)
    assert again.tools.server.itemText(0) == "s: 2 offered, 2 waiting for you"
    assert "as listed at its last connection" in again.tools.counts.text()


def test_a_class_that_cannot_be_saved_is_kept_said_in_words_and_saved_on_try_again(
    home: Path, qtbot, store: Store
) -> None:
    window = pinned(home, qtbot, store, TOOLS[:2])
    page = window.tools
    path = paths.config_path()
    good = path.read_bytes()
    path.write_bytes(good + b"# changed behind Signoff's back\n")
    tampered = path.read_bytes()
    page.select_tool("tool_0")
    choose(page, "local_mutation")
    said = page.detail.class_message
    assert said.text().startswith("Not saved: the configuration file was changed")
    assert "ConfigChangedOutside" not in said.text()  # no internal name in the window...
    assert "ConfigChangedOutside" in said.toolTip()  # ...only in the tooltip
    assert path.read_bytes() == tampered  # nothing written
    page.select_tool("tool_1")
    page.select_tool("tool_0")
    assert page.detail.side_effect.currentData() == "local_mutation"  # the choice is kept
    row = next(r for r in range(page.table.rowCount()) if page.table.item(r, 0).text() == "tool_0")
    assert page.table.item(row, 2).text() == "Changes this computer (not saved)"
    assert page.detail.retry.isVisibleTo(page)
    answer(page, QMessageBox.StandardButton.Cancel)
    window.close()
    assert window.isVisible()  # closing asked first, and the window stayed

    path.write_bytes(good)  # put back as recorded
    assert page.retry_class() == ""
    assert on_disk("tool_0") is SideEffect.LOCAL_MUTATION
    assert not page.failed and not page.detail.retry.isVisibleTo(page)


def _leave(page: ToolsPage, to: str, reply: QMessageBox.StandardButton) -> None:
    answer(page, reply)
    page.table.selectRow(_row(page, to))


def _row(page: ToolsPage, tool: str) -> int:
    return next(r for r in range(page.table.rowCount()) if page.table.item(r, 0).text() == tool)


def test_leaving_a_tool_with_unsaved_parameters_asks_and_stays_discards_or_saves(
    home: Path, qtbot, store: Store
) -> None:
    window = pinned(home, qtbot, store, TOOLS[:2])
    page = window.tools
    page.select_tool("tool_0")
    page.detail.params.deny.setText("path")
    assert page.detail.params.message.text() == "Not saved yet."

    _leave(page, "tool_1", QMessageBox.StandardButton.Cancel)
    assert page.selected() == "tool_0"  # stayed, with what was typed
    assert page.detail.params.deny.text() == "path"

    _leave(page, "tool_1", QMessageBox.StandardButton.Save)
    assert page.selected() == "tool_1"
    assert config().servers["s"].tools["tool_0"].deny == ("path",)

    page.detail.params.deny.setText("path")
    _leave(page, "tool_0", QMessageBox.StandardButton.Discard)
    assert page.selected() == "tool_0"
    assert config().servers["s"].tools["tool_1"].deny == ()
    page.select_tool("tool_1")  # nothing unsaved now: no question
    assert page.detail.params.deny.text() == ""
