"""Where Signoff keeps its database and configuration.

``SIGNOFF_HOME=DIR`` puts both in DIR (tests and scripts use it); otherwise the platform's user
data directory holds the database and its user config directory the configuration.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import platformdirs

APP_NAME = "signoff"
DATABASE_NAME = "signoff.db"
CONFIG_NAME = "config.toml"


def _home() -> Path | None:
    value = os.environ.get("SIGNOFF_HOME")
    return Path(value).expanduser().resolve() if value else None


def named_homes() -> dict[Path, Path]:
    """The home ``SIGNOFF_HOME`` names, as named (absolute, ``..`` taken on the text, no link
    followed), keyed by the folder it resolves to: where a database lies as the operator named
    it, which resolving loses (core/heads.py ``places``)."""
    value = os.environ.get("SIGNOFF_HOME")
    if not value:
        return {}
    named = Path(os.path.normpath(Path(value).expanduser().absolute()))
    return {named.resolve(): named}


def data_dir() -> Path:
    return _home() or Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    return _home() or Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def database_path() -> Path:
    return data_dir() / DATABASE_NAME


def config_path() -> Path:
    return config_dir() / CONFIG_NAME


def platform_dirs() -> tuple[Path, ...]:
    """Signoff's data, configuration and runtime folders where the platform puts them, whatever
    ``SIGNOFF_HOME`` says: still Signoff's files when another home is in use."""
    with warnings.catch_warnings():  # no XDG_RUNTIME_DIR: platformdirs warns of its fallback
        warnings.simplefilter("ignore")
        runtime = Path(platformdirs.user_runtime_dir(APP_NAME, appauthor=False))
    return (
        Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        runtime,
    )
