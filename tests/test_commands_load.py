"""Each command loads only what it uses (decision 0033): no module a command has no use for is
imported on its way, whatever it costs. A behaviour, not a timing: each command is run as a
person (or an MCP host) runs it, with Python's own import log on (``PYTHONPROFILEIMPORTTIME``,
one stderr line per module imported), and the log is read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.store import Store
from tests.app.pending import make_pending
from tests.builders import record_runs
from tests.conftest import run_signoff
from tests.host import RawHost
from tests.proxy.rig import NOTES_TOOLS, Rig

IMPORT_LOG = {"PYTHONPROFILEIMPORTTIME": "1"}
# The SDK and its types (pydantic), the GUI toolkit, JSON Schema, the TOML editor, the async
# stack: each a tenth of a second or more, and no use to reading or deciding approvals.
HEAVY = ("mcp", "mcp_types", "pydantic", "pydantic_core", "PySide6", "shiboken6", "jsonschema",
         "referencing", "tomlkit", "anyio", "asyncio")  # fmt: skip
# The keyring's packages: for the commands that read the operator key or the kept head only.
KEYRING = ("keyring", "keyrings", "secretstorage", "jeepney", "cryptography")
# What serving an MCP host needs none of: the SDK (Signoff speaks JSON-RPC itself, decision
# 0030), the SDK's types (a plain listing is checked without them), the GUI toolkit, and
# OpenTelemetry unless configured (decision 0061).
NOT_FOR_SERVING = ("mcp", "mcp_types", "pydantic", "pydantic_core", "PySide6", "shiboken6",
                   "opentelemetry", "google", "requests")  # fmt: skip


def imported(stderr: str) -> set[str]:
    """The modules named in an import log (``-X importtime``'s lines)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    } - {"imported package"}


def of(packages: tuple[str, ...], modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in packages)


@pytest.fixture
def recorded(store: Store) -> Store:
    record_runs(store, 2)
    make_pending(store, run_id="to-approve")
    make_pending(store, run_id="to-reject")
    return store


def _approval(store: Store, run_id: str) -> str:
    (approval,) = store._conn.execute(
        "SELECT id FROM approvals WHERE run_id = ?", (run_id,)
    ).fetchone()
    return str(approval)


@pytest.mark.parametrize(
    ("args", "keyring"),
    [
        (["--help"], False),
        (["pending"], False),
        (["runs"], False),
        (["runs", "--json"], False),
        (["verify"], True),  # compares the chain with the head kept in the keyring
        (["approve", "to-approve"], True),  # signs the decision with the operator key
        (["reject", "to-reject"], True),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_an_operators_command_loads_no_heavy_module(
    recorded: Store, home: Path, args: list[str], keyring: bool
) -> None:
    if args[0] in ("approve", "reject"):
        args = [args[0], _approval(recorded, args[1])]
    done = run_signoff(*args, env=IMPORT_LOG, home=home, ok=True)
    modules = imported(done.stderr)
    assert "core.cli" in modules  # the log is read: the command's own modules are in it
    assert of(HEAVY, modules) == []
    if not keyring:
        assert of(KEYRING, modules) == []


def test_the_proxy_serves_a_host_without_the_sdk_or_the_gui(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From its start to its first tools/list answer and its exit at the end of its input."""
    rig = Rig(home)
    rig.add_fake("notes", NOTES_TOOLS)
    rig.pin("notes")
    rig.classify("notes", read_note="read_only")
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    host = RawHost(home, "notes")
    try:
        host.initialize()
        answer = host.request("tools/list", b"{}")
    finally:
        host.close()
    assert "read_note" in [t["name"] for t in answer["result"]["tools"]]
    modules = imported(host.stderr_path.read_text(errors="replace"))
    assert "core.proxy.hostsession" in modules
    assert of(NOT_FOR_SERVING, modules) == []


def test_the_import_log_names_each_module_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, mcp_types"],
        env={**os.environ, **IMPORT_LOG},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = imported(done.stderr)
    assert {"json", "mcp_types"} <= modules
    assert of(HEAVY, modules)
