"""Changing the operator's configuration: the one set of operations the CLI and the settings
dialog both use, so that either way lands the same TOML.

Rules:

1. Every operation edits the file with ``config.Editor`` (comments and layout survive) and
   validates the whole result before writing it: a refused change (``ConfigError``) leaves the
   file as it was.
2. Each returns the configuration as saved (``classify``: with the classes it set).
3. A rule on a tool's arguments (core/policy/rules.py) is added to a pinned tool of a configured
   server, or to its ``prompts/get`` or ``resources/read`` when it offers prompts or resources
   (core/proxy/catalog.py ``GATED``), ``RuleTargetUnknown`` otherwise; an allow rule on a tool
   classified destructive only with ``confirm_destructive`` (``RuleNeedsConfirmation``), and
   then it says so.
4. A change that alters the policy's identity (a class rule, a tool's rule) is recorded in the
   audit chain by ``record_policy_change``, so that the history shows when the rules changed
   and a re-check can say what the new rules would have decided differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.canonical import JSONValue
from core.errors import (
    ConfigError,
    RuleNeedsConfirmation,
    RuleRefused,
    RuleTargetUnknown,
    UnknownRule,
)
from core.policy.policy import Rule
from core.proxy import catalog, classifying
from core.proxy.config import ENV_NAME, SERVER_NAME, Config, Editor, decode, load, load_text
from core.proxy.pins import ListedTool
from core.store import Store, utc_now
from core.tools import SideEffect

if TYPE_CHECKING:
    from core.policy.rules import ArgumentRule

OWN_SETTINGS = ("call_timeout_seconds", "result_limit_bytes")  # a server may have its own
TIMINGS = ("hold_seconds", "duplicate_window_seconds", "call_timeout_seconds",
           "cancel_grace_seconds", "grant_ttl_seconds")  # fmt: skip


def _servers(editor: Editor) -> Any:
    return editor.document.get("servers", {})


def _check_server(name: str, command: str, env: Sequence[str]) -> None:
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"{name!r}: a server name is letters, digits, '-' and '_' (at most 32)")
    if not command.strip():
        raise ConfigError(f"{name}: the command to start the server is required")
    for var in env:
        if not ENV_NAME.fullmatch(var):
            raise ConfigError(f"{name}: {var!r} is not an environment variable name")


def add_server(
    path: Path,
    name: str,
    command: str,
    args: Sequence[str] = (),
    env: Sequence[str] = (),
    *,
    replace: bool = False,
) -> Config:
    """Add a server (``replace``: overwrite its command, arguments and variables, keep tools)."""
    _check_server(name, command, env)
    editor = Editor(path)
    if name in _servers(editor) and not replace:
        raise ConfigError(f"a server named {name} is already configured")
    table = editor.table("servers", name)
    table["command"] = command
    table["args"] = list(args)
    table["env"] = list(env)
    return editor.save()


def edit_server(
    path: Path,
    name: str,
    *,
    command: str,
    args: Sequence[str],
    env: Sequence[str],
    new_name: str | None = None,
) -> Config:
    """Change how a server starts; ``new_name`` renames it, keeping its tools' settings."""
    editor = Editor(path)
    servers = _servers(editor)
    if name not in servers:
        raise ConfigError(f"no server {name}")
    target = new_name or name
    kept_url = not command and "url" in servers[name]  # a remote server renamed: url kept
    if not kept_url:  # its new name is checked with the whole file, when saved
        _check_server(target, command, env)
    if target != name:
        if target in servers:
            raise ConfigError(f"a server named {target} is already configured")
        servers[target] = servers[name]
        del servers[name]
    table = editor.table("servers", target)
    if kept_url:
        return editor.save()
    table["command"] = command
    table["args"] = list(args)
    table["env"] = list(env)
    return editor.save()


def remove_server(path: Path, name: str) -> Config:
    editor = Editor(path)
    servers = _servers(editor)
    if name not in servers:
        raise ConfigError(f"no server {name}")
    del servers[name]
    return editor.save()


def set_sampling(path: Path, server: str, *, on: bool) -> Config:
    """Whether ``server`` may ask the host's model (core/proxy/asks.py); off is the default."""
    editor = Editor(path)
    if server not in _servers(editor):
        raise ConfigError(f"no server {server}")
    _put(editor.table("servers", server), "sampling", True if on else None)
    return editor.save()


def _tool_table(editor: Editor, server: str, tool: str) -> Any:
    if server not in _servers(editor):
        raise ConfigError(f"no server {server}")
    return editor.table("servers", server, "tools", tool)


def pins_dir(path: Path) -> Path:
    """Where the tools' texts are kept as pinned, beside the configuration at ``path``."""
    return path.parent / "pins"


