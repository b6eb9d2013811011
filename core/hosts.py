"""MCP hosts' configuration files: importing their servers into Signoff, and wiring the hosts to
launch ``signoff proxy NAME`` in their place.

Claude Desktop (``claude_desktop_config.json``), Cursor (``mcp.json``) and Claude Code
(``.mcp.json``) keep their servers under ``mcpServers``; VS Code (``mcp.json``) under
``servers``; Claude Code's ``~/.claude.json`` under ``mcpServers`` and under each
``projects.<path>.mcpServers``, among many keys of its own.

Rules:

1. Reading tolerates JSONC (comments, trailing commas). Writing a file that has any is refused
   (``HostConfigError``): the file is re-serialised, which would drop them. A key named twice
   in one object is refused when reading, since one of the two would be lost.
2. An entry is imported as the Signoff server of its name (made valid when it is not), with its
   command, its arguments and the *names* of its variables, never their values; a remote one
   with its URL and headers, never a secret (core/host_remote.py: one written out is moved to
   the OS keyring before config.toml is written), and not wired. It is skipped,
   with the reason, when it already launches ``signoff proxy``, has no command, or uses the
   host's ``${...}`` variables in its command or arguments (only the host expands them). A
   Signoff server starting the same command and arguments (or at the same URL) means "already
   imported"; one of the same name starting something else is a conflict, replaced only when
   asked.
3. Wiring changes only an entry's ``command`` and ``args`` (the absolute signoff command, then
   ``proxy NAME``). Every other key of the entry, its variables' values included (the host keeps
   passing them; the proxy passes on the ones named), and every other key of the file stay, in
   their order. ``SIGNOFF_HOME``, when set, is added to the entry's ``env`` so that the proxy
   opens the same home. Wiring imports the entries Signoff does not know yet, and refuses
   conflicts.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from core import host_remote
from core.errors import ConfigError
from core.host_command import our_command as _our_command
from core.host_command import signoff_command as signoff_command
from core.proxy.config import ENV_NAME, SERVER_NAME, Config, ServerConfig, load

BACKUP_DIR = "host-backups"
MANIFEST = "manifest.json"
_BOM = b"\xef\xbb\xbf"
MAX_DEPTH = 128  # no host writes a file this deep
_SURROGATE = re.compile("[\ud800-\udfff]")


class HostConfigError(ConfigError):
    """A host's configuration file cannot be read, planned or written as asked; nothing was
    changed. The message names the file (and the line, where there is one)."""


class Host(StrEnum):
    CLAUDE_DESKTOP = "claude_desktop"
    CURSOR = "cursor"
    VSCODE = "vscode"
    CLAUDE_CODE = "claude_code"

    @property
    def label(self) -> str:
        return {
            Host.CLAUDE_DESKTOP: "Claude Desktop",
            Host.CURSOR: "Cursor",
            Host.VSCODE: "VS Code",
            Host.CLAUDE_CODE: "Claude Code",
        }[self]

    @property
    def servers_key(self) -> str:
        return "servers" if self is Host.VSCODE else "mcpServers"


def default_paths(host: Host, platform: str | None = None) -> list[Path]:
    """The host's user-level files. Project files (``.cursor/mcp.json``, ``.vscode/mcp.json``,
    ``.mcp.json``) are given by path."""
    home = Path.home()
    if host is Host.CURSOR:
        return [home / ".cursor" / "mcp.json"]
    if host is Host.CLAUDE_CODE:
        return [home / ".claude.json"]
    apps = _application_config(home, platform or sys.platform)
    if host is Host.CLAUDE_DESKTOP:
        return [apps / "Claude" / "claude_desktop_config.json"]
    return [apps / "Code" / "User" / "mcp.json"]


def _application_config(home: Path, platform: str) -> Path:
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform == "win32":
        appdata = os.environ.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    return home / ".config"


def existing_path(host: Host) -> Path | None:
    """The first of the host's default files that exists."""
    return next((p for p in default_paths(host) if p.is_file()), None)


