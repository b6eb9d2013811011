"""The operator's configuration (core/proxy/config.py): refusals that name the file, the line
and the key; edits that keep what the operator wrote."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from core.errors import ConfigError, TTLRefused
from core.policy.policy import Rule
from core.proxy import manage
from core.proxy.config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_HOLD,
    NEVER,
    Config,
    Editor,
    load,
)
from core.tools import SideEffect

GOOD = """\
# Signoff: my servers. Keep this comment.
hold_seconds = 2  # two seconds is enough
call_timeout_seconds = 30

[policy]
read_only = "allow"
local_mutation = "approve"

[servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
env = ["HOME_NOTES"]
instructions_pin = "{instructions}"

[servers.fs.tools.write_file]
class = "local_mutation"
pin = "{pin}"
policy = "deny"
fixed = {{ mode = "0644" }}
deny = ["follow_symlinks"]
overrule_annotations = true
""".format(pin="ab" * 32, instructions="ef" * 32)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load(path)
    return str(caught.value)


def test_a_full_configuration_is_read(tmp_path: Path) -> None:
    config = load(write(tmp_path, GOOD))
    assert (config.hold_seconds, config.call_timeout_seconds) == (2.0, 30.0)
    assert config.classes == {
        SideEffect.READ_ONLY: Rule.ALLOW,
        SideEffect.LOCAL_MUTATION: Rule.APPROVE,
    }
    fs = config.servers["fs"]
    assert fs.command == "npx"
    assert fs.env == ("HOME_NOTES",)
    assert fs.instructions_pin == "ef" * 32
    tool = fs.tools["write_file"]
    assert tool.side_effect is SideEffect.LOCAL_MUTATION
    assert tool.pin == "ab" * 32
    assert tool.policy is Rule.DENY
    assert tool.fixed == {"mode": "0644"}
    assert tool.deny == ("follow_symlinks",)
    assert tool.overrule_annotations is True


def test_no_file_is_an_empty_configuration(tmp_path: Path) -> None:
    config = load(tmp_path / "missing.toml")
    assert config == Config()
    assert (config.hold_seconds, config.call_timeout_seconds) == (
        DEFAULT_HOLD,
        DEFAULT_CALL_TIMEOUT,
    )


# --- refusals name the file, the line and the key --------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("hold_second = 5\n", 1, "hold_second"),
        ("hold_seconds = 5\n\n[polcy]\nread_only = 'allow'\n", 3, "polcy"),
        ('[servers.fs]\ncommand = "npx"\ncolour = "red"\n', 3, "servers.fs.colour"),
        (
            '[servers.fs]\ncommand = "npx"\n\n[servers.fs.tools.write_file]\n'
            'class = "local_mutation"\nklass = "read_only"\n',
            6,
            "servers.fs.tools.write_file.klass",
        ),
        (
            '[servers.fs]\ncommand = "npx"\ntools.write_file.klass = "read_only"\n',
            3,
            "servers.fs.tools.write_file.klass",
        ),
        (
            '[servers.fs]\ncommand = "npx"\n[servers.fs.tools]\n'
            'write_file = { class = "read_only", colour = 1 }\n',
            4,
            "servers.fs.tools.write_file.colour",
        ),
    ],
    ids=["top-level", "table", "server", "tool", "dotted", "inline"],
)
def test_an_unknown_key_is_refused_with_the_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    path = write(tmp_path, text)
    message = refusal(path)
    assert message.startswith(f"{path}:{line}: {key}: unknown key (known here: ")


def test_a_header_with_a_comment_still_gives_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[servers.fs]  # the notes folder\ncommand = "npx"\ncolour = "red"\n')
    assert refusal(path).startswith(f"{path}:3: servers.fs.colour: unknown key")


def test_a_bad_class_is_refused_naming_the_value_and_the_choices(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[servers.fs]\ncommand = "npx"\n\n[servers.fs.tools.write_file]\nclass = "sometimes"\n',
    )
    assert refusal(path) == (
        f"{path}:5: servers.fs.tools.write_file.class: 'sometimes' is not a class (one of:"
        " read_only, local_mutation, remote_mutation, destructive)"
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[policy]\nread_only = 'sometimes'\n", 2, "policy.read_only: 'sometimes' is not"),
        ("[policy]\nwrites = 'allow'\n", 2, "policy.writes: 'writes' is not a side-effect class"),
        ("call_timeout_seconds = -1\n", 1, "call_timeout_seconds: a number of seconds"),
        ("hold_seconds = true\n", 1, "hold_seconds: a number of seconds"),
        ("[servers.fs]\nargs = []\n", 1, "servers.fs.command: the command to start the server"),
        ('[servers."f s"]\ncommand = "x"\n', 1, "servers.f s: a server name is letters"),
        ('[servers.fs]\ncommand = "x"\nenv = ["A-B"]\n', 3, "servers.fs.env: 'A-B' is not"),
        ('[servers.fs]\ncommand = "x"\nargs = "-y"\n', 3, "servers.fs.args: must be a list"),
        (
            '[servers.fs]\ncommand = "x"\n[servers.fs.tools.t]\npin = "abc"\n',
            4,
            "servers.fs.tools.t.pin: a pin is the 64 hex digits",
        ),
        (
            '[servers.fs]\ncommand = "x"\ninstructions_pin = "' + "AB" * 32 + '"\n',
            3,
            "servers.fs.instructions_pin: a pin is the 64 hex digits",
        ),
        (
            '[servers.fs]\ncommand = "x"\ninstructions_pin = 1\n',
            3,
            "servers.fs.instructions_pin: a pin is the 64 hex digits",
        ),
        (
            '[servers.fs]\ncommand = "x"\n[servers.fs.tools.t]\noverrule_annotations = "yes"\n',
            4,
            "servers.fs.tools.t.overrule_annotations: true or false",
        ),
        (
            '[servers.fs]\ncommand = "x"\n[servers.fs.tools.t]\nfixed = { a = 1 }\ndeny = ["a"]\n',
            3,
            "servers.fs.tools.t: ['a'] cannot be both fixed and denied",
        ),
    ],
)
def test_a_bad_value_is_refused_where_it_is(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, text)
    assert refusal(path).startswith(f"{path}:{line}: {message}")


def test_a_file_that_is_not_toml_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'hold_seconds = 5\n[servers.fs\ncommand = "x"\n')
    assert refusal(path).startswith(f"{path}:2: not TOML")


# --- editing keeps what the operator wrote -----------------------------------------------------


def test_the_editor_keeps_the_operators_comments_and_layout(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    editor = Editor(path)
    editor.table("servers", "fs", "tools", "read_file")["class"] = "read_only"
    editor.table("servers", "fs", "tools", "write_file")["pin"] = "cd" * 32
    editor.table("servers", "git")["command"] = "uvx"
    config = editor.save()

    text = path.read_text()
    assert text.startswith(GOOD.split("pin = ")[0])  # everything before the edit, as written
    assert "# Signoff: my servers. Keep this comment.\n" in text
    assert "hold_seconds = 2  # two seconds is enough\n" in text
    assert f'pin = "{"cd" * 32}"' in text
    assert '[servers.fs.tools.read_file]\nclass = "read_only"\n' in text
    assert config == load(path)
    assert config.servers["fs"].tools["read_file"].side_effect is SideEffect.READ_ONLY
    assert config.servers["git"].command == "uvx"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_editor_refuses_a_bad_edit_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    editor = Editor(path)
    editor.table("servers", "fs", "tools", "write_file")["class"] = "sometimes"
    with pytest.raises(ConfigError, match="'sometimes' is not a class"):
        editor.save()
    assert path.read_text() == GOOD
    assert not path.with_name("config.toml.tmp").exists()


def test_the_editor_creates_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "config.toml"
    editor = Editor(path)
    editor.table("servers", "fs")["command"] = "npx"
    editor.save()
    assert load(path).servers["fs"].command == "npx"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_the_editor_turns_a_server_written_as_an_inline_table_into_a_table_keeping_it(
    tmp_path: Path,
) -> None:
    """An inline table cannot hold the tool's table: the editor makes it an ordinary one, with
    the same keys and values, rather than refusing the change."""
    path = write(tmp_path, '# mine\n[servers]\nfs = { command = "npx", args = ["-y"] }\n')
    editor = Editor(path)
    editor.table("servers", "fs", "tools", "read_file")["class"] = "read_only"
    saved = editor.save()
    assert saved == load(path)
    fs = saved.servers["fs"]
    assert (fs.command, fs.args) == ("npx", ("-y",))
    assert fs.tools["read_file"].side_effect is SideEffect.READ_ONLY
    assert path.read_text().startswith("# mine\n")


# --- grant_ttl_seconds: 0 says "lapses after 0 s", so it is refused; "never" is written out ---


def test_a_grant_ttl_of_zero_is_refused_by_name(tmp_path: Path) -> None:
    path = write(tmp_path, "hold_seconds = 2\ngrant_ttl_seconds = 0\n")
    with pytest.raises(TTLRefused):
        load(path)


def test_a_grant_ttl_of_never_means_approvals_never_lapse(tmp_path: Path) -> None:
    assert load(write(tmp_path, 'grant_ttl_seconds = "never"\n')).grant_ttl_seconds is None
    assert load(write(tmp_path, "grant_ttl_seconds = 0.5\n")).grant_ttl_seconds == 0.5


@pytest.mark.parametrize("value", ['"sometimes"', "-1", "86401", "nan", "inf", "true"])
def test_a_grant_ttl_that_is_not_seconds_or_never_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError):
        load(write(tmp_path, f"grant_ttl_seconds = {value}\n"))


def test_setting_a_grant_ttl_of_zero_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    with pytest.raises(TTLRefused):
        manage.set_setting(path, "grant_ttl_seconds", 0)
    assert path.read_text() == GOOD
    assert manage.set_setting(path, "grant_ttl_seconds", NEVER).grant_ttl_seconds is None
    assert 'grant_ttl_seconds = "never"' in path.read_text()


def test_a_tools_call_timeout_comes_before_its_servers_and_the_top_level_one(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, GOOD)
    config = load(path)
    assert config.call_timeout("fs", "write_file") == 30  # the top-level one
    config = manage.set_call_timeout(path, 120, "fs")
    assert config.call_timeout("fs", "write_file") == 120
    assert config.call_timeout("fs", "read_file") == 120
    config = manage.set_call_timeout(path, 7.5, "fs", "write_file")
    assert (config.call_timeout("fs", "write_file"), config.call_timeout("fs", "read_file")) == (
        7.5, 120
    )  # fmt: skip
    assert config.call_timeout("elsewhere", "write_file") == 30
    config = manage.set_call_timeout(path, None, "fs", "write_file")
    assert config.call_timeout("fs", "write_file") == 120
    assert "# Signoff: my servers. Keep this comment." in path.read_text()


@pytest.mark.parametrize("value", ["0", "-1", "86401", "true", '"soon"'])
def test_a_servers_or_tools_own_call_timeout_must_be_seconds_above_zero(
    tmp_path: Path, value: str
) -> None:
    for table in ("[servers.fs]", "[servers.fs.tools.write_file]"):
        text = GOOD.replace(table, f"{table}\ncall_timeout_seconds = {value}", 1)
        assert "call_timeout_seconds: a number of seconds above 0" in refusal(write(tmp_path, text))
    kept = write(tmp_path, GOOD)
    with pytest.raises(ConfigError):
        manage.set_call_timeout(kept, 0, "fs", "write_file")
    assert kept.read_text() == GOOD
