"""The tray says when config.toml is not the configuration Signoff recorded, shows the diff, and
takes the file up or puts the recorded one back only when the operator says so; real widgets,
the real Secret Service holding the operator key, the CLI as a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config_outside import TITLE
from app.tray import TrayApp
from core.heads import MemoryHeadStore
from core.store import Store
from tests.conftest import _secret_service_problem, need, run_signoff

pytestmark = pytest.mark.guarantee("G-CONFIG-2")


@pytest.fixture
def tray(store: Store, home: Path, qtbot):
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    run_signoff("settings", "hold_seconds", "2", home=home, ok=True)  # recorded by Signoff
    app = TrayApp(store, MemoryHeadStore(), home, native=False)
    app.start()
    qtbot.waitUntil(lambda: app.operator.cached(store.database_id), timeout=10_000)
    app.check_config()
    yield app
    app.stop()


def _texts(tray: TrayApp) -> list[str]:
    return [a.text() for a in tray.menu.actions()]


def test_a_hand_edit_is_shown_with_its_diff_and_taken_up_only_when_accepted(
    store: Store, home: Path, tray: TrayApp, qtbot
) -> None:
    config = home / "config.toml"
    assert tray.config_outside == ""
    assert not any(TITLE in t for t in _texts(tray))
    recorded = config.read_bytes()
    config.write_bytes(recorded + b'\n[policy]\nlocal_mutation = "allow"\n')
    tray.sweep()
    assert "differs from the configuration Signoff recorded" in tray.config_outside
    assert tray.said[-1][0] == f"Signoff: {TITLE}"
    assert f"{TITLE}: review…" in _texts(tray)
    assert TITLE.lower() in tray.tray.toolTip()

    dialog = tray.open_config_outside()
    assert '+local_mutation = "allow"' in dialog.diff.toPlainText()
    assert not dialog.accept_button.isDefault() and not dialog.restore_button.isDefault()
    dialog.accept_button.click()
    assert tray.config_outside == ""
    assert not any(TITLE in t for t in _texts(tray))
    shown = run_signoff("settings", home=home, ok=True).stdout
    assert "policy.local_mutation = allow" in shown


def test_restore_puts_the_recorded_configuration_back(
    store: Store, home: Path, tray: TrayApp, qtbot
) -> None:
    config = home / "config.toml"
    recorded = config.read_bytes()
    config.write_text("hold_seconds = 99\n")
    tray.sweep()
    dialog = tray.open_config_outside()
    assert "-hold_seconds = 2" in dialog.diff.toPlainText()
    dialog.restore_button.click()
    assert config.read_bytes() == recorded
    assert tray.config_outside == ""


def test_a_file_that_does_not_validate_is_not_accepted_and_the_alarm_stays(
    store: Store, home: Path, tray: TrayApp, qtbot
) -> None:
    config = home / "config.toml"
    config.write_text("not = [toml")
    tray.sweep()
    dialog = tray.open_config_outside()
    dialog.accept_button.click()
    assert dialog.problem.toolTip() == "ConfigError"  # in words in the window, named here
    assert "ConfigError" not in dialog.problem.text()
    assert tray.config_outside != ""
    config.unlink()  # a file that is gone is changed outside too: the recorded rules stay
    tray.sweep()
    assert "is gone" in tray.config_outside


def test_accept_takes_up_only_the_file_the_operator_was_shown(
    store: Store, home: Path, tray: TrayApp, qtbot
) -> None:
    config = home / "config.toml"
    recorded = config.read_bytes()
    config.write_bytes(recorded + b"# tidy\n")
    tray.sweep()
    dialog = tray.open_config_outside()
    assert "+# tidy" in dialog.diff.toPlainText()
    config.write_bytes(recorded + b'\n[policy]\nlocal_mutation = "allow"\n')  # after the look
    dialog.accept_button.click()
    assert dialog.problem.toolTip() == "ConfigChangedOutside"
    assert "is not the file you were shown" in dialog.problem.text()
    assert tray.config_outside != ""
    shown = run_signoff("settings", home=home).stdout
    assert "policy.local_mutation = approve" in shown
