"""Where Signoff keeps its database and configuration.

``SIGNOFF_HOME=DIR`` puts both in DIR (tests and scripts use it); otherwise the platform's user
data directory holds the database and its user config directory the configuration.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "signoff"
DATABASE_NAME = "signoff.db"
CONFIG_NAME = "config.toml"


def _home() -> Path | None:
    value = os.environ.get("SIGNOFF_HOME")
    return Path(value).expanduser().resolve() if value else None


def data_dir() -> Path:
    return _home() or Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    return _home() or Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def database_path() -> Path:
    return data_dir() / DATABASE_NAME


def config_path() -> Path:
    return config_dir() / CONFIG_NAME
