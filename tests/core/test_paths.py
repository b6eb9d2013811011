"""Where the database and configuration live."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from core import paths


def test_signoff_home_holds_both_the_database_and_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNOFF_HOME", str(tmp_path))
    assert paths.database_path() == tmp_path / "signoff.db"
    assert paths.config_path() == tmp_path / "config.toml"


def test_without_signoff_home_the_platform_directories_are_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SIGNOFF_HOME", raising=False)
    data = Path(platformdirs.user_data_dir("signoff", appauthor=False))
    config = Path(platformdirs.user_config_dir("signoff", appauthor=False))
    assert paths.database_path() == data / "signoff.db"
    assert paths.config_path() == config / "config.toml"