def pin(
    path: Path, server: str, tools: Iterable[ListedTool], *, instructions: str | None = None
) -> Config:
    """Pin tools exactly as listed, and the server's ``instructions`` when given (the operator
    reviewed these), keeping their texts so that a later change can be shown as a diff. The
    texts are kept first: a text no pin names is harmless, a pin whose text was lost can only be
    shown without its diff."""
    from core.proxy import pinstore

    tools = list(tools)
    editor = Editor(path)
    for tool in tools:
        _tool_table(editor, server, tool.name)["pin"] = tool.pin
    if instructions is not None:
        if server not in _servers(editor):
            raise ConfigError(f"no server {server}")
        pinned = pinstore.keep_instructions(pins_dir(path), instructions)
        editor.table("servers", server)["instructions_pin"] = pinned
    for tool in tools:
        pinstore.keep(pins_dir(path), tool)
    return editor.save()


def set_offer(path: Path, server: str, **offer: bool | None) -> Config:
    """Turn a server's ``prompts`` or ``resources`` on or off (core/proxy/catalog.py rule 4);
    None leaves it as it is. Off is the default, written as the key's absence."""
    editor = Editor(path)
    if server not in _servers(editor):
        raise ConfigError(f"no server {server}")
    table = editor.table("servers", server)
    for key, on in offer.items():
        if key not in ("prompts", "resources"):
            raise TypeError(f"unknown offer {key}")
        if on is not None:
            _put(table, key, True if on else None)
    return editor.save()


def pin_catalog(path: Path, server: str, kind: str, items: Iterable[catalog.Item]) -> Config:
    """Pin a server's prompts or templates (``kind``: prompt_pins or template_pins) as listed
    now (core/proxy/catalog.py rule 3), keeping their texts for the next diff; the others are
    left as they are."""
    from core.proxy import pinstore

    editor = Editor(path)
    if server not in _servers(editor):
        raise ConfigError(f"no server {server}")
    items = list(items)
    for item in items:
        pinstore.keep_item(pins_dir(path), item.raw)
    if items:
        table = editor.table("servers", server, kind)
        for item in items:
            table[item.key] = item.pin
    return editor.save()


def set_tool(
    path: Path,
    server: str,
    tool: str,
    **settings: Any,
) -> Config:
    """Set a tool's ``side_effect`` (a class or None), ``policy`` (a rule or None: the class's
    rule), ``fixed`` (name -> value), ``deny`` (names) or ``overrule_annotations`` (bool).
    Settings not given are left as they are."""
    known = {"side_effect", "policy", "fixed", "deny", "overrule_annotations"}
    unknown = set(settings) - known
    if unknown:
        raise TypeError(f"unknown tool settings {sorted(unknown)}")
    editor = Editor(path)
    table = _tool_table(editor, server, tool)
    if "side_effect" in settings:
        _put(table, "class", _value(settings["side_effect"], SideEffect))
    if "policy" in settings:
        _put(table, "policy", _value(settings["policy"], Rule))
    if "fixed" in settings:
        fixed: Mapping[str, JSONValue] = settings["fixed"] or {}
        _put(table, "fixed", _inline(fixed) if fixed else None)
    if "deny" in settings:
        deny = list(settings["deny"] or ())
        _put(table, "deny", deny or None)
    if "overrule_annotations" in settings:
        _put(table, "overrule_annotations", True if settings["overrule_annotations"] else None)
    return editor.save()


def classify(
    path: Path,
    server: str,
    entries: Sequence[tuple[str, str]],
    *,
    rest: str | None = None,
    every: str | None = None,
    problems: Sequence[str] = (),
) -> tuple[Config, dict[str, SideEffect]]:
    """Classify the tools ``entries`` names, and with ``rest`` or ``every`` the server's other
    pinned tools (core/proxy/classifying.py), in one save: all of them, or (refused) none. The
    plan is made from the file this save edits. Nothing to classify writes nothing."""
    editor = Editor(path)
    config = Config() if editor.read is None else load_text(path, decode(path, editor.read))
    classes = classifying.plan(config, server, entries, rest=rest, every=every, problems=problems)
    if not classes:
        return config, classes
    for tool, side_effect in classes.items():
        _tool_table(editor, server, tool)["class"] = side_effect.value
    return editor.save(), classes


def set_call_timeout(
    path: Path, seconds: float | None, server: str, tool: str | None = None
) -> Config:
    """A server's or (``tool``) a tool's own call timeout; None returns it to the one above."""
    return set_own(path, "call_timeout_seconds", seconds, server, tool)


def set_own(
    path: Path, name: str, value: float | None, server: str, tool: str | None = None
) -> Config:
    """A server's or (``tool``) a tool's own setting (``OWN_SETTINGS``); None returns it to the
    one above."""
    if name not in OWN_SETTINGS:
        raise ConfigError(f"{name} is not a setting of a server's own")
    editor = Editor(path)
    if server not in _servers(editor):
        raise ConfigError(f"no server {server}")
    table = _tool_table(editor, server, tool) if tool else editor.table("servers", server)
    _put(table, name, value)
    return editor.save()


