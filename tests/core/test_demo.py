"""``signoff demo``: the notes server, the scripted agent through a real proxy, the first-start
offer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from core import cli
from core.demo import first_start
from core.demo.run import NEW_NOTE, NEW_TEXT, NOTES_DIR, OLD_NOTE, WELCOME_NOTE
from core.demo.server import Notes
from core.gate import Gate, GateConfig
from core.store import Store
from tests.conftest import NO_KEYRING_ENV, ROOT, SIGNOFF, run_signoff

# --- the notes server --------------------------------------------------------------------------


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("inside\n")
    (tmp_path / "secret.md").write_text("outside\n")
    return folder


@pytest.mark.parametrize(
    "name", ["../secret.md", "..", "sub/a.md", "sub\\a.md", "/etc/passwd", ".hidden", "", "a\0b"]
)
@pytest.mark.parametrize("tool", ["read_note", "write_note", "delete_note"])
def test_a_name_that_would_leave_the_folder_is_refused(notes: Path, tool: str, name: str) -> None:
    before = sorted(p.relative_to(notes.parent) for p in notes.parent.rglob("*"))
    text, error = Notes(notes).call(tool, {"name": name, "text": "overwritten"})
    assert error
    assert "refused" in text or "1 to" in text
    assert sorted(p.relative_to(notes.parent) for p in notes.parent.rglob("*")) == before
    assert (notes.parent / "secret.md").read_text() == "outside\n"


def test_a_symbolic_link_in_the_folder_is_refused(notes: Path) -> None:
    (notes / "link.md").symlink_to(notes.parent / "secret.md")
    for tool in ("read_note", "write_note", "delete_note"):
        text, error = Notes(notes).call(tool, {"name": "link.md", "text": "overwritten"})
        assert error and "refused" in text
    assert (notes.parent / "secret.md").read_text() == "outside\n"
    assert Notes(notes).call("list_notes", {}) == ("a.md", False)


def test_the_tools_work_inside_the_folder(notes: Path) -> None:
    server = Notes(notes)
    assert server.call("read_note", {"name": "a.md"}) == ("inside\n", False)
    assert server.call("write_note", {"name": "b.md", "text": "hello"}) == (
        "wrote b.md (5 bytes)",
        False,
    )
    assert server.call("list_notes", {}) == ("a.md\nb.md", False)
    assert server.call("delete_note", {"name": "a.md"}) == ("deleted a.md", False)
    assert server.call("read_note", {"name": "a.md"})[1]
    assert server.call("write_note", {"name": "c.md"}) == ("text must be a string", True)


def test_the_server_over_stdio_refuses_with_an_error_result(notes: Path) -> None:
    anyio.run(_over_stdio, notes)


async def _over_stdio(notes: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "core.demo.server", str(notes)], cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        hints = {
            name: (t.annotations.read_only_hint, t.annotations.destructive_hint)
            for name, t in tools.items()
            if t.annotations is not None
        }
        assert hints == {
            "list_notes": (True, None),
            "read_note": (True, None),
            "write_note": (False, False),
            "delete_note": (False, True),
        }
        result = await session.call_tool("read_note", {"name": "../secret.md"})
        assert getattr(result, "is_error", None) is True
        result = await session.call_tool("read_note", {"name": "a.md"})
        assert getattr(result, "is_error", None) is False
        assert [getattr(c, "text", None) for c in getattr(result, "content", [])] == ["inside\n"]


# --- signoff demo --------------------------------------------------------------------------------


def _home_from(stdout: str) -> Path:
    lines = stdout.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("The demo's home"))
    return Path(lines[index + 1].strip())


@pytest.mark.slow
def test_the_demo_runs_through_a_real_proxy_and_leaves_a_record_that_verifies(
    tmp_path: Path,
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()  # the demo's temporary home is made here (TMPDIR), and removed with tmp_path
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_HOME"}
    env.update(NO_KEYRING_ENV, TMPDIR=str(temp))
    done = subprocess.run(
        [str(SIGNOFF), "demo", "--no-app", "--auto-approve", "--wait", "30"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"wrote {NEW_NOTE} ({len(NEW_TEXT.encode())} bytes)" in out
    assert f"deleted {OLD_NOTE}" in out
    assert "Approved by demo:auto-approve: the call ran, once." in out

    home = _home_from(out)
    assert home.parent == temp.resolve()
    assert home.stat().st_mode & 0o777 == 0o700
    assert f"rm -rf {home}" in out
    folder = home / NOTES_DIR
    assert sorted(p.name for p in folder.iterdir()) == [NEW_NOTE, WELCOME_NOTE]
    assert (folder / NEW_NOTE).read_text(encoding="utf-8") == NEW_TEXT  # written exactly once

    runs = [
        json.loads(line)
        for line in run_signoff("runs", "--json", home=home, env=NO_KEYRING_ENV).stdout.splitlines()
    ]
    assert sorted((r["tool"], r["status"]) for r in runs) == [
        ("delete_note", "COMPLETED"),
        ("list_notes", "COMPLETED"),
        ("read_note", "COMPLETED"),
        ("write_note", "COMPLETED"),
    ]
    assert run_signoff("pending", home=home, env=NO_KEYRING_ENV).stdout == ""
    verified = run_signoff("verify", "--no-keyring", home=home, env=NO_KEYRING_ENV)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("intact")


def test_the_demo_refuses_a_home_that_is_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "mine"
    home.mkdir()
    (home / "config.toml").write_text("# mine\n")
    assert cli.main(["demo", "--no-app", "--home", str(home)]) == 2
    assert "is not an empty directory" in capsys.readouterr().err
    assert [p.name for p in home.iterdir()] == ["config.toml"]
    assert (home / "config.toml").read_text() == "# mine\n"


# --- the first start offers it -------------------------------------------------------------------


def test_the_first_start_offers_the_demo_once(home: Path, store: Store) -> None:
    config = home / "config.toml"
    assert first_start.should_offer(store, config, home)
    first_start.remember_offered(home)
    assert (home / first_start.OFFERED_FILE).is_file()
    assert not first_start.should_offer(store, config, home)


def test_no_offer_once_a_server_is_configured_or_a_run_exists(home: Path, store: Store) -> None:
    config = home / "config.toml"
    config.write_text('[servers.fs]\ncommand = "true"\n')
    assert not first_start.should_offer(store, config, home)
    config.write_text("this is not toml = = \n")
    assert not first_start.should_offer(store, config, home)
    config.unlink()
    assert first_start.should_offer(store, config, home)
    Gate(GateConfig(store=store, tools=[])).begin("run-1", "a run").close()
    assert not first_start.should_offer(store, config, home)
