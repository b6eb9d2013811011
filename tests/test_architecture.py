"""The tree keeps its shape: core never imports Qt or the app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

FORBIDDEN_IN_CORE = ("PySide6", "shiboken6", "app", "qasync", "desktop_notifier")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "path", sorted((ROOT / "core").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_core_never_imports_qt_or_the_app(path: Path) -> None:
    bad = {
        name
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IN_CORE)
    }
    assert not bad, f"{path} imports {sorted(bad)}"


def test_the_architecture_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom PySide6.QtCore import QObject\nimport app.launcher\n")
    assert {"PySide6.QtCore", "app.launcher"} <= _imports(sample)


def test_the_terminal_commands_load_no_qt() -> None:
    """A host launching `signoff proxy` must not pay for the GUI toolkit."""
    import subprocess
    import sys

    code = (
        "import sys; import app.launcher, core.cli, core.proxy.server;"
        " sys.exit(1 if any(m.startswith('PySide6') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60, check=False).returncode == 0
