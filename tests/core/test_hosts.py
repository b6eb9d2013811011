"""Importing servers from MCP hosts' files and wiring the hosts to ``signoff proxy``: real files
in tmp_path, the real configuration editor, and the installed command."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from core.errors import ConfigError
from core.host_backups import backup_dir, backups, undo, write_wire
from core.hosts import (
    Action,
    Host,
    HostConfigError,
    apply_import,
    default_paths,
    plan_import,
    plan_wire,
    proposed_name,
    read_host,
    signoff_command,
)
from core.proxy.config import Config, load
from core.proxy.manage import add_server
from tests.conftest import SIGNOFF, run_signoff

SECRET = "ghp_not-a-real-token"  # noqa: S105  # a fake token, to see it is never copied

CLAUDE_DESKTOP = {
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "notes": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"],
            "env": {"NOTES_TOKEN": SECRET},
            "x-unknown": {"kept": [1, 2.5, "é"]},
        },
        "git tools": {"command": "uvx", "args": ["mcp-server-git"]},
        "remote": {"url": "https://example.com/mcp"},
        "through": {"command": str(SIGNOFF), "args": ["proxy", "through"]},
    },
    "preferences": {"theme": "dark"},
}

VSCODE = {
    "inputs": [{"type": "promptString", "id": "token", "password": True}],
    "servers": {
        "github": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${input:token}"},
            "envFile": "${workspaceFolder}/.env",
        },
        "docs": {"type": "http", "url": "https://example.com/mcp"},
        "local": {"command": "node", "args": ["${workspaceFolder}/server.js"]},
    },
}

CLAUDE_CODE_USER = {
    "numStartups": 12,
    "mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": ["fs-server", "/a"]}},
    "projects": {
        "/home/me/app": {
            "allowedTools": [],
            "mcpServers": {"fs": {"command": "npx", "args": ["fs-server", "/b"]}},
            "history": [{"display": "hello"}],
        },
        "/home/me/empty": {"allowedTools": []},
    },
    "tipsHistory": {"a": 1},
}


def write(path: Path, document: dict[str, Any], indent: int | str = 4) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=indent, ensure_ascii=False) + "\n")
    return path


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory for the hosts' files."""
    path = tmp_path / "user"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
def desktop(user: Path) -> Path:
    return write(user / ".config" / "Claude" / "claude_desktop_config.json", CLAUDE_DESKTOP)


def actions(items: list[Any]) -> dict[str, tuple[Action, str]]:
    return {item.key: (item.action, item.name) for item in items}


def entry(path: Path, *keys: str) -> Any:
    node: Any = json.loads(path.read_text())
    for key in keys:
        node = node[key]
    return node


# --- where the files are, and reading them ---------------------------------------------------


def test_default_paths_are_under_the_home_directory_as_each_platform_keeps_them(
    user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("APPDATA", raising=False)
    desktop_on = {p: default_paths(Host.CLAUDE_DESKTOP, p)[0] for p in ("linux", "darwin", "win32")}
    assert desktop_on == {
        "linux": user / ".config/Claude/claude_desktop_config.json",
        "darwin": user / "Library/Application Support/Claude/claude_desktop_config.json",
        "win32": user / "AppData/Roaming/Claude/claude_desktop_config.json",
    }
    monkeypatch.setenv("APPDATA", str(user / "roaming"))
    assert default_paths(Host.VSCODE, "win32") == [user / "roaming/Code/User/mcp.json"]
    assert default_paths(Host.VSCODE, "linux") == [user / ".config/Code/User/mcp.json"]
    assert default_paths(Host.CURSOR, "darwin") == [user / ".cursor/mcp.json"]
    assert default_paths(Host.CLAUDE_CODE, "linux") == [user / ".claude.json"]


def test_each_host_kind_finds_its_own_servers_table(tmp_path: Path) -> None:
    desktop = read_host(write(tmp_path / "d.json", CLAUDE_DESKTOP), Host.CLAUDE_DESKTOP)
    assert [e.key for e in desktop.entries] == ["notes", "git tools", "remote", "through"]
    vscode = read_host(write(tmp_path / "v.json", VSCODE), Host.VSCODE)
    assert [e.key for e in vscode.entries] == ["github", "docs", "local"]
    as_cursor = read_host(tmp_path / "v.json", Host.CURSOR)  # VS Code's table is not mcpServers
    assert as_cursor.entries == ()
    code = read_host(write(tmp_path / ".claude.json", CLAUDE_CODE_USER), Host.CLAUDE_CODE)
    assert [(e.key, e.table) for e in code.entries] == [
        ("fs", ("mcpServers",)),
        ("fs@/home/me/app", ("projects", "/home/me/app", "mcpServers")),
    ]
    assert code.select(["fs"]) == ["fs", "fs@/home/me/app"]
    with pytest.raises(HostConfigError):
        code.select(["nope"])


def test_malformed_json_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n    "b": {}\n  }\n}\n')
    with pytest.raises(HostConfigError) as refused:
        read_host(path, Host.CLAUDE_DESKTOP)
    assert isinstance(refused.value, ConfigError)
    assert f"{path}:4:" in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}',  # a key twice
        '["not", "an", "object"]',
        '{"mcpServers": ["a"]}',
        '{"mcpServers": {"a": "npx"}}',
        "",
    ],
)
def test_a_file_that_cannot_be_read_whole_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text)
    with pytest.raises(HostConfigError):
        read_host(path, Host.CURSOR)


