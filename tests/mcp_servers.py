"""Real third-party MCP servers and the MCP Inspector CLI, as installed by
``scripts/mcp-servers.sh`` into ``.cache/mcp-servers/``.

Each function returns how to start one server over stdio: ``(command, args, env_extra)``, with
absolute paths. When the install (or node) is missing, the calling test skips locally with the
reason and fails in CI (``tests.conftest.need``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NamedTuple

from tests.conftest import ROOT, need

CACHE = ROOT / ".cache" / "mcp-servers"
NPM_SCOPE = CACHE / "npm" / "node_modules" / "@modelcontextprotocol"
INSTALL_HINT = "run bash scripts/mcp-servers.sh (make test does)"


class ServerCommand(NamedTuple):
    command: str
    args: list[str]
    env_extra: dict[str, str]


def _node() -> str:
    node = shutil.which("node")
    need(node is not None, f"node is not installed; {INSTALL_HINT}")
    assert node is not None
    return node


def _npm_bin(package: str, bin_name: str) -> Path:
    """The script a package's ``bin`` entry names, as npm installed it."""
    manifest = NPM_SCOPE / package / "package.json"
    need(manifest.is_file(), f"@modelcontextprotocol/{package} is not installed; {INSTALL_HINT}")
    bins = json.loads(manifest.read_text(encoding="utf-8"))["bin"]
    script = (manifest.parent / bins[bin_name]).resolve()
    need(script.is_file(), f"{script} is missing; {INSTALL_HINT}")
    return script


def _venv_bin(venv: str, name: str) -> Path:
    script = CACHE / venv / "bin" / name
    need(script.is_file(), f"{name} is not installed in {CACHE / venv}; {INSTALL_HINT}")
    return script


def filesystem_server(*allowed_directories: Path) -> ServerCommand:
    """@modelcontextprotocol/server-filesystem, confined to ``allowed_directories``."""
    assert allowed_directories, "the filesystem server needs at least one directory"
    script = _npm_bin("server-filesystem", "mcp-server-filesystem")
    return ServerCommand(
        _node(), [str(script), *(str(d.resolve()) for d in allowed_directories)], {}
    )


def filesystem_server_roots_only() -> ServerCommand:
    """@modelcontextprotocol/server-filesystem started with no directory, as hosts with
    workspaces start it: it may reach only the roots its client declares."""
    script = _npm_bin("server-filesystem", "mcp-server-filesystem")
    return ServerCommand(_node(), [str(script)], {})


def memory_server(memory_file: Path) -> ServerCommand:
    """@modelcontextprotocol/server-memory, keeping its graph in ``memory_file`` (JSON lines).
    Without MEMORY_FILE_PATH it would write beside its own code, in the cache."""
    script = _npm_bin("server-memory", "mcp-server-memory")
    return ServerCommand(_node(), [str(script)], {"MEMORY_FILE_PATH": str(memory_file.resolve())})


def everything_server() -> ServerCommand:
    """@modelcontextprotocol/server-everything over stdio."""
    script = _npm_bin("server-everything", "mcp-server-everything")
    return ServerCommand(_node(), [str(script), "stdio"], {})


def time_server(local_timezone: str = "UTC") -> ServerCommand:
    """mcp-server-time (PyPI, own venv)."""
    script = _venv_bin("time", "mcp-server-time")
    return ServerCommand(str(script), ["--local-timezone", local_timezone], {})


def git_server(repository: Path) -> ServerCommand:
    """mcp-server-git (PyPI, own venv), limited to ``repository``."""
    script = _venv_bin("git", "mcp-server-git")
    need(shutil.which("git") is not None, "git is not installed")
    return ServerCommand(str(script), ["--repository", str(repository.resolve())], {})


def inspector_cli() -> list[str]:
    """The MCP Inspector in CLI mode; append its options, then the server's command line:
    ``[*inspector_cli(), "--method", "tools/list", command, *args]``."""
    script = _npm_bin("inspector", "mcp-inspector")
    return [_node(), str(script), "--cli"]
