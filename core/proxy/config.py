"""The operator's configuration: one TOML file a person can read and the CLI can edit.

```toml
hold_seconds = 5                 # how long a call needing approval is held before "pending"
duplicate_window_seconds = 600   # an identical mutating call within this waits for the operator
call_timeout_seconds = 60        # an upstream call taking longer is cancelled (see below)
cancel_grace_seconds = 10        # a cancelled call's answer is still awaited and recorded
result_limit_bytes = 1048576     # a larger result is cut, marked and isError (64 KiB-64 MiB)
grant_ttl_seconds = 3600         # a granted approval not executed within this lapses ("never")
notifications = "each"           # each: a notification per approval; tray: the tray icon only

[policy]                         # per class: allow / approve / deny (defaults shown)
read_only = "allow"
local_mutation = "approve"

[servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
env = ["HOME_NOTES"]             # names of variables passed through; values are never stored
call_timeout_seconds = 120       # this server's calls (a tool's own setting comes first)
result_limit_bytes = 4194304     # this server's results (the top-level setting otherwise)
instructions_pin = "…sha256…"    # the server's instructions as the operator pinned them
sampling = true                  # may ask the host's model (default false)
prompts = false                  # true: its pinned prompts offered, resources likewise (catalog.py)

[servers.fs.tools.write_file]
class = "local_mutation"         # read_only, local_mutation, remote_mutation, destructive
pin = "…sha256…"                 # the tool as it was when the operator pinned it
policy = "approve"               # overrides the class's rule for this tool
fixed = { mode = "0644" }        # set by the proxy, hidden from the model
deny = ["follow_symlinks"]       # removed from the schema; a call setting it fails
overrule_annotations = false     # true: keep the class even if the server's hints disagree
call_timeout_seconds = 600       # this tool's calls

[servers.fs.tools.write_file.rules.R3fa9c1]   # a rule on the arguments (core/policy/rules.py)
effect = "allow"                 # or "reject"
when = '{"type":"object","properties":{"path":{"type":"string","pattern":"^/home/me/notes(/|$)"}}}'
expires = "2026-12-31T18:00:00Z" # optional: after it the rule does nothing
note = "my notes"
destructive = true               # an allow on a destructive tool, confirmed as such

[telemetry]                      # live OpenTelemetry export (core/proxy/telemetry.py)
otlp = "http://127.0.0.1:4318/v1/traces"
```

A call past its timeout, or one the host cancelled, is cancelled at the server
(``notifications/cancelled``) and its answer awaited for ``cancel_grace_seconds`` more: an
answer in that time is the call's recorded result; without one the outcome is unknown.

Unknown keys and bad values are refused with ``ConfigError`` naming the file, the line and the
key; so is a file that is not UTF-8 TOML, and a fixed value with no exact JSON form (a date, a
NaN, an integer beyond 2^53), which could be neither hashed nor sent. ``grant_ttl_seconds = 0``
reads "lapses after 0 s" and would lapse every approval as it is granted: it is refused with the
subclass ``TTLRefused`` (approvals that never lapse are written ``"never"``). The file is
edited with ``tomlkit`` so that the operator's comments and layout survive; a change that does
not validate is not saved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import canonical, private_files
from core.canonical import JSONValue
from core.errors import ConfigError, JSONRefused, RuleRefused, TTLRefused
from core.policy import rules as argument_rules
from core.policy.meaning import Where
from core.policy.policy import ConfigPolicy, Rule
from core.policy.rules import ArgumentRule
from core.proxy import catalog, remote  # prompts and resources; a remote server's URL and headers
from core.proxy.telemetry import parse as parse_telemetry
from core.tools import SideEffect

if TYPE_CHECKING:  # imported where the file is parsed or edited: a command that reads no
    import tomlkit  # configuration does not load it (decision 0033)

SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

DEFAULT_HOLD = 5.0
DEFAULT_DUPLICATE_WINDOW = 600.0
DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_CANCEL_GRACE = 10.0
DEFAULT_GRANT_TTL = 3600.0
DEFAULT_RESULT_LIMIT = 1024 * 1024
RESULT_LIMITS = (64 * 1024, 64 * 1024 * 1024)  # the least and most a result limit may be
NEVER = "never"  # grant_ttl_seconds: a granted approval never lapses
NOTIFICATIONS = ("each", "tray")  # the first is the default


@dataclass(frozen=True)
class ToolConfig:
    side_effect: SideEffect | None = None
    pin: str | None = None
    policy: Rule | None = None
    fixed: dict[str, JSONValue] = field(default_factory=dict)
    deny: tuple[str, ...] = ()
    overrule_annotations: bool = False
    call_timeout_seconds: float | None = None  # None: the server's
    rules: tuple[ArgumentRule, ...] = ()  # on its arguments, by id


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    tools: dict[str, ToolConfig] = field(default_factory=dict)
    call_timeout_seconds: float | None = None  # None: the top-level setting
    result_limit_bytes: int | None = None  # None: the top-level setting
    instructions_pin: str | None = None  # core/proxy/instructions.py; None: never pinned
    url: str = ""  # a remote server's (core/proxy/remote.py): then ``command`` is ""
    headers: dict[str, str] = field(default_factory=dict)  # values hold references, never secrets
    sampling: bool = False  # may ask the host's model (core/proxy/asks.py)
    prompts: bool = False  # prompts offered (core/proxy/catalog.py rule 4)
    resources: bool = False  # resources and their templates offered
    prompt_pins: dict[str, str] = field(default_factory=dict)  # by prompt name
    template_pins: dict[str, str] = field(default_factory=dict)  # by URI template


@dataclass(frozen=True)
class Config:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    classes: dict[SideEffect, Rule] = field(default_factory=dict)
    hold_seconds: float = DEFAULT_HOLD
    duplicate_window_seconds: float = DEFAULT_DUPLICATE_WINDOW
    call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT
    cancel_grace_seconds: float = DEFAULT_CANCEL_GRACE
    grant_ttl_seconds: float | None = DEFAULT_GRANT_TTL  # None: never lapses
    notifications: str = NOTIFICATIONS[0]
    result_limit_bytes: int = DEFAULT_RESULT_LIMIT
    telemetry_otlp: str | None = None  # [telemetry] otlp: where spans go live

    def result_limit(self, server: str) -> int:
        """The server's own result limit, else the top-level one."""
        entry = self.servers.get(server)
        own = getattr(entry, "result_limit_bytes", None)
        return self.result_limit_bytes if own is None else int(own)

    def call_timeout(self, server: str, tool: str) -> float:
        """The tool's own timeout, else its server's, else the top-level one."""
        entry = self.servers.get(server)
        spec = entry.tools.get(tool) if entry is not None else None
        for value in (getattr(spec, "call_timeout_seconds", None),
                      getattr(entry, "call_timeout_seconds", None)):  # fmt: skip
            if value is not None:
                return float(value)
        return self.call_timeout_seconds

    def policy(self, where: Where | None = None) -> ConfigPolicy:
        """The policy: per class, and per tool under the gate's name ``server/tool``; values
        read from ``where`` (the servers' working directory; None: not known)."""
        tools = {
            f"{server.name}/{tool}": spec.policy
            for server in self.servers.values()
            for tool, spec in server.tools.items()
            if spec.policy is not None
        }
        rules = {
            f"{server.name}/{tool}": spec.rules
            for server in self.servers.values()
            for tool, spec in server.tools.items()
            if spec.rules
        }
        fixed = {
            f"{server.name}/{tool}": spec.fixed
            for server in self.servers.values()
            for tool, spec in server.tools.items()
            if spec.rules and spec.fixed
        }
        elsewhere = frozenset(s.name for s in self.servers.values() if s.url)  # remote ones
        return ConfigPolicy(self.classes, tools, rules=rules, fixed=fixed, where=where,
                            elsewhere=elsewhere)  # fmt: skip

    def rules(self) -> list[ArgumentRule]:
        """Every rule on a tool's arguments, by server, tool and id."""
        return [rule for server in self.servers.values() for spec in server.tools.values()
                for rule in spec.rules]  # fmt: skip