def test_comments_and_trailing_commas_are_read_but_strings_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        "// VS Code's own comment\n"
        "{\n"
        '  "servers": {\n'
        '    /* a block\n     comment */ "web": {\n'
        '      "command": "node", // why\n'
        '      "args": ["//not a comment", "/* nor this */", "a,}", "q\\"//"],\n'
        "    },\n"
        "  },\n"
        "}\n"
    )
    hostfile = read_host(path, Host.VSCODE)
    assert hostfile.jsonc
    assert hostfile.entries[0].spec == {
        "command": "node",
        "args": ["//not a comment", "/* nor this */", "a,}", 'q"//'],
    }
    plain = read_host(write(tmp_path / "plain.json", VSCODE), Host.VSCODE)
    assert not plain.jsonc


# --- the import plan -------------------------------------------------------------------------


def test_the_import_plan_says_what_happens_to_each_entry_and_why(tmp_path: Path) -> None:
    hostfile = read_host(write(tmp_path / "d.json", CLAUDE_DESKTOP), Host.CLAUDE_DESKTOP)
    items = plan_import(hostfile, Config())
    assert actions(items) == {
        "notes": (Action.IMPORT, "notes"),
        "git tools": (Action.IMPORT, "git-tools"),
        "remote": (Action.IMPORT, "remote"),  # by its URL (tests/core/test_host_remote.py)
        "through": (Action.WIRED, ""),
    }
    notes = items[0]
    assert (notes.command, notes.args, notes.env) == (
        "npx",
        ("-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"),
        ("NOTES_TOKEN",),
    )
    assert all(SECRET not in item.reason for item in items)


def test_the_hosts_own_variables_in_a_command_are_skipped(tmp_path: Path) -> None:
    hostfile = read_host(write(tmp_path / "mcp.json", VSCODE), Host.VSCODE)
    assert actions(plan_import(hostfile, Config())) == {
        "github": (Action.IMPORT, "github"),  # ${input:...} in a value: the host expands it
        "docs": (Action.IMPORT, "docs"),  # remote: by its URL
        "local": (Action.SKIPPED, ""),  # ${workspaceFolder} in an argument: Signoff cannot
    }


def test_a_signoff_server_with_the_same_command_is_already_imported_another_is_a_conflict(
    tmp_path: Path, home: Path
) -> None:
    config_path = home / "config.toml"
    add_server(config_path, "notes", "npx", ["other-server"])
    add_server(config_path, "git", "uvx", ["mcp-server-git"])
    hostfile = read_host(write(tmp_path / "d.json", CLAUDE_DESKTOP), Host.CLAUDE_DESKTOP)
    assert actions(plan_import(hostfile, load(config_path))) == {
        "notes": (Action.CONFLICT, "notes"),
        "git tools": (Action.IMPORTED, "git"),
        "remote": (Action.IMPORT, "remote"),  # by its URL (tests/core/test_host_remote.py)
        "through": (Action.WIRED, ""),
    }


