"""Bad input in the operator's TOML configuration (core/proxy/config.py load, parse, Editor):
generated documents and random bytes give a Config or a ConfigError naming the file (and the
line, when there is one), never another exception; a Config that loads can be used by the proxy;
an Editor.save of a refused change leaves the file as it was.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import event, given
from hypothesis import strategies as st

from core import canonical
from core.errors import ConfigError, SchemaRefused
from core.proxy.config import SERVER_NAME, Config, Editor, load
from core.proxy.pins import rewrite_schema
from tests.proxy.test_config import GOOD  # a full configuration, comments and all
from tests.reliability.strategies import Raw, examples, mutated


@contextmanager
def config_file(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "config.toml"
        path.write_bytes(data)
        yield path


def outcome(path: Path) -> Config | ConfigError:
    try:
        config = load(path)
    except ConfigError as e:
        event("ConfigError")
        return e
    event("Config")
    return config


def names_the_file(error: ConfigError, path: Path) -> None:
    """The message starts with the file, then the line when there is one, within the file."""
    found = re.match(rf"{re.escape(str(path))}(?::(\d+))?: \S", str(error))
    assert found is not None, str(error)
    if found.group(1) is not None:
        # Lines as Signoff reads the file: text mode, where CR, LF and CRLF each end a line.
        lines = path.read_bytes().replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
        assert 1 <= int(found.group(1)) <= lines, (str(error), lines)


def usable(config: Config) -> None:
    """What the proxy does with a configuration: every value it hashes or sends has an exact
    JSON form, every bound is a number in range, and each tool's schema can be rewritten for
    its fixed and denied parameters (or refused by name)."""
    config.policy()
    for seconds in (config.hold_seconds, config.call_timeout_seconds,
                    config.duplicate_window_seconds, config.grant_ttl_seconds):  # fmt: skip
        assert 0 <= seconds <= 86_400
    for name, server in config.servers.items():
        assert SERVER_NAME.fullmatch(name)
        for tool in server.tools.values():
            canonical.dumps(tool.fixed)
            hidden = [*tool.fixed, *tool.deny]
            schema = {"type": "object", "properties": {n: {} for n in hidden}}
            with suppress(SchemaRefused):
                rewrite_schema(schema, hidden)


# --- generated documents ----------------------------------------------------------------------

toml_scalars = (
    st.text(max_size=12)
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.booleans()
    | st.dates()
    | st.datetimes(timezones=st.none() | st.just(dt.UTC))
    | st.times()
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
seconds = st.sampled_from([0, 2, 86_400, 86_401, -1, 0.5, math.inf, math.nan, True, "5"])
classes = st.sampled_from(
    ["read_only", "local_mutation", "remote_mutation", "destructive", "x", ""]
)
rules = st.sampled_from(["allow", "approve", "deny", "Allow", "maybe"])
names = st.sampled_from(["fs", "git-tools", "a" * 33, "bad name", "", "é", "x.y", "-x"])
pins = st.sampled_from(["ab" * 32, "AB" * 32, "ab" * 31, "zz" * 32, ""])


def either(right: st.SearchStrategy[Any], odds: int = 6) -> st.SearchStrategy[Any]:
    """The right kind of value, but about one time in ``odds`` any TOML value at all."""
    return st.sampled_from([False] * (odds - 1) + [True]).flatmap(
        lambda anything: toml_values if anything else right
    )


tool_tables = st.fixed_dictionaries(
    {},
    optional={
        "class": either(classes), "pin": either(pins), "policy": either(rules),
        "fixed": either(st.dictionaries(st.sampled_from(["mode", "path", "n"]), toml_values,
                                        max_size=2)),
        "deny": either(st.lists(st.sampled_from(["mode", "follow", "n"]), max_size=3)),
        "overrule_annotations": either(st.booleans()), "unknown": toml_values,
    },
)  # fmt: skip
server_tables = st.fixed_dictionaries(
    {},
    optional={
        "command": either(st.sampled_from(["npx", "uvx", "", "/usr/bin/env"])),
        "args": either(st.lists(st.text(max_size=8), max_size=3)),
        "env": either(st.lists(st.sampled_from(["HOME", "A_B", "1X", "X-Y", ""]), max_size=2)),
        "tools": either(st.dictionaries(st.text(max_size=8), tool_tables, max_size=2)),
        "extra": toml_values,
    },
)  # fmt: skip
documents = st.fixed_dictionaries(
    {},
    optional={
        "hold_seconds": seconds, "duplicate_window_seconds": seconds,
        "call_timeout_seconds": seconds, "grant_ttl_seconds": seconds,
        "notifications": either(st.sampled_from(["each", "tray", "none"])),
        "policy": either(st.dictionaries(classes | st.text(max_size=6), either(rules), max_size=3)),
        "servers": either(st.dictionaries(names, server_tables, max_size=2)),
        "surprise": toml_values,
    },
)  # fmt: skip


@examples(300)
@given(documents)
def test_any_generated_document_is_a_config_or_a_refusal_naming_the_file(
    document: dict[str, Any],
) -> None:
    text = tomlkit.dumps(document)
    with config_file(text.encode()) as path:
        result = outcome(path)
        if isinstance(result, ConfigError):
            names_the_file(result, path)
        else:
            usable(result)


@examples(300)
@given(st.binary(max_size=300) | mutated([GOOD.encode()]))
def test_any_bytes_are_a_config_or_a_refusal_naming_the_file(data: bytes) -> None:
    with config_file(data) as path:
        result = outcome(path)
        if isinstance(result, ConfigError):
            names_the_file(result, path)
        else:
            usable(result)


def test_a_long_line_is_read_in_linear_time() -> None:
    # A line of spaces between two words (inside a multi-line string) once took quadratic time
    # in the regular expressions that find a key's line: seconds at 20 000 characters.
    long = "x" + " " * 1_000_000 + "y"
    text = f'a = """\n{long}\n[{long}\n"""\n'
    with config_file(text.encode()) as path, pytest.raises(ConfigError):
        load(path)  # `a` is not a key Signoff knows


# --- edits -----------------------------------------------------------------------------------

# Edits as the commands make them (a class, a pin, a rule, a fixed value, a server), and now
# and then anything at all.
WRITE_FILE = ("servers", "fs", "tools", "write_file")
SENSIBLE = [
    (WRITE_FILE, "class", st.sampled_from(["destructive"] * 3 + ["no"])),
    (("servers", "fs", "tools", "read_file"), "pin", st.sampled_from(["cd" * 32] * 3 + ["cd"])),
    (WRITE_FILE, "policy", st.sampled_from(["allow"] * 3 + ["x"])),
    ((*WRITE_FILE, "fixed"), "mode", toml_values),
    (WRITE_FILE, "deny", st.lists(st.sampled_from(["a", "mode"]))),
    (("servers", "new"), "command", st.sampled_from(["uvx"] * 3 + [""])),
    (("servers", "fs"), "env", st.lists(st.sampled_from(["HOME"] * 3 + ["1X"]), max_size=2)),
    (("policy",), "destructive", st.sampled_from(["deny", "approve", "ask"])),
    ((), "hold_seconds", st.sampled_from([1, 0.5, -1, 100_000])),
]  # fmt: skip
tables = st.sampled_from([
    (), ("policy",), ("servers",), ("servers", "fs"), ("servers", "fs", "tools"),
    ("servers", "fs", "tools", "write_file"), ("servers", "new"), ("servers", "fs", "args"),
    ("servers", "fs", "tools", "write_file", "fixed"), ("hold_seconds",),
])  # fmt: skip
any_edit = st.tuples(
    tables,
    st.sampled_from(["class", "command", "fixed", "deny", "args", "read_only", "hold_seconds",
                     "pin", "x", "policy"]),
    toml_values,
)  # fmt: skip
sensible_edit = st.sampled_from(SENSIBLE).flatmap(
    lambda edit: st.tuples(st.just(edit[0]), st.just(edit[1]), edit[2])
)
edits = st.lists(st.one_of(sensible_edit, sensible_edit, any_edit), min_size=1, max_size=3)


@examples(200)
@given(
    st.sampled_from([GOOD.encode()] * 4 + [b"", b"servers = 1\n", b"[[servers]]\na = 1\n"]), edits
)
def test_an_edit_is_saved_whole_or_refused_leaving_the_file_as_it_was(
    before: bytes, changes: list[tuple[tuple[str, ...], str, Any]]
) -> None:
    with config_file(before) as path:
        try:
            editor = Editor(path)
            for keys, name, value in changes:
                editor.table(*keys)[name] = value
            saved = editor.save()
        except ConfigError as e:
            event("refused, file unchanged")
            names_the_file(e, path)
            assert path.read_bytes() == before
            assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]
            return
        event("saved")
        assert load(path) == saved
        usable(saved)


@examples(200)
@given(st.binary(max_size=200).map(Raw) | mutated([GOOD.encode()]))
def test_opening_any_bytes_for_editing_is_an_editor_or_a_refusal(data: bytes) -> None:
    with config_file(data) as path:
        try:
            Editor(path)
        except ConfigError as e:
            names_the_file(e, path)
