"""Bad input in MCP hosts' configuration files (core/hosts.py read_host, plan_import,
plan_wire): for each host kind, generated JSON and JSONC and random bytes give a HostFile or a
HostConfigError naming the file, never another exception; wiring any readable file never loses a
key: every key path of the original, except the wired entries' command and args, is still there
with the same value, in the same order, and the new text can be written as UTF-8.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from core.hosts import Action, Host, HostConfigError, HostFile, plan_import, plan_wire, read_host
from core.proxy.config import Config, ServerConfig
from tests.reliability.strategies import TRICKY_STRINGS, Raw, examples, key_paths, mutated

SIGNOFF = ["/opt/signoff/bin/signoff"]  # the absolute command wiring writes
CONFIG = Config(
    servers={
        "notes": ServerConfig("notes", "npx", ("notes-server",)),
        "git": ServerConfig("git", "uvx", ("mcp-server-git",)),
    }
)
SEEDS = [
    b'{"mcpServers":{"notes":{"command":"npx","args":["notes-server"],"env":{"A":"1"}}}}',
    b'{\n  // a comment\n  "servers": {"x": {"type": "stdio", "command": "node", "args": [],},}\n}',
    b'{"projects":{"/p":{"mcpServers":{"fs":{"command":"npx"}}}},"numStartups":3}',
    b'\xef\xbb\xbf{"mcpServers":{}}\r\n',
]


@contextmanager
def host_file(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "mcp.json"
        path.write_bytes(data)
        yield path


@contextmanager
def signoff_home(value: str | None) -> Iterator[None]:
    """SIGNOFF_HOME as given (None: unset), restored after."""
    before = os.environ.get("SIGNOFF_HOME")
    if value is None:
        os.environ.pop("SIGNOFF_HOME", None)
    else:
        os.environ["SIGNOFF_HOME"] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SIGNOFF_HOME", None)
        else:
            os.environ["SIGNOFF_HOME"] = before


def read(path: Path, host: Host) -> HostFile | HostConfigError:
    """The file read, or the refusal, which names the file."""
    try:
        return read_host(path, host)
    except HostConfigError as e:
        refusal = e
    assert re.match(rf"{re.escape(str(path))}[: ]", str(refusal)), str(refusal)
    return refusal


# --- random bytes ---------------------------------------------------------------------------


@examples(300)
@given(st.sampled_from(list(Host)), st.binary(max_size=200).map(Raw) | mutated(SEEDS))
def test_any_bytes_are_a_host_file_or_a_refusal_naming_the_file(host: Host, data: bytes) -> None:
    with host_file(data) as path:
        event(type(read(path, host)).__name__)


# --- generated host documents -----------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(TRICKY_STRINGS)
    | st.sampled_from(["\ud800", "a\udfffb"])  # lone surrogates, which a file writes as escapes
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
names = st.sampled_from(
    ["fs", "a", "notes", "git", "a@/p", "my server", "", "é", "x" * 40, "\ud800", "signoff"]
) | st.text(max_size=6)


def sometimes(right: st.SearchStrategy[Any], odds: int = 4) -> st.SearchStrategy[Any]:
    """The right kind of value, but about one time in ``odds`` any JSON value at all."""
    return st.sampled_from([False] * (odds - 1) + [True]).flatmap(
        lambda anything: json_values if anything else right
    )


good_entries = st.fixed_dictionaries(
    {"command": st.sampled_from(["npx", "uvx", "node", "/usr/bin/python3"])},
    optional={
        "args": st.lists(st.sampled_from(["notes-server", "mcp-server-git", "-y", "é", "a b"]),
                         max_size=3),
        "env": st.dictionaries(st.sampled_from(["A", "TOKEN", "B_C"]), json_values, max_size=2)
        | st.none(),
        "type": st.just("stdio"),
        "envFile": st.just("${workspaceFolder}/.env"),
        "x-extra": json_values,
    },
)  # fmt: skip
odd_entries = st.fixed_dictionaries(
    {},
    optional={
        "command": sometimes(st.sampled_from(["npx", "", " ", "${HOME}/x", SIGNOFF[0],
                                              "C:\\\\tools\\\\signoff.exe", "signoff"])),
        "args": sometimes(st.lists(st.sampled_from(["notes-server", "proxy", "${workspaceFolder}",
                                                    "x"]), max_size=3)),
        "env": sometimes(st.dictionaries(st.sampled_from(["A", "1X", "B-C", ""]),
                                         st.text(max_size=4), max_size=2)),
        "type": sometimes(st.sampled_from(["stdio", "http", "sse"])),
        "url": st.just("https://example.com/mcp"),
        "x-extra": json_values,
    },
)  # fmt: skip
entries = st.one_of(good_entries, good_entries, odd_entries)
servers = sometimes(st.dictionaries(names, sometimes(entries, 30), min_size=1, max_size=4), 20)


@st.composite
def host_documents(draw: st.DrawFn, host: Host) -> dict[str, Any]:
    document = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3))
    document[host.servers_key] = draw(servers)
    if host is Host.CLAUDE_CODE and draw(st.booleans()):
        document["projects"] = draw(sometimes(st.dictionaries(
            st.sampled_from(["/p", "/home/me/app", "p@q", ""]),  # "a" in "/p" meets "a@/p"
            sometimes(st.fixed_dictionaries({}, optional={"mcpServers": servers,
                                                          "history": json_values})),
            max_size=2,
        )))  # fmt: skip
    return document


@st.composite
def written(draw: st.DrawFn, document: dict[str, Any]) -> bytes:
    """The document as a host (or a person) writes it: an indent or none, maybe a byte order
    mark and Windows line ends, maybe comments and trailing commas."""
    indent = draw(st.sampled_from([None, 2, 4, "\t"]))
    text = json.dumps(document, indent=indent, ensure_ascii=draw(st.booleans()))
    if indent is not None and draw(st.booleans()):  # JSONC: comments at line ends, and commas
        lines = text.split("\n")
        for i in sorted(draw(st.sets(st.integers(0, len(lines) - 1), max_size=3))):
            lines[i] += ' // a comment with "quotes" and /* a block */'
        text = "\n".join(lines)
        text = re.sub(r'("|\d|true|false|null|\]|\})(\s*\n\s*[\]}])', r"\1,\2", text, count=2)
    if draw(st.booleans()):
        text += "\n"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    data = text.encode("utf-8", "surrogatepass")  # ensure_ascii=False keeps lone surrogates raw
    return Raw(b"\xef\xbb\xbf" + data if draw(st.booleans()) else data)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values (a NaN equals a NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@examples(400)
@given(st.data())
def test_wiring_any_readable_file_never_loses_a_key(data: st.DataObject) -> None:
    host = data.draw(st.sampled_from(list(Host)), label="host")
    document = data.draw(host_documents(host), label="document")
    raw = data.draw(written(document), label="bytes")
    home = data.draw(st.sampled_from([None, "/tmp/signoff-home"]), label="SIGNOFF_HOME")
    with host_file(raw) as path, signoff_home(home):
        hostfile = read(path, host)
        if isinstance(hostfile, HostConfigError):
            # Only a servers table (or an entry) that is not an object is refused here.
            event("refused")
            return
        items = plan_import(hostfile, CONFIG)
        assert [i.key for i in items] == [e.key for e in hostfile.entries]
        # A remote entry is imported, not wired (core/host_remote.py): wiring refuses it.
        wirable = [i.key for i in items
                   if i.action in (Action.IMPORT, Action.IMPORTED) and not i.url]  # fmt: skip
        keys = wirable
        if items and (not wirable or data.draw(st.booleans(), label="other keys too")):
            keys = data.draw(st.lists(st.sampled_from([i.key for i in items]), unique=True),
                             label="keys")  # fmt: skip
        try:
            plan = plan_wire(hostfile, keys, SIGNOFF, config=CONFIG)
        except HostConfigError:
            blocked = [k for k in keys if k not in wirable]
            wired_already = [i.key for i in items if i.action is Action.WIRED]
            assert not keys or set(blocked) - set(wired_already), (keys, items)
            event("wiring refused")
            return
        assert set(keys) <= set(wirable) | {i.key for i in items if i.action is Action.WIRED}
        event(f"wired {len(plan.wired)}")
        plan.text.encode("utf-8")  # it can be written
        after = json.loads(plan.text)
        loses_nothing(hostfile, after, plan.wired, home)


def loses_nothing(hostfile: HostFile, after: Any, wired: dict[str, str], home: str | None) -> None:
    entry_paths = {}
    for entry in hostfile.entries:
        if entry.key in wired:
            entry_paths[(*entry.table, entry.name)] = wired[entry.key]
    now = key_paths(after)
    for path, value in key_paths(hostfile.document).items():
        entry = next((p for p in entry_paths if path[: len(p)] == p), None)
        if entry is not None:
            rest = path[len(entry) :]
            if rest[:1] in (("command",), ("args",)) or rest == ():
                continue  # rewritten: checked below
            if rest[:1] == ("env",) and home is not None:
                continue  # SIGNOFF_HOME added: checked below
        assert path in now, path
        if isinstance(value, dict | list):
            if isinstance(value, dict) and entry is None:
                assert list(now[path]) == list(value), path  # the keys stay in their order
            continue
        assert same(now[path], value), (path, now[path], value)
    for entry, name in entry_paths.items():
        before, after_entry = key_paths(hostfile.document)[entry], now[entry]
        assert after_entry["command"] == SIGNOFF[0]
        assert after_entry["args"] == [*SIGNOFF[1:], "proxy", name]
        if home is not None:
            env = before.get("env") or {}
            assert same(after_entry["env"], {**env, "SIGNOFF_HOME": str(Path(home).resolve())})
        extra = [k for k in after_entry if k not in before]
        assert extra in ([], ["args"], ["env"], ["args", "env"]), extra


# --- what the generated files found, kept as examples ------------------------------------------


def test_a_user_server_named_like_a_projects_server_is_told_apart() -> None:
    document = {
        "mcpServers": {"a@/p": {"command": "npx", "args": ["user"]}},
        "projects": {"/p": {"mcpServers": {"a": {"command": "npx", "args": ["project"]}}}},
    }
    with host_file(json.dumps(document).encode()) as path:
        hostfile = read_host(path, Host.CLAUDE_CODE)
        assert [e.key for e in hostfile.entries] == ["a@/p", "a@/p#2"]
        plan = plan_wire(hostfile, ["a@/p"], SIGNOFF, config=Config())
        after = json.loads(plan.text)
        assert after["mcpServers"]["a@/p"]["command"] == SIGNOFF[0]  # the one asked for
        assert after["projects"]["/p"]["mcpServers"]["a"]["args"] == ["project"]


def test_a_lone_surrogate_escape_is_written_back_as_an_escape() -> None:
    raw = b'{"x":"\\ud800","mcpServers":{"fs":{"command":"npx","note":"a\\udfffb"}}}'
    with host_file(raw) as path:
        plan = plan_wire(read_host(path, Host.CURSOR), ["fs"], SIGNOFF, config=Config())
        assert json.loads(plan.text.encode("utf-8"))["x"] == "\ud800"


def test_a_file_too_deep_or_with_a_number_too_long_is_refused_by_name() -> None:
    for raw in (b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}", b'{"a":' + b"9" * 5000 + b"}",
                b'{"a":' + b"[" * 500 + b"]" * 500 + b"}"):  # fmt: skip
        with host_file(raw) as path:
            assert isinstance(read(path, Host.CLAUDE_DESKTOP), HostConfigError)


def test_an_env_that_is_not_an_object_is_skipped_not_replaced() -> None:
    for env in ([], "", 0, False):
        document = {"mcpServers": {"fs": {"command": "npx", "env": env}}}
        with host_file(json.dumps(document).encode()) as path:
            (item,) = plan_import(read_host(path, Host.CURSOR), Config())
            assert item.action is Action.SKIPPED
