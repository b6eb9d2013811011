"""The MCP hosts page, offscreen, over a real Claude Desktop file in a temporary home: reading,
importing, wiring with a preview, undoing, and refusals said on the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.settings_hosts import HostsPage
from core.host_backups import backups
from core.hosts import Host, HostConfigError
from core.proxy.config import load
from core.tools import SideEffect
from tests.conftest import SIGNOFF
from tests.core.hostkit import FILESYSTEM_TOOLS, last_listed, listing, set_up

DESKTOP = {
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "notes": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"],
            "env": {"NOTES_ROOT": "kept-by-the-host"},
            "x-unknown": True,
        },
        "git": {"command": "uvx", "args": ["mcp-server-git"]},
        "remote": {"type": "sse", "url": "https://example.com/sse"},
    },
    "preferences": {"theme": "dark"},
}


@pytest.fixture
def desktop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    path = user / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(DESKTOP, indent=2) + "\n")
    monkeypatch.setenv("HOME", str(user))
    return path


@pytest.fixture
def page(home: Path, desktop: Path, qtbot) -> HostsPage:
    page = HostsPage(home / "config.toml")
    qtbot.addWidget(page)
    return page


def column(page: HostsPage, number: int) -> list[str]:
    return [page.table.item(row, number).text() for row in range(page.table.rowCount())]


def test_the_page_offers_the_hosts_file_and_says_what_would_happen_to_each_server(
    page: HostsPage, desktop: Path
) -> None:
    assert page.host() is Host.CLAUDE_DESKTOP
    assert page.file_edit.text() == str(desktop)
    assert page.read()
    assert column(page, 0) == ["notes", "git", "remote"]
    assert column(page, 1) == ["notes", "git", "-"]
    assert column(page, 2)[2].startswith("skipped: an SSE server")  # Streamable HTTP only
    assert page.checked() == ["notes", "git"]
    remote = page.table.item(2, 0)
    assert not remote.flags() & Qt.ItemFlag.ItemIsUserCheckable


def test_importing_asks_first_then_adds_the_checked_servers(
    page: HostsPage, home: Path, qtbot
) -> None:
    page.read()
    page.set_checked("git", False)
    page.import_selected()
    assert page.dialog is not None
    assert "notes: npx -y @modelcontextprotocol/server-filesystem" in page.dialog.text.toPlainText()
    assert "kept-by-the-host" not in page.dialog.text.toPlainText()
    with qtbot.waitSignal(page.servers_changed, timeout=5000):
        page.dialog.accept_button.click()
    assert page.dialog is None
    assert set(load(home / "config.toml").servers) == {"notes"}
    assert column(page, 2)[0].startswith("already in Signoff as notes. Once wired: Signoff has not")
    assert page.error is None


def test_cancelling_the_import_changes_nothing(page: HostsPage, home: Path, qtbot) -> None:
    page.read()
    page.import_selected()
    assert page.dialog is not None
    with qtbot.assertNotEmitted(page.servers_changed):
        page.dialog.cancel_button.click()
    assert page.dialog is None
    assert not (home / "config.toml").exists()


@pytest.mark.guarantee("G-HOST-1")
def test_wiring_previews_the_change_writes_it_with_a_copy_and_undo_restores_it(
    page: HostsPage, desktop: Path, home: Path, qtbot
) -> None:
    original = desktop.read_bytes()
    page.read()
    page.wire_selected()
    dialog = page.dialog
    assert dialog is not None
    assert dialog.accept_button.text() == "Write"
    assert dialog.text.isReadOnly()
    preview = dialog.text.toPlainText()
    assert '-      "command": "npx",' in preview
    assert f'+      "command": "{SIGNOFF}",' in preview
    assert desktop.read_bytes() == original  # nothing before Write

    dialog.confirm_box.setChecked(True)  # neither server's tools are pinned: both are lost
    with qtbot.waitSignal(page.servers_changed, timeout=5000):
        dialog.accept_button.click()

    assert page.error is None
    written = json.loads(desktop.read_text())
    assert list(written) == list(DESKTOP)
    assert written["preferences"] == {"theme": "dark"}
    notes = written["mcpServers"]["notes"]
    assert [notes["command"], *notes["args"]] == [str(SIGNOFF), "proxy", "notes"]
    assert notes["env"]["NOTES_ROOT"] == "kept-by-the-host"
    assert notes["x-unknown"] is True
    assert written["mcpServers"]["remote"] == DESKTOP["mcpServers"]["remote"]
    assert set(load(home / "config.toml").servers) == {"notes", "git"}
    [backup] = backups(home / "config.toml")
    assert backup.backup.read_bytes() == original
    assert str(backup.backup) in page.message.text()

    assert page.undo_last() is not None
    assert desktop.read_bytes() == original
    assert page.error is None


@pytest.mark.guarantee("G-HOST-1")
def test_a_file_the_host_saved_while_the_preview_was_open_is_not_overwritten(
    page: HostsPage, desktop: Path, home: Path
) -> None:
    page.read()
    page.wire_selected()
    assert page.dialog is not None
    desktop.write_text(desktop.read_text().replace("dark", "light"))  # the host saved meanwhile
    edited = desktop.read_bytes()
    page.dialog.confirm_box.setChecked(True)
    page.dialog.accept_button.click()
    assert isinstance(page.error, HostConfigError)
    assert desktop.read_bytes() == edited
    assert backups(home / "config.toml") == []
    assert not (home / "config.toml").exists()  # nothing imported for a write that was refused


def test_cancelling_the_write_leaves_the_file_and_the_configuration(
    page: HostsPage, desktop: Path, home: Path
) -> None:
    original = desktop.read_bytes()
    page.read()
    page.wire_selected()
    assert page.dialog is not None
    page.dialog.cancel_button.click()
    assert desktop.read_bytes() == original
    assert not (home / "config.toml").exists()
    assert backups(home / "config.toml") == []


@pytest.mark.guarantee("G-HOST-1")
def test_a_malformed_host_file_is_said_plainly_and_nothing_changes(
    page: HostsPage, tmp_path: Path, home: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"a": {"command": "x",,}}}')
    page.file_edit.setText(str(broken))
    assert not page.read()
    assert isinstance(page.error, HostConfigError)
    assert str(broken) in page.message.text()
    assert page.table.rowCount() == 0
    page.import_selected()
    page.wire_selected()
    assert page.dialog is None
    assert broken.read_text() == '{"mcpServers": {"a": {"command": "x",,}}}'
    assert not (home / "config.toml").exists()


@pytest.mark.guarantee("G-HOST-1")
def test_a_file_with_comments_is_listed_but_wiring_it_is_refused_on_the_page(
    page: HostsPage, tmp_path: Path, home: Path
) -> None:
    commented = tmp_path / "mcp.json"
    commented.write_text('{\n  // mine\n  "mcpServers": {"a": {"command": "x"}}\n}\n')
    before = commented.read_bytes()
    page.file_edit.setText(str(commented))
    assert page.read()
    assert page.checked() == ["a"]
    page.wire_selected()
    assert page.dialog is None
    assert isinstance(page.error, HostConfigError)
    assert commented.read_bytes() == before
    assert not (home / "config.toml").exists()


@pytest.mark.guarantee("G-HOST-1")
def test_undo_after_the_host_edited_the_file_is_refused_on_the_page(
    page: HostsPage, desktop: Path
) -> None:
    page.read()
    page.wire_selected()
    assert page.dialog is not None
    page.dialog.confirm_box.setChecked(True)
    page.dialog.accept_button.click()
    desktop.write_text(desktop.read_text().replace("dark", "light"))
    edited = desktop.read_bytes()
    assert page.undo_last() is None
    assert isinstance(page.error, HostConfigError)
    assert desktop.read_bytes() == edited


# --- what the host keeps of its tools ------------------------------------------------------

NOTES = [DESKTOP["mcpServers"]["notes"]["command"], *DESKTOP["mcpServers"]["notes"]["args"]]
OFFERED = ("read_text_file", "list_directory")
LOST = [t for t in FILESYSTEM_TOOLS if t not in OFFERED]


@pytest.fixture
def notes_two_of_fourteen(home: Path) -> Path:
    """Signoff's notes: fourteen tools listed and pinned, two of them classified."""
    seen = listing(FILESYSTEM_TOOLS)
    set_up(home / "config.toml", "notes", NOTES, seen, dict.fromkeys(OFFERED, SideEffect.READ_ONLY))
    last_listed(home, "notes", seen)
    return home / "config.toml"