PROJECT_FILES = {Host.CLAUDE_CODE: ".mcp.json", Host.CURSOR: ".cursor/mcp.json",
                 Host.VSCODE: ".vscode/mcp.json"}  # fmt: skip


def wired_files(config_path: Path | None = None, cwd: Path | None = None) -> list[Path]:
    """The hosts' files holding an entry that launches ``signoff proxy``, and every file Signoff
    wrote a wiring into (its record of writes beside ``config_path``, ``--file`` project files
    included) that is not undone: core/policy/own_files.py counts each as Signoff's own, since
    whoever rewrites one decides what the host starts instead of Signoff. The candidates are
    each host's user-level file and, under ``cwd`` (the folder the proxy and its servers start
    in), each host's project file. A file that cannot be read holds no entry."""
    candidates = [(existing_path(host), host) for host in Host]
    if cwd is not None:
        candidates += [(cwd / name, host) for host, name in PROJECT_FILES.items()]
    found = [path for path, host in candidates if path is not None and _wires(path, host)]
    return list(dict.fromkeys([*found, *_written(config_path)]))


def _wires(path: Path, host: Host) -> bool:
    try:
        entries = read_host(path, host).entries
    except (HostConfigError, OSError):
        return False
    for entry in entries:
        command, args = entry.spec.get("command"), entry.spec.get("args", [])
        if (
            isinstance(command, str)
            and isinstance(args, list)
            and all(isinstance(a, str) for a in args)
            and _proxied(command, args, _our_command()) is not None
        ):
            return True
    return False


def _written(config_path: Path | None) -> list[Path]:
    """The files Signoff's record of its writes (core/host_backups.py) names, not undone."""
    if config_path is None:
        return []
    try:
        document = json.loads((config_path.parent / BACKUP_DIR / MANIFEST).read_text("utf-8"))
        return [Path(w["original"]) for w in document["writes"] if not w.get("undone")]
    except (OSError, ValueError, KeyError, TypeError):
        return []


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostEntry:
    # Unique in the file: the name, or ``name@project`` in ~/.claude.json's projects (with
    # ``#2`` after it should a user-level server already be named so).
    key: str
    name: str  # the host's name for the server
    table: tuple[str, ...]  # the keys leading to its servers table
    spec: dict[str, Any]


@dataclass(frozen=True)
class HostFile:
    path: Path
    host: Host
    raw: bytes  # exactly as read
    text: str  # decoded, without a byte order mark
    document: dict[str, Any]
    entries: tuple[HostEntry, ...]
    jsonc: bool  # it has comments or trailing commas: readable, not writable

    def select(self, names: Iterable[str]) -> list[str]:
        """The keys of the entries named (by key, or by the host's name: every entry so named)."""
        keys: list[str] = []
        for name in names:
            found = [e.key for e in self.entries if name in (e.key, e.name)]
            if not found:
                known = ", ".join(e.key for e in self.entries) or "none"
                raise HostConfigError(f"{self.path}: no server {name!r} (servers here: {known})")
            keys += [k for k in found if k not in keys]
        return keys


