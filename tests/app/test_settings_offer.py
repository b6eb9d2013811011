"""Settings → Servers: a server's prompts and resources are turned on and off in its editor,
saved as ``signoff servers set`` saves them (decision 0055); so is sampling, as ``signoff servers
sampling`` saves it (decision 0057)."""

from __future__ import annotations

from pathlib import Path

from app.settings import SettingsWindow
from core import paths
from core.proxy import config as configuration
from core.proxy import config_record, manage
from core.store import Store


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


def test_sampling_is_off_and_turned_on_in_the_editor_saved_and_recorded_as_the_cli_does(
    home: Path, qtbot, store: Store, tmp_path: Path
) -> None:
    manage.add_server(paths.config_path(), "notes", "true")
    before = paths.config_path().read_bytes()
    as_the_cli = tmp_path / "cli" / "config.toml"  # another file: the same code, nothing recorded
    as_the_cli.parent.mkdir()
    as_the_cli.write_bytes(before)
    manage.set_sampling(as_the_cli, "notes", on=True)
    window = SettingsWindow(paths.config_path(), store)
    qtbot.addWidget(window)
    window.show()
    window.servers.select("notes")
    editor = window.servers.edit()
    assert editor is not None
    assert not editor.sampling.isChecked()  # off until the operator allows it
    editor.sampling.setChecked(True)
    editor.save()
    assert paths.config_path().read_bytes() == as_the_cli.read_bytes()
    in_force = config_record.state(store, paths.config_path())
    assert not in_force.changed_outside  # the configuration in force is the file
    assert in_force.config().servers["notes"].sampling

    window.servers.select("notes")
    editor = window.servers.edit()
    assert editor is not None and editor.sampling.isChecked()
    editor.sampling.setChecked(False)
    editor.save()
    assert paths.config_path().read_bytes() == before  # off is the key's absence, as at first
    assert not config_record.state(store, paths.config_path()).config().servers["notes"].sampling
