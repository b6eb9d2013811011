"""Which tools wait for the operator's review (core/proxy/review.py), from a server's status
file and the configuration: pure reading, no server started."""

from __future__ import annotations

import json
from pathlib import Path

from core import private_files
from core.proxy import status
from core.proxy.config import Config, ServerConfig, ToolConfig
from core.proxy.review import Waiting, waiting
from core.tools import SideEffect

DESTRUCTIVE = {"destructiveHint": True}


def listed(directory: Path, server: str, tools: dict[str, dict[str, object]]) -> None:
    """A status as a proxy writes it: each tool's pin and annotations."""
    private_files.make_dir(directory)
    text = json.dumps({"at": "2026-01-01T00:00:00Z", "error": "", "tools": tools})
    private_files.write_text(directory / f"{server}.json", text)


def config(**tools: ToolConfig) -> Config:
    return Config(servers={"notes": ServerConfig("notes", "notes-server", tools=tools)})


def test_new_changed_unclassified_and_contradicted_tools_wait_and_the_others_do_not(
    tmp_path: Path,
) -> None:
    listed(tmp_path, "notes", {
        "kept": {"pin": "a", "annotations": {}},
        "new": {"pin": "b", "annotations": {}},
        "changed": {"pin": "c2", "annotations": {}},
        "unclassified": {"pin": "d", "annotations": {}},
        "contradicted": {"pin": "e", "annotations": DESTRUCTIVE},
        "overruled": {"pin": "f", "annotations": DESTRUCTIVE},
    })  # fmt: skip
    read = SideEffect.READ_ONLY
    found = waiting(tmp_path, config(
        kept=ToolConfig(read, "a"),
        changed=ToolConfig(read, "c1"),
        unclassified=ToolConfig(None, "d"),
        contradicted=ToolConfig(read, "e"),
        overruled=ToolConfig(read, "f", overrule_annotations=True),
    ))  # fmt: skip
    assert found == (Waiting("notes", ("new", "changed", "unclassified", "contradicted")),)
    assert found[0].words() == "notes has 4 tools to review"


def test_nothing_waits_for_a_server_without_a_status_or_with_one_that_does_not_read(
    tmp_path: Path,
) -> None:
    assert waiting(tmp_path, config()) == ()
    private_files.make_dir(tmp_path)
    private_files.write_text(tmp_path / "notes.json", "{not json")
    assert status.read(tmp_path, "notes") is None
    assert waiting(tmp_path, config()) == ()


def test_a_status_entry_of_the_wrong_shape_waits_rather_than_failing(tmp_path: Path) -> None:
    listed(tmp_path, "notes", {"odd": "not an object"})  # type: ignore[dict-item]
    assert waiting(tmp_path, config(odd=ToolConfig(SideEffect.READ_ONLY, "a"))) == (
        Waiting("notes", ("odd",)),
    )