def read_host(path: Path, host: Host) -> HostFile:
    """The host's file at ``path``, parsed; ``HostConfigError`` when it cannot be."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise HostConfigError(f"{path}: no such file") from None
    except OSError as e:
        raise HostConfigError(f"{path}: cannot be read: {e.strerror}") from None
    try:
        text = raw.removeprefix(_BOM).decode("utf-8")
    except UnicodeDecodeError as e:
        raise HostConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
    plain = _strip_jsonc(text)
    try:
        document = json.loads(plain, object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise HostConfigError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    except _KeyTwice as e:
        raise HostConfigError(
            f"{path}: the key {e.args[0]!r} is named twice in one object"
        ) from None
    except ValueError as e:  # a number of more digits than Python converts
        raise HostConfigError(f"{path}: not JSON this reader can hold: {e}") from None
    except RecursionError:
        raise HostConfigError(f"{path}: not JSON this reader can hold: nested too deeply") from None
    if not isinstance(document, dict):
        raise HostConfigError(f"{path}: the top level is not a JSON object")
    if _deeper_than(document, MAX_DEPTH):
        # Planning copies and writes the document back: past this, that could exhaust the stack.
        raise HostConfigError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    entries = tuple(_entries(path, host, document))
    return HostFile(path, host, raw, text, document, entries, plain != text)


class _KeyTwice(Exception):
    pass


def _deeper_than(document: Any, limit: int) -> bool:
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limit:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return False


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _KeyTwice(key)
        result[key] = value
    return result


def _strip_jsonc(text: str) -> str:
    """The text with comments and trailing commas blanked out, keeping every line and column, so
    that a JSON error still points into the file."""
    out = list(text)
    n = len(text)
    comma: int | None = None  # the last comma seen outside strings and comments
    i = 0
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            comma = None
            continue
        end = -1
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                break  # unterminated: left for the JSON parser to point at
            end += 2
        if end >= 0:
            for j in range(i, end):
                if out[j] not in "\r\n":
                    out[j] = " "
            i = end
            continue
        if c == ",":
            comma = i
        elif c in "}]":
            if comma is not None:
                out[comma] = " "
            comma = None
        elif not c.isspace():
            comma = None
        i += 1
    return "".join(out)


def _entries(path: Path, host: Host, document: dict[str, Any]) -> Iterable[HostEntry]:
    tables: list[tuple[tuple[str, ...], Any]] = []
    if host.servers_key in document:
        tables.append(((host.servers_key,), document[host.servers_key]))
    projects = document.get("projects")
    if host is Host.CLAUDE_CODE and isinstance(projects, dict):
        for project, settings in projects.items():
            if isinstance(settings, dict) and "mcpServers" in settings:
                tables.append((("projects", project, "mcpServers"), settings["mcpServers"]))
    taken: set[str] = set()
    for table, servers in tables:
        where = ".".join(table)
        if not isinstance(servers, dict):
            raise HostConfigError(f"{path}: {where} is not a JSON object")
        for name, spec in servers.items():
            if not isinstance(spec, dict):
                raise HostConfigError(f"{path}: {where}.{name} is not a JSON object")
            key = base = name if len(table) == 1 else f"{name}@{table[1]}"
            number = 1
            while key in taken:  # a user-level server named like a project's: "a@/p" and "a"
                number += 1
                key = f"{base}#{number}"
            taken.add(key)
            yield HostEntry(key, name, table, spec)


# --- importing -------------------------------------------------------------------------------


class Action(StrEnum):
    IMPORT = "import"  # becomes a Signoff server
    IMPORTED = "imported"  # Signoff already has it
    CONFLICT = "conflict"  # Signoff has a server of that name starting something else
    WIRED = "wired"  # already launches signoff proxy: skipped
    SKIPPED = "skipped"  # cannot go through Signoff; ``reason`` says why


@dataclass(frozen=True)
class ImportItem:
    entry: HostEntry
    action: Action
    name: str = ""  # the Signoff server's name ("" when skipped)
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    reason: str = ""  # what will happen and why, for the operator
    url: str = ""  # a remote server's, with its headers as config.toml will hold them
    headers: tuple[tuple[str, str], ...] = ()
    secrets: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # to the keyring

    @property
    def key(self) -> str:
        return self.entry.key


def proposed_name(name: str) -> str:
    """``name`` when it is a valid Signoff server name, else the nearest one that is."""
    if SERVER_NAME.fullmatch(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_")
    return cleaned[:32].rstrip("-_") or "server"


def plan_import(hostfile: HostFile, config: Config) -> list[ImportItem]:
    """What importing each of the file's entries into ``config`` would do."""
    ours = _our_command()
    items: list[ImportItem] = []
    planned: dict[str, tuple[str, tuple[str, ...]]] = {}  # name -> (command, args) in this plan
    remote: dict[str, host_remote.Remote] = {}  # by entry key: imported by URL (host_remote.py)
    command: str
    args: tuple[str, ...]
    env: tuple[str, ...]
    for entry in hostfile.entries:
        far = _far(entry)
        stdio = _stdio(entry.spec, ours) if far is None else far
        if isinstance(stdio, _Skip):
            items.append(ImportItem(entry, stdio.action, reason=stdio.reason))
            continue
        if isinstance(stdio, host_remote.Remote):  # known by its URL here; see the end
            remote[entry.key] = stdio
            command, args, env, notes = stdio.url, (), (), list(stdio.notes)
        else:
            (command, args, env), notes = stdio, _notes(entry.spec)
        same = _same(config, command, args, prefer=entry.name)
        if same is not None:
            missing = [v for v in env if v not in same.env]
            if missing:
                notes.append(f"Signoff does not pass on {', '.join(missing)}")
            reason = _joined(f"already in Signoff as {same.name}", notes)
            items.append(ImportItem(entry, Action.IMPORTED, same.name, command, args, env, reason))
            continue
        name = proposed_name(entry.name)
        why = "" if name == entry.name else f"{entry.name!r} is not a valid Signoff name"
        base, number = name, 1
        while True:
            if planned.get(name, (command, args)) != (command, args):
                taken = f"another server here is named {name}"
            elif name != entry.name and name in config.servers:
                taken = f"Signoff already has a server {name}"  # only the host's name conflicts
            else:
                break
            why = taken if number == 1 else why
            number += 1
            name = f"{base[: 31 - len(str(number))]}-{number}"
        planned[name] = (command, args)
        if entry.key in remote and name != proposed_name(entry.name):  # its secrets' names too
            again = host_remote.read(entry.spec, name)
            if isinstance(again, host_remote.Remote):
                remote[entry.key], notes = again, list(again.notes)
        existing = config.servers.get(name)
        if existing is not None:
            reason = _joined(
                f"Signoff's server {name} starts something else ({_argv(existing)})", notes
            )
            items.append(ImportItem(entry, Action.CONFLICT, name, command, args, env, reason))
            continue
        reason = _joined(f"import as {name}" + (f" ({why})" if why else ""), notes)
        items.append(ImportItem(entry, Action.IMPORT, name, command, args, env, reason))
    return [replace(i, command="", url=i.command, headers=remote[i.key].headers,
                    secrets=remote[i.key].secrets)
            if i.key in remote and i.name else i for i in items]  # fmt: skip