class _Where:
    """Finds the line of a key in the file's text, for error messages."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        # TOML ends a line with LF (or CRLF) only; splitlines() would also split at U+0085,
        # U+2028 and other characters a key or a string may hold, and miscount the lines.
        for number, line in enumerate(text.split("\n"), start=1):
            stripped = line.strip()
            header = _header(stripped)
            if header is not None:
                table = tuple(_split_key(header))
                self._first(table, number)
                continue
            assignment = _ASSIGNMENT.match(stripped)
            if assignment and not stripped.startswith("#"):
                self._first((*table, *_split_key(assignment.group(1))), number)

    def _first(self, key: tuple[str, ...], number: int) -> None:
        """The line where ``key``, and each table above it, is first named."""
        for n in range(1, len(key) + 1):
            self.lines.setdefault(key[:n], number)

    def error(
        self, key: tuple[str, ...], message: str, cls: type[ConfigError] = ConfigError
    ) -> ConfigError:
        line = None
        for n in range(len(key), 0, -1):
            line = self.lines.get(key[:n])
            if line is not None:
                break
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        return cls(f"{where}: {'.'.join(key)}: {message}")


# A key, its dotted parts with white space only around the dots: one way to read each line, so
# matching takes linear time (a class holding white space, then ``\s*=``, took quadratic time on
# a long line of spaces, such as one inside a multi-line string).
_KEY_PART = r"""(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)"""
_ASSIGNMENT = re.compile(rf"({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=")


def _header(line: str) -> str | None:
    """The key of a ``[table]`` header line (not an array of tables), or None."""
    close = line.find("]")
    if not line.startswith("[") or close < 0:
        return None
    inner, rest = line[1:close].strip(), line[close + 1 :].lstrip()
    if not inner or "[" in inner or (rest and not rest.startswith("#")):
        return None
    return inner


def _split_key(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.findall(r"""("[^"]*"|'[^']*'|[^.]+)""", text)]


