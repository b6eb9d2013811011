"""Settings → Servers: a server's prompts and resources are turned on and off in its editor,
saved as ``signoff servers set`` saves them (decision 0055)."""

from __future__ import annotations

from pathlib import Path

from app.settings import SettingsWindow
from core import paths
from core.proxy import config as configuration
from core.proxy import manage


def test_a_servers_prompts_and_resources_are_turned_on_and_off_in_its_editor(
    home: Path, qtbot
) -> None:
    manage.add_server(paths.config_path(), "notes", "true")
    window = SettingsWindow(paths.config_path(), None)
    qtbot.addWidget(window)
    window.show()
    window.servers.select("notes")
    editor = window.servers.edit()
    assert editor is not None
    assert not editor.prompts.isChecked() and not editor.resources.isChecked()  # off at first
    editor.resources.setChecked(True)
    editor.save()
    server = configuration.load(paths.config_path()).servers["notes"]
    assert (server.prompts, server.resources) == (False, True)

    window.servers.select("notes")
    editor = window.servers.edit()
    assert editor is not None and editor.resources.isChecked()
    editor.resources.setChecked(False)
    editor.prompts.setChecked(True)
    editor.save()
    server = configuration.load(paths.config_path()).servers["notes"]
    assert (server.prompts, server.resources) == (True, False)