@dataclass(frozen=True)
class _Skip:
    action: Action
    reason: str


def _far(entry: HostEntry) -> host_remote.Remote | _Skip | None:
    """A remote entry as Signoff would hold it, or why it is skipped; None: not remote."""
    if not host_remote.is_remote(entry.spec):
        return None
    far = host_remote.read(entry.spec, proposed_name(entry.name))
    return _Skip(Action.SKIPPED, far) if isinstance(far, str) else far


def _stdio(
    spec: dict[str, Any], ours: list[str] | None
) -> tuple[str, tuple[str, ...], tuple[str, ...]] | _Skip:
    """The entry's command, arguments and variable names, or why it is skipped."""
    command, args, env = spec.get("command"), spec.get("args", []), spec.get("env")
    env = {} if env is None else env  # an empty list or string is no object: skipped below
    if not isinstance(command, str) or not command.strip():
        return _Skip(Action.SKIPPED, "it has no command to start")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return _Skip(Action.SKIPPED, "its args are not a list of strings")
    wired = _proxied(command, args, ours)
    if wired is not None:
        return _Skip(Action.WIRED, f"already goes through Signoff (signoff proxy {wired})")
    if not isinstance(env, dict):
        return _Skip(Action.SKIPPED, "its env is not a JSON object")
    bad = [name for name in env if not ENV_NAME.fullmatch(name)]
    if bad:
        return _Skip(Action.SKIPPED, f"{bad[0]!r} is not a variable name Signoff can pass on")
    if any("${" in part for part in (command, *args)):
        return _Skip(
            Action.SKIPPED,
            "its command uses the host's ${...} variables, which only the host expands",
        )
    return command, tuple(args), tuple(env)