def load(path: Path) -> Config:
    """The configuration at ``path`` (an empty one when there is no file), as the file says:
    the rules in force are the recorded ones (core/proxy/config_record.py)."""
    try:
        text = _read(path)
    except FileNotFoundError:
        return Config()
    return load_text(path, text)


def load_text(path: Path, text: str) -> Config:
    """The configuration ``text`` (of ``path``, for messages)."""
    return parse(_parse_toml(path, text).unwrap(), _Where(path, text))


def _read(path: Path) -> str:
    """The file's text, exactly as written; ``FileNotFoundError`` when there is none. A file
    that is a symbolic link, another user's or writable by group or others is refused
    (``UnsafePermissions``, core/private_files.py rule 3)."""
    return decode(path, read_bytes(path))


def read_bytes(path: Path) -> bytes:
    """The file's bytes; ``FileNotFoundError`` when there is none."""
    try:
        data = private_files.read_bytes(path, "configuration")
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror or e}") from None
    if data is None:
        raise FileNotFoundError(path)
    return data


def decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _parse_toml(path: Path, text: str) -> tomlkit.TOMLDocument:
    import tomlkit

    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as e:
        raise ConfigError(f"{path}:{e.line}: not TOML: {e}") from None
    except tomlkit.exceptions.TOMLKitError as e:  # tomlkit's other refusals carry no line
        raise ConfigError(f"{path}: not TOML: {e}") from None


def parse(document: dict[str, Any], where: _Where) -> Config:
    top = {
        "hold_seconds", "duplicate_window_seconds", "call_timeout_seconds",
        "cancel_grace_seconds", "grant_ttl_seconds", "notifications", "policy", "servers",
        "result_limit_bytes", "telemetry",
    }  # fmt: skip
    _known(document, top, (), where)
    classes: dict[SideEffect, Rule] = {}
    for key, value in _table(document.get("policy", {}), ("policy",), where).items():
        side_effect = _enum(SideEffect, key, ("policy", key), where, "a side-effect class")
        classes[side_effect] = _enum(Rule, value, ("policy", key), where, "allow, approve or deny")
    servers = {}
    for name, raw in _table(document.get("servers", {}), ("servers",), where).items():
        servers[name] = _server(name, raw, where)
    _unique_rules(servers, where)
    notifications = document.get("notifications", NOTIFICATIONS[0])
    if notifications not in NOTIFICATIONS:
        raise where.error(("notifications",), f"{notifications!r} is not one of: each, tray")
    return Config(
        servers=servers,
        classes=classes,
        hold_seconds=_seconds(document, "hold_seconds", DEFAULT_HOLD, where),
        duplicate_window_seconds=_seconds(
            document, "duplicate_window_seconds", DEFAULT_DUPLICATE_WINDOW, where
        ),
        call_timeout_seconds=_seconds(
            document, "call_timeout_seconds", DEFAULT_CALL_TIMEOUT, where
        ),
        cancel_grace_seconds=_seconds(
            document, "cancel_grace_seconds", DEFAULT_CANCEL_GRACE, where
        ),
        grant_ttl_seconds=_grant_ttl(document, where),
        notifications=notifications,
        result_limit_bytes=_result_limit(document, (), where) or DEFAULT_RESULT_LIMIT,
        telemetry_otlp=parse_telemetry(document, where),
    )