def test_two_different_entries_of_one_name_get_two_signoff_names(tmp_path: Path) -> None:
    hostfile = read_host(write(tmp_path / ".claude.json", CLAUDE_CODE_USER), Host.CLAUDE_CODE)
    assert actions(plan_import(hostfile, Config())) == {
        "fs": (Action.IMPORT, "fs"),
        "fs@/home/me/app": (Action.IMPORT, "fs-2"),
    }


@pytest.mark.parametrize(
    ("name", "proposed"),
    [("ok_name-1", "ok_name-1"), ("my server", "my-server"), ("-x.y", "x-y"), ("ü", "server"),
     ("a" * 40, "a" * 32)],
)  # fmt: skip
def test_a_name_signoff_cannot_take_gets_a_valid_one(name: str, proposed: str) -> None:
    assert proposed_name(name) == proposed


# --- importing -------------------------------------------------------------------------------


def test_importing_stores_the_variables_names_never_their_values(desktop: Path, home: Path) -> None:
    config_path = home / "config.toml"
    items = plan_import(read_host(desktop, Host.CLAUDE_DESKTOP), Config())
    assert apply_import(config_path, items, ["notes", "git tools"]) == ["notes", "git-tools"]
    config = load(config_path)
    assert config.servers["notes"].env == ("NOTES_TOKEN",)
    assert config.servers["git-tools"].args == ("mcp-server-git",)
    assert SECRET not in config_path.read_text()


def test_a_conflict_is_imported_only_when_replacing_is_asked(desktop: Path, home: Path) -> None:
    config_path = home / "config.toml"
    add_server(config_path, "notes", "npx", ["other-server"])
    before = config_path.read_bytes()
    items = plan_import(read_host(desktop, Host.CLAUDE_DESKTOP), load(config_path))
    with pytest.raises(HostConfigError):
        apply_import(config_path, items, ["notes", "git tools"])
    assert config_path.read_bytes() == before
    apply_import(config_path, items, ["notes"], replace=True)
    assert load(config_path).servers["notes"].args[-1] == "/home/me/notes"


@pytest.mark.parametrize("key", ["through", "missing"])
def test_an_entry_that_cannot_be_imported_is_refused_and_nothing_is_written(
    desktop: Path, home: Path, key: str
) -> None:
    config_path = home / "config.toml"
    items = plan_import(read_host(desktop, Host.CLAUDE_DESKTOP), Config())
    with pytest.raises(HostConfigError):
        apply_import(config_path, items, ["notes", key])
    assert not config_path.exists()


# --- wiring ----------------------------------------------------------------------------------


@pytest.mark.guarantee("G-HOST-1")
def test_wiring_keeps_a_byte_identical_copy_and_every_other_key_in_its_order(
    desktop: Path, home: Path
) -> None:
    config_path = home / "config.toml"
    desktop.chmod(0o640)
    original = desktop.read_bytes()
    hostfile = read_host(desktop, Host.CLAUDE_DESKTOP)
    plan = plan_wire(hostfile, ["notes", "git tools"], signoff_command(), config=Config())
    assert '-            "command": "npx",' in plan.diff
    assert f'+            "command": "{SIGNOFF}",' in plan.diff
    assert desktop.read_bytes() == original  # planning writes nothing

    backup = write_wire(plan, config_path)

    assert backup.backup.read_bytes() == original
    assert stat.S_IMODE(backup.backup.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup_dir(config_path).stat().st_mode) == 0o700
    assert stat.S_IMODE(desktop.stat().st_mode) == 0o640
    written = desktop.read_bytes()
    assert backup.written_sha256 == hashlib.sha256(written).hexdigest()
    assert backups(config_path) == [backup]
    assert written.endswith(b"}\n") and b'\n    "mcpServers": {\n' in written  # 4 spaces kept

    after = read_host(desktop, Host.CLAUDE_DESKTOP).document
    assert list(after) == list(CLAUDE_DESKTOP)
    assert after["preferences"] == CLAUDE_DESKTOP["preferences"]
    assert list(after["mcpServers"]) == list(CLAUDE_DESKTOP["mcpServers"])
    notes = after["mcpServers"]["notes"]
    assert list(notes) == ["command", "args", "env", "x-unknown"]
    assert notes["command"] == str(SIGNOFF)
    assert notes["args"] == ["proxy", "notes"]
    assert notes["env"] == {"NOTES_TOKEN": SECRET, "SIGNOFF_HOME": str(home.resolve())}
    assert notes["x-unknown"] == {"kept": [1, 2.5, "é"]}
    assert after["mcpServers"]["git tools"]["args"] == ["proxy", "git-tools"]
    for untouched in ("remote", "through"):
        assert after["mcpServers"][untouched] == CLAUDE_DESKTOP["mcpServers"][untouched]
    # What it launches exists in Signoff's configuration, variables by name.
    config = load(config_path)
    assert set(config.servers) == {"notes", "git-tools"}
    assert config.servers["notes"].env == ("NOTES_TOKEN",)