def _proxied(command: str, args: list[str], ours: list[str] | None) -> str | None:
    """The names after ``proxy`` when the entry already launches ``signoff proxy``."""
    argv = [command, *args]
    if "proxy" not in argv[1:]:
        return None
    at = argv.index("proxy", 1)
    executable = re.split(r"[\\/]", command)[-1].lower().removesuffix(".exe")
    if (at == 1 and executable == "signoff") or argv[:at] == ours:
        return " ".join(argv[at + 1 :])
    return None


def _same(config: Config, command: str, args: tuple[str, ...], prefer: str) -> ServerConfig | None:
    same = [s for s in config.servers.values() if (s.url or s.command, s.args) == (command, args)]
    return next((s for s in same if s.name == prefer), same[0] if same else None)


def _notes(spec: dict[str, Any]) -> list[str]:
    if "envFile" in spec:
        return ["the variables of its envFile reach the server only if named in Signoff"]
    return []


def _joined(first: str, notes: list[str]) -> str:
    return "; ".join([first, *notes])


def _argv(server: ServerConfig) -> str:
    from core.proxy import remote

    return remote.shown(server.url) if server.url else " ".join([server.command, *server.args])


def selected(
    items: Sequence[ImportItem], keys: Collection[str], *, replace: bool = False
) -> list[ImportItem]:
    """The items of ``keys``; ``HostConfigError`` when one cannot be imported (a conflict can,
    with ``replace``)."""
    by_key = {item.key: item for item in items}
    unknown = [k for k in keys if k not in by_key]
    if unknown:
        raise HostConfigError(f"no server {unknown[0]!r} in the plan")
    chosen = [item for item in items if item.key in keys]
    for item in chosen:
        if item.action in (Action.SKIPPED, Action.WIRED):
            raise HostConfigError(f"{item.key} cannot be imported: {item.reason}")
        if item.action is Action.CONFLICT and not replace:
            raise HostConfigError(f"{item.key}: {item.reason}; replace it, or rename one of them")
    return chosen


def apply_import(
    config_path: Path, items: Sequence[ImportItem], keys: Collection[str], *, replace: bool = False
) -> list[str]:
    """Import the items of ``keys`` into the configuration at ``config_path`` (``replace``: a
    conflicting server of the same name is overwritten, its tools' settings kept). The names
    imported; nothing is written when one of them cannot be."""
    chosen = selected(items, keys, replace=replace)
    current = load(config_path)
    todo: dict[str, ImportItem] = {}
    for item in chosen:
        if item.action is Action.IMPORTED or item.name in todo:
            continue
        if item.action is Action.IMPORT and item.name in current.servers:
            raise HostConfigError(
                f"{config_path}: a server {item.name} was added since the plan; read it again"
            )
        todo[item.name] = item
    from core.proxy.manage import add_server  # the configuration's editor: only for a write
    from core.proxy.remote_commands import add_remote

    _keep_secrets(todo.values())
    for name, item in todo.items():
        if item.url:
            replace = item.action is Action.CONFLICT
            add_remote(config_path, name, item.url, dict(item.headers), replace=replace)
            continue
        add_server(
            config_path,
            name,
            item.command,
            item.args,
            item.env,
            replace=item.action is Action.CONFLICT,
        )
    return list(todo)