def set_class_rule(path: Path, side_effect: SideEffect, rule: Rule | None) -> Config:
    """The rule for a class; None returns it to the default."""
    return set_policy(path, {side_effect: rule}, {})


def set_setting(path: Path, name: str, value: Any) -> Config:
    """A top-level setting (a timing or ``notifications``); None returns it to the default."""
    return set_policy(path, {}, {name: value})


def set_policy(
    path: Path, rules: Mapping[SideEffect, Rule | None], settings: Mapping[str, Any]
) -> Config:
    """Class rules and top-level settings in one save: all of them, or (refused) none."""
    editor = Editor(path)
    for name, value in settings.items():
        if name not in (*TIMINGS, "notifications", "result_limit_bytes"):
            raise ConfigError(f"{name} is not a setting")
        _put(editor.document, name, value)
    if rules:
        table = editor.table("policy")
        for side_effect, rule in rules.items():
            _put(table, side_effect.value, rule.value if rule else None)
        if not table:
            del editor.document["policy"]
    return editor.save()


def _put(table: Any, key: str, value: Any) -> None:
    if value is None:
        if key in table:
            del table[key]
    else:
        table[key] = value


def _value(value: Any, kind: Any) -> str | None:
    if value is None:
        return None
    return str(kind(value).value)


def _literal(text: str) -> Any:
    """A TOML literal string when it can be one (a pattern's backslashes read as written)."""
    import tomlkit

    if "'" in text or "\n" in text:
        return text
    return tomlkit.string(text, literal=True)


def _inline(values: Mapping[str, JSONValue]) -> Any:
    import tomlkit  # loaded by the Editor already: a command that edits nothing loads neither

    table = tomlkit.inline_table()
    for key, value in values.items():
        table[key] = value
    return table


def add_rule(path: Path, rule: ArgumentRule, *, confirm_destructive: bool = False) -> Config:
    """Add ``rule`` (rule 3); the rule as saved is ``rule_of(config, rule.id)``."""
    from core.policy import rules as argument_rules

    editor = Editor(path)
    config = Config() if editor.read is None else load_text(path, decode(path, editor.read))
    server = config.servers.get(rule.server)
    if server is None:
        raise RuleTargetUnknown(f"no server {rule.server}")
    spec = server.tools.get(rule.tool)
    # A get or a read of a server offering prompts or resources (core/proxy/resources.py rule 3)
    gated = getattr(server, catalog.GATED.get(rule.tool, ""), False) is True
    if not gated and (spec is None or spec.pin is None):
        raise RuleTargetUnknown(
            f"{rule.server} has no pinned tool {rule.tool}: pin it (signoff pin) first"
        )
    if any(r.id == rule.id for r in config.rules()):
        raise RuleRefused(f"the same rule is there already: {rule.id}")
    destructive = spec is not None and spec.side_effect is SideEffect.DESTRUCTIVE
    if rule.effect is argument_rules.Effect.ALLOW and destructive:
        if not confirm_destructive:
            raise RuleNeedsConfirmation(
                f"{rule.gate_name} is destructive: an allow rule on it runs such calls without"
                " asking; confirm it as such (--yes-destructive)"
            )
        rule = dataclasses.replace(rule, destructive=True)
    table = editor.table("servers", rule.server, "tools", rule.tool, "rules", rule.id)
    for key, value in rule.table().items():
        table[key] = _literal(value) if key == "when" else value
    return editor.save()


def remove_rule(path: Path, rule_id: str) -> Config:
    """Remove the rule with this id (``UnknownRule`` when there is none)."""
    editor = Editor(path)
    for name, server in _servers(editor).items():
        for tool, spec in server.get("tools", {}).items():
            rules = spec.get("rules", {}) if isinstance(spec, dict) else {}
            if isinstance(rules, dict) and rule_id in rules:
                del rules[rule_id]
                if not rules:
                    del editor.table("servers", name, "tools", tool)["rules"]
                return editor.save()
    raise UnknownRule(f"no rule {rule_id}")


# --- the record --------------------------------------------------------------------------


def record_policy_change(store: Store, before: Config, after: Config, *, by: str) -> bool:
    """Record in the chain that the rules changed (when they did); True when recorded."""
    from core.transitions import record_config_change

    old, new = before.policy(), after.policy()
    if old.identity() == new.identity():
        return False
    with store.transaction("policy changed") as tx:
        record_config_change(
            tx,
            "policy.changed",
            {
                "before": old.identity(),
                "after": new.identity(),
                "policy": new.configuration(),
                "by": by,
            },
            at=utc_now(),
        )
    return True


def changing(path: Path) -> Config:
    """The configuration before a change (for ``record_policy_change``)."""
    return load(path)


def tools_of(config: Config, server: str) -> Iterable[str]:
    found = config.servers.get(server)
    return found.tools if found else ()