def _server(name: str, raw: Any, where: _Where) -> ServerConfig:
    key = ("servers", name)
    if not SERVER_NAME.fullmatch(name):
        raise where.error(key, "a server name is letters, digits, '-' and '_' (at most 32)")
    table = _table(raw, key, where)
    known = {"command", "args", "env", "tools", "call_timeout_seconds", "result_limit_bytes",
             "instructions_pin", "url", "headers", "auth", "sampling",
             *catalog.SERVER_KEYS}  # fmt: skip
    _known(table, known, key, where)
    url, headers = remote.read(table, key, where)
    command = table.get("command", "" if url else None)
    if not isinstance(command, str) or not (command or url):
        raise where.error((*key, "command"), "the command to start the server is required")
    args = _strings(table.get("args", []), (*key, "args"), where)
    env = _strings(table.get("env", []), (*key, "env"), where)
    for var in env:
        if not ENV_NAME.fullmatch(var):
            raise where.error((*key, "env"), f"{var!r} is not an environment variable name")
    tools = {
        tool: _tool(raw_tool, (*key, "tools", tool), where)
        for tool, raw_tool in _table(table.get("tools", {}), (*key, "tools"), where).items()
    }
    timeout = _own_timeout(table, key, where)
    limit = _result_limit(table, key, where)
    instructions_pin = _pin(table, (*key, "instructions_pin"), where)
    sampling = table.get("sampling", False)
    if not isinstance(sampling, bool):
        raise where.error((*key, "sampling"), "sampling is true or false")
    offer = catalog.server_keys(table, key, where)  # prompts, resources and their pins
    return ServerConfig(name, command, tuple(args), tuple(env), tools, timeout,
                        result_limit_bytes=limit, instructions_pin=instructions_pin,
                        url=url, headers=headers, sampling=sampling, **offer)  # fmt: skip


def _tool(raw: Any, key: tuple[str, ...], where: _Where) -> ToolConfig:
    table = _table(raw, key, where)
    known = {"class", "pin", "policy", "fixed", "deny", "overrule_annotations",
             "call_timeout_seconds", "rules"}  # fmt: skip
    _known(table, known, key, where)
    side_effect = None
    if "class" in table:
        side_effect = _enum(SideEffect, table["class"], (*key, "class"), where, "a class")
    pin = _pin(table, (*key, "pin"), where)
    policy = None
    if "policy" in table:
        policy = _enum(Rule, table["policy"], (*key, "policy"), where, "allow, approve or deny")
    fixed = _table(table.get("fixed", {}), (*key, "fixed"), where)
    for name, value in fixed.items():
        try:
            canonical.dumps(value)
        except JSONRefused as e:
            raise where.error((*key, "fixed", name), f"not a JSON value ({e})") from None
    deny = _strings(table.get("deny", []), (*key, "deny"), where)
    overrule = table.get("overrule_annotations", False)
    if not isinstance(overrule, bool):
        raise where.error((*key, "overrule_annotations"), "true or false")
    twice = sorted({name for name in deny if deny.count(name) > 1})
    if twice:
        raise where.error((*key, "deny"), f"names {', '.join(twice)} more than once")
    both = set(fixed) & set(deny)
    if both:
        raise where.error(key, f"{sorted(both)} cannot be both fixed and denied")
    timeout = _own_timeout(table, key, where)
    rules = _rules(table, key, where)
    return ToolConfig(side_effect, pin, policy, dict(fixed), tuple(deny), overrule, timeout, rules)


def _rules(table: dict[str, Any], key: tuple[str, ...], where: _Where) -> tuple[ArgumentRule, ...]:
    """A tool's rules on its arguments (core/policy/rules.py), each refused by its own error."""
    found = []
    for rule, raw in _table(table.get("rules", {}), (*key, "rules"), where).items():
        try:
            table_of = _table(raw, (*key, "rules", rule), where)
            found.append(argument_rules.from_table(key[1], key[3], rule, table_of))
        except RuleRefused as e:
            raise where.error((*key, "rules", rule), str(e), type(e)) from None
    return tuple(sorted(found, key=lambda r: r.id))


def _unique_rules(servers: dict[str, ServerConfig], where: _Where) -> None:
    seen: dict[str, str] = {}
    for server in servers.values():
        for tool, spec in server.tools.items():
            for rule in spec.rules:
                other = seen.setdefault(rule.id, f"{server.name}/{tool}")
                if other != f"{server.name}/{tool}":
                    raise where.error(("servers", server.name, "tools", tool, "rules", rule.id),
                                      f"the id of a rule on {other} too", RuleRefused)  # fmt: skip


def _pin(table: dict[str, Any], key: tuple[str, ...], where: _Where) -> str | None:
    """A pin (``pin``, ``instructions_pin``), or None when the key is absent."""
    pin = table.get(key[-1])
    if pin is not None and not (isinstance(pin, str) and re.fullmatch(r"[0-9a-f]{64}", pin)):
        raise where.error(key, "a pin is the 64 hex digits `signoff pin` wrote")
    return pin