def test_what_happens_says_which_tools_the_host_keeps_once_wired(
    page: HostsPage, notes_two_of_fourteen: Path
) -> None:
    page.read()
    what = column(page, 2)
    assert what[0].startswith("already in Signoff as notes")
    assert ". Once wired: the host has 14 tools today (as notes listed them at " in what[0]
    assert "Signoff will offer 2 (read_text_file, list_directory);" in what[0]
    assert f"12 wait for you to classify them ({', '.join(LOST)})." in what[0]
    assert "Signoff has not listed or pinned" not in what[0]
    assert "Signoff does not have this server yet" in what[1]  # git: never imported
    assert page.table.item(0, 2).toolTip() == what[0]


def test_wiring_that_takes_tools_away_asks_naming_them_and_cancelling_writes_nothing(
    page: HostsPage, desktop: Path, notes_two_of_fourteen: Path
) -> None:
    original, config = desktop.read_bytes(), notes_two_of_fourteen.read_bytes()
    page.read()
    page.set_checked("git", False)
    page.wire_selected()
    dialog = page.dialog
    assert dialog is not None
    assert not dialog.warning.isHidden()
    assert f"• notes would lose {', '.join(LOST)}. The host has 14 tools" in dialog.warning.text()
    assert "Tools page" in dialog.warning.text()
    assert "signoff " not in dialog.warning.text() + dialog.confirm_box.text()  # no command
    assert not dialog.confirm_box.isHidden()
    assert not dialog.accept_button.isEnabled()  # not until the loss is confirmed
    dialog.accept_button.click()
    assert desktop.read_bytes() == original

    dialog.cancel_button.click()
    assert page.dialog is None
    assert desktop.read_bytes() == original
    assert notes_two_of_fourteen.read_bytes() == config
    assert backups(notes_two_of_fourteen) == []