def test_a_wired_entry_reads_back_as_going_through_signoff(desktop: Path, home: Path) -> None:
    config_path = home / "config.toml"
    plan = plan_wire(
        read_host(desktop, Host.CLAUDE_DESKTOP), ["notes"], signoff_command(), config=Config()
    )
    write_wire(plan, config_path)
    items = plan_import(read_host(desktop, Host.CLAUDE_DESKTOP), load(config_path))
    assert actions(items)["notes"] == (Action.WIRED, "")
    again = plan_wire(
        read_host(desktop, Host.CLAUDE_DESKTOP),
        ["notes"],
        signoff_command(),
        config=load(config_path),
    )
    assert not again.changed and again.diff == ""
    with pytest.raises(HostConfigError):
        write_wire(again, config_path)


def test_without_signoff_home_no_variable_is_added(
    desktop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIGNOFF_HOME", raising=False)
    plan = plan_wire(
        read_host(desktop, Host.CLAUDE_DESKTOP), ["git tools"], signoff_command(), config=Config()
    )
    assert json.loads(plan.text)["mcpServers"]["git tools"] == {
        "command": str(SIGNOFF),
        "args": ["proxy", "git-tools"],
    }


def test_wiring_claude_codes_user_file_keeps_its_many_other_keys(
    tmp_path: Path, home: Path
) -> None:
    path = write(tmp_path / ".claude.json", CLAUDE_CODE_USER, indent=2)
    hostfile = read_host(path, Host.CLAUDE_CODE)
    plan = plan_wire(hostfile, hostfile.select(["fs"]), signoff_command(), config=Config())
    write_wire(plan, home / "config.toml")
    after = json.loads(path.read_text())
    assert list(after) == list(CLAUDE_CODE_USER)
    project = after["projects"]["/home/me/app"]
    assert list(project) == ["allowedTools", "mcpServers", "history"]
    assert project["history"] == [{"display": "hello"}]
    assert project["mcpServers"]["fs"]["args"] == ["proxy", "fs-2"]
    assert after["mcpServers"]["fs"]["type"] == "stdio"
    assert after["mcpServers"]["fs"]["args"] == ["proxy", "fs"]
    assert after["projects"]["/home/me/empty"] == {"allowedTools": []}
    assert load(home / "config.toml").servers["fs-2"].args == ("fs-server", "/b")


def test_wiring_keeps_a_vscode_entrys_type_and_env_file_and_tabs(
    tmp_path: Path, home: Path
) -> None:
    path = write(tmp_path / "mcp.json", VSCODE, indent="\t")
    plan = plan_wire(read_host(path, Host.VSCODE), ["github"], signoff_command(), config=Config())
    write_wire(plan, home / "config.toml")
    text = path.read_text()
    assert '\n\t"servers": {\n\t\t"github": {\n\t\t\t"type": "stdio",' in text
    github = json.loads(text)["servers"]["github"]
    assert github["envFile"] == "${workspaceFolder}/.env"
    assert github["env"] == {"GITHUB_TOKEN": "${input:token}", "SIGNOFF_HOME": str(home.resolve())}


def test_a_byte_order_mark_and_windows_line_ends_are_kept(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "mcp.json"
    text = json.dumps({"mcpServers": {"a": {"command": "x"}}}, indent=2).replace("\n", "\r\n")
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    plan = plan_wire(read_host(path, Host.CURSOR), ["a"], signoff_command(), config=Config())
    write_wire(plan, home / "config.toml")
    written = path.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf{\r\n")
    assert b"\n" not in written.replace(b"\r\n", b"")


def test_wiring_a_conflict_or_a_skipped_entry_is_refused(desktop: Path, home: Path) -> None:
    config_path = home / "config.toml"
    add_server(config_path, "notes", "npx", ["other-server"])
    hostfile = read_host(desktop, Host.CLAUDE_DESKTOP)
    for keys in (["notes"], ["remote"], ["nope"], []):
        with pytest.raises(HostConfigError):
            plan_wire(hostfile, keys, signoff_command(), config=load(config_path))
    with pytest.raises(HostConfigError):
        plan_wire(hostfile, ["git tools"], ["signoff"], config=load(config_path))  # not absolute


@pytest.mark.guarantee("G-HOST-1")
def test_a_file_with_comments_is_read_but_never_written(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n  // mine\n  "servers": {"a": {"command": "x"},},\n}\n')
    before = path.read_bytes()
    plan = plan_wire(read_host(path, Host.VSCODE), ["a"], signoff_command(), config=Config())
    assert plan.changed and not plan.writable  # the preview can still guide a hand edit
    with pytest.raises(HostConfigError):
        write_wire(plan, home / "config.toml")
    assert path.read_bytes() == before
    assert not (home / "config.toml").exists()
    assert not backup_dir(home / "config.toml").exists()


@pytest.mark.guarantee("G-HOST-1")
def test_a_file_changed_after_it_was_read_is_not_overwritten(desktop: Path, home: Path) -> None:
    plan = plan_wire(
        read_host(desktop, Host.CLAUDE_DESKTOP), ["notes"], signoff_command(), config=Config()
    )
    desktop.write_text(desktop.read_text().replace("Ctrl+Space", "Alt+Space"))
    edited = desktop.read_bytes()
    with pytest.raises(HostConfigError):
        write_wire(plan, home / "config.toml")
    assert desktop.read_bytes() == edited
    assert not (home / "config.toml").exists()


def test_a_symbolic_link_stays_a_link_and_its_target_is_written(desktop: Path, home: Path) -> None:
    link = desktop.with_name("linked.json")
    link.symlink_to(desktop)
    plan = plan_wire(
        read_host(link, Host.CLAUDE_DESKTOP), ["notes"], signoff_command(), config=Config()
    )
    write_wire(plan, home / "config.toml")
    assert link.is_symlink()
    assert entry(desktop, "mcpServers", "notes", "args") == ["proxy", "notes"]


# --- undo ------------------------------------------------------------------------------------


def wired(desktop: Path, config_path: Path) -> bytes:
    original = desktop.read_bytes()
    hostfile = read_host(desktop, Host.CLAUDE_DESKTOP)
    plan = plan_wire(hostfile, ["notes"], signoff_command(), config=load(config_path))
    write_wire(plan, config_path)
    return original


@pytest.mark.guarantee("G-HOST-1")
def test_undo_restores_the_file_byte_for_byte_and_marks_the_write_undone(
    desktop: Path, home: Path
) -> None:
    config_path = home / "config.toml"
    desktop.chmod(0o640)
    original = wired(desktop, config_path)
    restored = undo(desktop, config_path)
    assert desktop.read_bytes() == original
    assert stat.S_IMODE(desktop.stat().st_mode) == 0o640
    assert restored.undone is not None
    assert [b.undone is not None for b in backups(config_path)] == [True]
    with pytest.raises(HostConfigError):
        undo(desktop, config_path)  # nothing left to undo


def test_undo_steps_back_through_successive_writes(desktop: Path, home: Path) -> None:
    config_path = home / "config.toml"
    original = wired(desktop, config_path)
    once = desktop.read_bytes()
    hostfile = read_host(desktop, Host.CLAUDE_DESKTOP)
    write_wire(
        plan_wire(hostfile, ["git tools"], signoff_command(), config=load(config_path)),
        config_path,
    )
    undo(desktop, config_path)
    assert desktop.read_bytes() == once
    undo(desktop, config_path)
    assert desktop.read_bytes() == original


@pytest.mark.guarantee("G-HOST-1")
def test_undo_is_refused_after_the_host_edited_the_file_unless_forced(
    desktop: Path, home: Path
) -> None:
    config_path = home / "config.toml"
    original = wired(desktop, config_path)
    document = json.loads(desktop.read_text())
    document["mcpServers"]["added-by-the-host"] = {"command": "y"}
    desktop.write_text(json.dumps(document, indent=4) + "\n")
    edited = desktop.read_bytes()
    with pytest.raises(HostConfigError):
        undo(desktop, config_path)
    assert desktop.read_bytes() == edited
    undo(desktop, config_path, force=True)
    assert desktop.read_bytes() == original
    kept = [p for p in backup_dir(config_path).iterdir() if "before-undo" in p.name]
    assert [p.read_bytes() for p in kept] == [edited]  # the edit forced over is kept too


# --- the command line ------------------------------------------------------------------------


def test_the_command_line_lists_imports_wires_and_undoes(user: Path, home: Path) -> None:
    desktop = write(user / ".config" / "Claude" / "claude_desktop_config.json", CLAUDE_DESKTOP)
    original = desktop.read_bytes()
    env = {"HOME": str(user)}

    listed = run_signoff("hosts", "list", env=env, home=home)
    assert listed.returncode == 0, listed.stderr
    assert f"claude_desktop: {desktop}: notes, git tools, remote, through" in listed.stdout

    dry = run_signoff("hosts", "import", "claude_desktop", "--dry-run", env=env, home=home)
    assert dry.returncode == 0, dry.stderr
    assert "through: wired:" in dry.stdout
    assert not (home / "config.toml").exists()

    done = run_signoff("hosts", "import", "claude_desktop", "--server", "notes", env=env, home=home)
    assert done.returncode == 0, done.stderr
    assert set(load(home / "config.toml").servers) == {"notes"}

    preview = run_signoff("hosts", "wire", "claude_desktop", "--dry-run", env=env, home=home)
    assert preview.returncode == 0, preview.stderr
    assert '+                "proxy",' in preview.stdout
    assert desktop.read_bytes() == original

    # Neither server's tools are pinned: the host loses them (tests/core/test_host_tools.py).
    wire = run_signoff("hosts", "wire", "claude_desktop", "--force", env=env, home=home)
    assert wire.returncode == 0, wire.stderr
    [backup] = backups(home / "config.toml")
    assert str(backup.backup) in wire.stdout
    assert backup.backup.read_bytes() == original
    for key, name in (("notes", "notes"), ("git tools", "git-tools")):
        spec = entry(desktop, "mcpServers", key)
        assert [spec["command"], *spec["args"]] == [str(SIGNOFF), "proxy", name]
    assert set(load(home / "config.toml").servers) == {"notes", "git-tools"}

    back = run_signoff("hosts", "undo", "claude_desktop", env=env, home=home)
    assert back.returncode == 0, back.stderr
    assert desktop.read_bytes() == original
    again = run_signoff("hosts", "undo", "claude_desktop", env=env, home=home)
    assert again.returncode == 2
    assert again.stderr.strip().endswith("[HostConfigError]")


@pytest.mark.guarantee("G-HOST-1")
def test_the_command_line_refuses_a_malformed_file_and_changes_nothing(
    user: Path, home: Path
) -> None:
    config_path = home / "config.toml"
    add_server(config_path, "kept", "x")
    before = config_path.read_bytes()
    path = user / "broken.json"
    path.write_text('{"mcpServers": {"a": {"command": "x"}')
    for action in ("import", "wire"):
        done = run_signoff(
            "hosts", action, "cursor", "--file", str(path), env={"HOME": str(user)}, home=home
        )
        assert done.returncode == 2
        assert done.stderr.startswith(f"signoff: {path}:1:")
        assert done.stderr.strip().endswith("[HostConfigError]")
    assert config_path.read_bytes() == before
    assert path.read_text() == '{"mcpServers": {"a": {"command": "x"}'
    assert not backup_dir(config_path).exists()


def test_the_command_a_host_launches_is_the_absolute_installed_script() -> None:
    assert signoff_command() == [str(SIGNOFF)]
    assert Path(signoff_command()[0]).is_absolute()


def test_a_frozen_app_names_the_console_command_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A windowed tray executable cannot serve a host over stdio: the console one is named."""
    app, console = tmp_path / "signoff-app.exe", tmp_path / "signoff.exe"
    app.write_bytes(b"")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(app))
    assert signoff_command() == [str(app)]  # no console beside it: itself
    console.write_bytes(b"")
    assert signoff_command() == [str(console)]