def _own_timeout(table: dict[str, Any], key: tuple[str, ...], where: _Where) -> float | None:
    """A server's or a tool's own call timeout: above 0 (a call cannot finish in 0 s), or
    absent for the one above it."""
    if "call_timeout_seconds" not in table:
        return None
    value = table["call_timeout_seconds"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise where.error(
            (*key, "call_timeout_seconds"), "a number of seconds above 0, up to 86400"
        )
    return float(value)


def _result_limit(table: dict[str, Any], key: tuple[str, ...], where: _Where) -> int | None:
    """A result limit in bytes, from 64 KiB to 64 MiB, or None when not set here."""
    if "result_limit_bytes" not in table:
        return None
    value = table["result_limit_bytes"]
    least, most = RESULT_LIMITS
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise where.error(
            (*key, "result_limit_bytes"), f"a whole number of bytes from {least} to {most}"
        )
    return int(value)


def _known(table: dict[str, Any], known: set[str], key: tuple[str, ...], where: _Where) -> None:
    for name in table:
        if name not in known:
            raise where.error((*key, name), f"unknown key (known here: {', '.join(sorted(known))})")


def _table(value: Any, key: tuple[str, ...], where: _Where) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.error(key, "must be a table")
    return value


def _strings(value: Any, key: tuple[str, ...], where: _Where) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise where.error(key, "must be a list of strings")
    return list(value)


def _enum(cls: Any, value: Any, key: tuple[str, ...], where: _Where, what: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        known = ", ".join(m.value for m in cls)
        raise where.error(key, f"{value!r} is not {what} (one of: {known})") from None


def _seconds(document: dict[str, Any], name: str, default: float, where: _Where) -> float:
    value = document.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 86_400:
        raise where.error((name,), "a number of seconds from 0 to 86400")
    return float(value)


def _grant_ttl(document: dict[str, Any], where: _Where) -> float | None:
    """Seconds above 0, or None for "never". 0 is refused: it reads as "lapses after 0 s",
    which would lapse every approval as it is granted, yet it once meant "never"."""
    value = document.get("grant_ttl_seconds", DEFAULT_GRANT_TTL)
    if value == NEVER:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 86_400:
        raise where.error(("grant_ttl_seconds",), f'a number of seconds up to 86400, or "{NEVER}"')
    if value == 0:
        raise where.error(
            ("grant_ttl_seconds",),
            "0 would lapse every approval as it is granted; for approvals that never lapse,"
            f' write "{NEVER}"',
            TTLRefused,
        )
    return float(value)


# --- editing, keeping the operator's layout -------------------------------------------------


class Editor:
    """Load, change and save the file with tomlkit; the result is validated before saving."""

    def __init__(self, path: Path) -> None:
        import tomlkit

        self.path = path
        try:
            self.read: bytes | None = read_bytes(path)
        except FileNotFoundError:
            self.read = None
        if self.read is None:
            self.document = tomlkit.document()
        else:
            self.document = _parse_toml(path, decode(path, self.read))

    def table(self, *keys: str) -> Any:
        import tomlkit

        node: Any = self.document
        for key in keys:
            if not isinstance(node, dict):  # a value where a table belongs: load refuses it too
                raise ConfigError(f"{self.path}: {'.'.join(keys)}: must be a table")
            if key not in node:
                node[key] = tomlkit.table(is_super_table=key in ("servers", "tools", "rules"))
            elif isinstance(node[key], tomlkit.items.InlineTable):
                # An inline table cannot take a table inside it: make it an ordinary table,
                # keeping its keys and values.
                table = tomlkit.table()
                for k, v in node[key].items():
                    table[k] = v
                node[key] = table
            node = node[key]
        if not isinstance(node, dict):
            raise ConfigError(f"{self.path}: {'.'.join(keys)}: must be a table")
        return node

    def save(self) -> Config:
        """Validate the changed document and write it; ``ConfigError`` leaves the file as it was
        (the message names no line: the changed text was never written)."""
        import tomlkit

        text = tomlkit.dumps(self.document)
        try:
            document = tomlkit.parse(text).unwrap()
        except tomlkit.exceptions.TOMLKitError as e:
            raise ConfigError(f"{self.path}: the change does not write back as TOML: {e}") from None
        config = parse(document, _Where(self.path, ""))
        from core.proxy import config_record  # it reads configurations with this module

        config_record.save(self.path, self.read, text)
        return config


def stamp(path: Path | None) -> tuple[int, int, int] | None:
    """What tells a changed file apart: its inode, size and modification time."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