def _keep_secrets(items: Iterable[ImportItem]) -> None:
    """The secrets the host wrote out, kept in the OS keyring (core/host_remote.py rule 2)
    before any configuration names them; ``HostConfigError`` when the keyring refuses one,
    and nothing is imported."""
    from core import keyring_calls
    from core.proxy import remote

    for item in items:
        for secret, value in item.secrets:
            try:
                remote.store_secret(secret, value)
            except Exception as e:  # the keyring's own failures, in words; the value never
                said = e if isinstance(e, ConfigError) else keyring_calls.describe(e)
                raise HostConfigError(
                    f"{item.key}: the OS keyring did not keep secret {secret} ({said});"
                    " nothing was imported"
                ) from None


# --- wiring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WirePlan:
    hostfile: HostFile
    text: str  # the file's new text
    diff: str  # unified diff of the old text and the new
    wired: dict[str, str]  # entry key -> the Signoff server it launches
    imports: tuple[ImportItem, ...]  # imported into Signoff's configuration before the write

    @property
    def changed(self) -> bool:
        return self.text != self.hostfile.text

    @property
    def writable(self) -> bool:
        return not self.hostfile.jsonc


def plan_wire(
    hostfile: HostFile, keys: Collection[str], command: Sequence[str], *, config: Config
) -> WirePlan:
    """The file with each entry of ``keys`` launching ``command proxy NAME``."""
    if not keys:
        raise HostConfigError(f"{hostfile.path}: choose the servers to wire")
    if not command or not Path(command[0]).is_absolute():
        raise HostConfigError(f"the command a host launches must be absolute, not {command!r}")
    items = plan_import(hostfile, config)
    by_key = {item.key: item for item in items}
    document = copy.deepcopy(hostfile.document)
    home = os.environ.get("SIGNOFF_HOME")
    wired: dict[str, str] = {}
    imports: list[ImportItem] = []
    for key in keys:
        item = by_key.get(key)
        if item is None:
            raise HostConfigError(f"{hostfile.path}: no server {key!r}")
        if item.action is Action.WIRED:
            continue
        if item.action in (Action.SKIPPED, Action.CONFLICT) or item.url:
            why = "a remote server is imported, not wired (yet)" if item.url else item.reason
            raise HostConfigError(f"{hostfile.path}: {key} cannot be wired: {why}")
        if item.action is Action.IMPORT:
            imports.append(item)
        table = document
        for part in item.entry.table:
            table = table[part]
        table[item.entry.name] = _wired(item.entry.spec, command, item.name, home)
        wired[key] = item.name
    text = hostfile.text if document == hostfile.document else _dumps(document, hostfile.text)
    diff = "\n".join(
        difflib.unified_diff(
            hostfile.text.splitlines(),
            text.splitlines(),
            str(hostfile.path),
            f"{hostfile.path} (wired)",
            lineterm="",
        )
    )
    return WirePlan(hostfile, text, diff, wired, tuple(imports))


def _wired(
    spec: dict[str, Any], command: Sequence[str], name: str, home: str | None
) -> dict[str, Any]:
    args = [*command[1:], "proxy", name]
    entry: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "command":
            entry[key] = command[0]
            if "args" not in spec:
                entry["args"] = args
        elif key == "args":
            entry[key] = args
        else:
            entry[key] = value
    if home:
        resolved = str(Path(home).expanduser().resolve())  # as core.paths reads it
        entry["env"] = {**(entry.get("env") or {}), "SIGNOFF_HOME": resolved}
    return entry


def _dumps(document: dict[str, Any], original: str) -> str:
    indent: str = "  "
    for line in original.splitlines()[1:]:
        found = re.match(r"[ \t]+(?=\S)", line)
        if found:
            indent = "\t" if "\t" in found.group(0) else found.group(0)
            break
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    # A lone surrogate the file wrote as an escape is written back as one: as a character it
    # has no UTF-8 form, and the file could not be saved.
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if original.endswith("\n"):
        text += "\n"
    if "\r\n" in original:
        text = text.replace("\n", "\r\n")
    return text
