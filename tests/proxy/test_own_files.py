"""Through a real `signoff proxy`: a request naming Signoff's own files waits for the operator,
whatever the rules allow and whatever the tool's class, and nothing reaches the server before
the operator approves it (G-FILES-2, core/policy/own_files.py, decision 0028)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig

WAITS = "needs the operator's approval"


@pytest.fixture
def rig(home: Path, tmp_path: Path) -> Rig:
    """The notes server, its write allowed by the operator's rules (its read is, by default),
    and a user home of this test's, where ``~`` is for the proxy and its server."""
    rig = Rig(home)
    rig.env["HOME"] = str(tmp_path / "user")
    rig.env.pop("XDG_CONFIG_HOME", None)  # the platform's configuration folder: ~/.config
    (tmp_path / "user").mkdir()
    rig.notes = tmp_path / "notes.txt"  # type: ignore[attr-defined]
    rig.notes.write_text("first\n")  # type: ignore[attr-defined]
    rig.add_fake("notes", NOTES_TOOLS, notes=str(rig.notes))  # type: ignore[attr-defined]
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")
    rig.signoff("policy", "local_mutation", "allow")
    return rig


def _started(rig: Rig) -> int:
    with rig.store() as store:
        (count,) = store._conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'step.tool_started'"
        ).fetchone()
    return int(count)


def _linked(home: Path, tmp_path: Path) -> str:
    (tmp_path / "innocent").symlink_to(home)
    return f"{tmp_path}/innocent/config.toml"


PATHS: dict[str, Callable[[Path, Path], str]] = {
    "the-configuration-by-tilde": lambda home, tmp: "~/.config/signoff/config.toml",
    "the-database-by-dots": lambda home, tmp: f"{home}/../{home.name}/signoff.db",
    "a-link-into-the-data-folder": _linked,
}


def _calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    """A write and a read naming ``path``, as the whole value, then deep in another one."""
    return [("write_note", {"text": path}), ("read_note", {"path": path}),
            ("write_note", {"text": "x", "meta": {"files": ["a", path]}}),
            ("read_note", {"options": {"files": [{"path": path}]}})]  # fmt: skip


@pytest.mark.guarantee("G-FILES-2")
def test_a_read_or_write_of_signoffs_own_files_waits_under_an_allow_rule(
    rig: Rig, home: Path, tmp_path: Path
) -> None:
    """Each way of naming them (``~``, ``..``, a link), as the whole value and deep in another,
    with the read-only and the write tool: each waits as ``own_files``, nothing reaches the
    server before approval; an unrelated path runs as the rules say; a deny stays a deny."""
    calls = [call for case in PATHS.values() for call in _calls(case(home, tmp_path))]

    async def scenario() -> None:
        async with rig.client("notes") as host:
            for name, arguments in calls:
                held = await host.call_tool(name, arguments)
                assert not held.is_error and WAITS in text(held), (name, arguments, text(held))
            waiting = rig.pending()
            assert [(p["tool"], p["kind"], p["arguments"]) for p in waiting] == [
                (name, "own_files", arguments) for name, arguments in calls
            ]
            assert all("touches Signoff's own files" in p["reason"] for p in waiting)
            assert _started(rig) == 0  # nothing reached the server
            assert rig.notes.read_text() == "first\n"  # type: ignore[attr-defined]

            # An unrelated path still runs under the allow rule, unasked.
            ran = await host.call_tool("write_note", {"text": "~/notes.txt"})
            assert not ran.is_error and text(ran) == "wrote '~/notes.txt'"

            # The operator's approval, and only it, lets one through.
            write = waiting[0]
            assert write["arguments"] == calls[0][1]
            rig.signoff("approve", write["id"], "--hash", write["hash"])
            done = await host.call_tool("write_note", calls[0][1])
            assert not done.is_error and text(done).startswith("wrote ")
            assert _started(rig) == 2

            # A tool the operator denies stays denied: the rule never loosens a rule.
            rig.signoff("policy", "notes", "write_note", "deny")
            refused = await host.call_tool("write_note", {"text": f"{home}/signoff.db"})
            assert refused.is_error and "Signoff refused this call" in text(refused)
            assert len(rig.pending()) == len(calls) - 1

    anyio.run(scenario)
    assert _started(rig) == 2  # the unrelated write, then the approved one
    assert rig.notes.read_text().startswith("first\n~/notes.txt\n")  # type: ignore[attr-defined]
