"""What a host keeps of a server's tools once wired (core/host_tools.py), and `signoff hosts wire`
refusing, without --force, to take tools away from a host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.host_backups import backup_dir
from core.host_tools import CHANGED, HINTS, UNCLASSIFIED, UNPINNED, judge, of_server
from core.proxy.config import Config, ServerConfig, ToolConfig, load
from core.tools import SideEffect
from tests.conftest import SIGNOFF, run_signoff
from tests.core.hostkit import FILESYSTEM_TOOLS, last_listed, listing, set_up

READ, WRITE = SideEffect.READ_ONLY, SideEffect.LOCAL_MUTATION
AT = "2026-12-05T20:10:31.123456Z"
NOTES = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
DESKTOP = {
    "mcpServers": {"notes": {"command": NOTES[0], "args": NOTES[1:]}},
    "preferences": {"theme": "dark"},
}


def server(**tools: ToolConfig) -> ServerConfig:
    return ServerConfig("notes", NOTES[0], tuple(NOTES[1:]), tools=tools)


def listed(*names: str, **hints: dict[str, bool]) -> dict[str, dict[str, object]]:
    return {n: {"pin": f"pin-{n}", "annotations": hints.get(n, {})} for n in names}


def pinned(name: str, side_effect: SideEffect | None = None, **settings: bool) -> ToolConfig:
    return ToolConfig(side_effect, pin=f"pin-{name}", **settings)


# --- what the host keeps ---------------------------------------------------------------------


def test_the_preview_says_how_many_tools_the_host_has_which_are_offered_and_which_wait() -> None:
    tools = {t: pinned(t) for t in FILESYSTEM_TOOLS}
    tools["read_text_file"] = pinned("read_text_file", READ)
    tools["list_directory"] = pinned("list_directory", READ)
    kept = judge("notes", "notes", server(**tools), listed(*FILESYSTEM_TOOLS), AT)
    waiting = [t for t in FILESYSTEM_TOOLS if t not in ("read_text_file", "list_directory")]
    assert kept.sentence() == (
        "the host has 14 tools today (as notes listed them at 2026-12-05 20:10 UTC);"
        " Signoff will offer 2 (read_text_file, list_directory);"
        f" 12 wait for you to classify them ({', '.join(waiting)})"
    )
    assert kept.lost == tuple(waiting)
    assert kept.loses


def test_a_server_whose_every_tool_is_pinned_and_classified_takes_nothing_away() -> None:
    kept = judge(
        "notes", "notes", server(a=pinned("a", READ), b=pinned("b", WRITE)), listed("a", "b"), AT
    )
    assert kept.offered == ("a", "b")
    assert not kept.loses
    assert kept.sentence().endswith("; Signoff will offer all of them (a, b)")


def test_each_tool_that_is_not_offered_is_said_with_why() -> None:
    tools = {
        "new": ToolConfig(READ),  # classified, never pinned
        "moved": ToolConfig(READ, pin="an-older-pin"),
        "bare": pinned("bare"),
        "rm": pinned("rm", READ),
        "kept": pinned("kept", WRITE, overrule_annotations=True),
    }
    kept = judge(
        "notes",
        "notes",
        server(**tools),
        listed(
            "new",
            "moved",
            "bare",
            "rm",
            "kept",
            "unknown",
            rm={"destructiveHint": True},
            kept={"destructiveHint": True},
        ),
        AT,
    )
    assert kept.offered == ("kept",)
    assert kept.waiting == {
        UNPINNED: ("new", "unknown"),
        CHANGED: ("moved",),
        UNCLASSIFIED: ("bare",),
        HINTS: ("rm",),
    }
    assert kept.classless == ("bare", "unknown")
    assert "2 wait for you to pin them (new, unknown)" in kept.sentence()
    assert "1 changed since you pinned it (moved)" in kept.sentence()
    assert "1 has server hints that disagree with its class (rm)" in kept.sentence()


def test_without_a_listing_the_pinned_tools_are_what_the_host_has() -> None:
    tools = {"a": pinned("a", READ), "b": pinned("b"), "c": ToolConfig(READ)}
    kept = judge("notes", "notes", server(**tools), None)
    assert kept.today == ("a", "b")
    assert kept.lost == ("b",)
    assert "(as you pinned them)" in kept.sentence()


@pytest.mark.parametrize("configured", [None, server(), server(c=ToolConfig(READ))])
def test_a_server_nothing_of_which_is_pinned_has_unknown_tools_and_loses_them_all(
    configured: ServerConfig | None,
) -> None:
    kept = judge("notes", "notes", configured, None)
    assert kept.today is None
    assert kept.loses
    assert kept.in_signoff is (configured is not None)
    assert "cannot tell which tools the host has today" in kept.sentence()
    assert "is offered none of them until you pin and classify them" in kept.sentence()


def test_the_listing_is_read_from_the_servers_last_connection(home: Path) -> None:
    seen = listing(["a", "b", "c"])
    set_up(home / "config.toml", "notes", NOTES, seen, {"a": READ})
    config = load(home / "config.toml")
    before = of_server("notes", "notes", config, home / "status")
    assert (before.today, before.seen) == (("a", "b", "c"), "as you pinned them")
    last_listed(home, "notes", listing(["a", "b", "c", "d"]))  # the server has a new tool
    after = of_server("notes", "notes", config, home / "status")
    assert after.today == ("a", "b", "c", "d")
    assert after.waiting == {UNPINNED: ("d",), UNCLASSIFIED: ("b", "c")}
    assert of_server("x", "x", Config(), home / "status").today is None  # not in Signoff


# --- the command line ------------------------------------------------------------------------


@pytest.fixture
def desktop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    path = user / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(DESKTOP, indent=2) + "\n")
    monkeypatch.setenv("HOME", str(user))
    return path


def wire(desktop: Path, home: Path, *args: str) -> tuple[int, str, str]:
    done = run_signoff(
        "hosts", "wire", "claude_desktop", *args, env={"HOME": str(desktop.parents[2])}, home=home
    )
    return done.returncode, done.stdout, done.stderr


def notes_with_two_classified(home: Path) -> None:
    seen = listing(FILESYSTEM_TOOLS)
    set_up(
        home / "config.toml", "notes", NOTES, seen, {"read_text_file": READ, "list_directory": READ}
    )
    last_listed(home, "notes", seen)


def test_wiring_that_takes_tools_away_is_refused_naming_them_and_writes_nothing(
    desktop: Path, home: Path
) -> None:
    notes_with_two_classified(home)
    original, config = desktop.read_bytes(), (home / "config.toml").read_bytes()
    code, out, err = wire(desktop, home)
    assert code == 2
    assert err.strip().endswith("[ToolsWouldBeLost]")
    lost = [t for t in FILESYSTEM_TOOLS if t not in ("read_text_file", "list_directory")]
    assert f"  notes: {', '.join(lost)}\n" in err
    assert "signoff classify notes read_file=CLASS read_media_file=CLASS" in err
    assert "signoff hosts wire claude_desktop --force" in err
    assert "notes: the host has 14 tools today" in out
    assert "Signoff will offer 2 (read_text_file, list_directory); 12 wait for you" in out
    assert desktop.read_bytes() == original
    assert (home / "config.toml").read_bytes() == config
    assert not backup_dir(home / "config.toml").exists()

    code, out, err = wire(desktop, home, "--force")
    assert code == 0, err
    spec = json.loads(desktop.read_text())["mcpServers"]["notes"]
    assert [spec["command"], *spec["args"]] == [str(SIGNOFF), "proxy", "notes"]


def test_a_server_that_offers_every_tool_is_wired_without_force(desktop: Path, home: Path) -> None:
    seen = listing(["read_note", "list_notes"])
    set_up(home / "config.toml", "notes", NOTES, seen, {"read_note": READ, "list_notes": READ})
    code, out, err = wire(desktop, home)
    assert code == 0, err
    assert "notes: the host has 2 tools today (as you pinned them); Signoff will offer all" in out
    assert json.loads(desktop.read_text())["mcpServers"]["notes"]["args"][-2:] == ["proxy", "notes"]


def test_wiring_a_server_signoff_never_saw_is_refused_and_imports_nothing(
    desktop: Path, home: Path
) -> None:
    original = desktop.read_bytes()
    code, out, err = wire(desktop, home)
    assert code == 2
    assert err.strip().endswith("[ToolsWouldBeLost]")
    assert "  notes: every tool it has today" in err
    assert "signoff hosts import claude_desktop --server notes" in err
    assert "notes: Signoff does not have this server yet" in out
    assert desktop.read_bytes() == original
    assert not (home / "config.toml").exists()


def test_the_dry_run_says_what_the_host_would_lose_and_changes_nothing(
    desktop: Path, home: Path
) -> None:
    notes_with_two_classified(home)
    original = desktop.read_bytes()
    code, out, err = wire(desktop, home, "--dry-run")
    assert code == 0, err
    assert "12 wait for you to classify them" in out
    assert "wiring takes tools away from Claude Desktop, so would be refused without --force" in out
    assert '+      "command": ' in out
    assert desktop.read_bytes() == original