def test_confirming_the_loss_wires_the_host(
    page: HostsPage, desktop: Path, notes_two_of_fourteen: Path
) -> None:
    page.read()
    page.set_checked("git", False)
    page.wire_selected()
    assert page.dialog is not None
    page.dialog.confirm_box.setChecked(True)
    assert page.dialog.accept_button.isEnabled()
    page.dialog.accept_button.click()
    assert page.error is None
    notes = json.loads(desktop.read_text())["mcpServers"]["notes"]
    assert notes["args"][-2:] == ["proxy", "notes"]


def test_wiring_a_server_that_offers_every_tool_asks_only_for_the_write(
    page: HostsPage, home: Path, desktop: Path
) -> None:
    set_up(
        home / "config.toml",
        "notes",
        NOTES,
        listing(OFFERED),
        dict.fromkeys(OFFERED, SideEffect.READ_ONLY),
    )
    page.read()
    page.set_checked("git", False)
    page.wire_selected()
    dialog = page.dialog
    assert dialog is not None
    assert dialog.warning.isHidden() and dialog.confirm_box.isHidden()
    assert dialog.accept_button.isEnabled()
    dialog.accept_button.click()
    assert json.loads(desktop.read_text())["mcpServers"]["notes"]["args"][-1] == "notes"


def test_a_remote_entry_is_imported_with_its_url_never_its_token_and_is_not_wired(
    home: Path, desktop: Path, qtbot
) -> None:
    token = "tk_not-a-real-token"  # noqa: S105  # a fake token, to see it is never copied
    tickets = {"url": f"https://mcp.example.com/mcp?api_key={token}",
               "headers": {"Authorization": f"Bearer {token}"}}  # fmt: skip
    with_remote = {**DESKTOP, "mcpServers": {"tickets": tickets}}
    desktop.write_text(json.dumps(with_remote, indent=2) + "\n")
    original = desktop.read_bytes()
    page = HostsPage(home / "config.toml")
    qtbot.addWidget(page)
    assert page.read()
    assert "moved to the OS keyring as secret tickets-authorization" in column(page, 2)[0]
    assert token not in " ".join(column(page, c)[0] for c in range(page.table.columnCount()))
    assert column(page, 2)[0].endswith("Not wired: edit the host's entry by hand.")
    page.import_selected()
    assert page.dialog is not None
    shown = page.dialog.text.toPlainText()
    assert "tickets: https://mcp.example.com/mcp?api_key=" in shown and token not in shown
    with qtbot.waitSignal(page.servers_changed, timeout=5000):
        page.dialog.accept_button.click()
    server = load(home / "config.toml").servers["tickets"]
    assert dict(server.headers) == {"Authorization": "${keyring:tickets-authorization}"}
    assert token not in (home / "config.toml").read_text()
    page.wire_selected()  # the remote entry is checked, and only imported
    assert page.dialog is None and "Nothing to wire" in page.message.text()
    assert desktop.read_bytes() == original
