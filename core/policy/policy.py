"""Policy: the operator's rules, evaluated by the runtime, never by the model. Pure code.

Rules:

1. A policy is asked about one request at a time and sees one form of it on every path (the
   first proposal, an attach after an approval, a re-check): a ``PolicyRequest`` built from the
   canonical request and a small view of the run, as canonical JSON. Each evaluation gets its
   own parsed copy, so a policy that writes into what it is handed changes nothing.
2. It answers ``allow``, ``deny`` (an observation: the run goes on), ``approve`` (pause on a
   hash-bound approval of a kind) or ``abort`` (the run ends).
3. ``DefaultPolicy``: ``read_only`` is allowed; every other class needs an approval, whose kind
   is the class.
4. ``ConfigPolicy``: per class and per tool, ``allow`` / ``approve`` / ``deny``; a rule for the
   tool wins over the rule for its class; a class with no rule gets the default. Its identity is
   the hash of its canonical configuration.
5. A policy that names itself (``identity()``) has that identity recorded with each
   evaluation, so a re-check can say which policy decided.
6. A policy that raises, or answers something that is not a ``PolicyDecision``, fails closed:
   the gate records the failure by its type's name and ends the run; nothing runs.
7. Rules on a tool's arguments (core/policy/rules.py) are asked after the tool's or its class's
   rule, about the arguments as the server will receive them (the tool's fixed values over
   them): a deny stands; a matching ``reject`` rule denies an allowed or asked request; a
   matching ``allow`` rule allows an asked one without asking. The decision names the rule
   (``rule``). A request the rules cannot read as one thing (core/policy/rules.py rule 5) is
   asked, an allowed one too, and the decision says why (``read``). An expiry is compared with
   the policy's clock: the wall clock, or (``at``) the time of the evaluation a re-check
   repeats.
8. The MCP proxy's duplicate rule stands in front of the policy (``DUPLICATE_KIND``,
   ``behind_duplicate_rule``), and so does the rule for Signoff's own files (``OWN_FILES_KIND``,
   core/policy/own_files.py), and the operator's standing grants (core/grants.py: an allow of kind
   ``grant`` naming the grant); a re-check leaves them out and compares the policy behind them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from core import canonical
from core.canonical import JSONValue
from core.errors import ConfigError, NotRecheckable
from core.policy.meaning import Reading, Where
from core.tools import SideEffect

if TYPE_CHECKING:
    from core.policy.rules import ArgumentRule, Decided


class Outcome(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    APPROVE = "approve"
    ABORT = "abort"


@dataclass(frozen=True)
class PolicyDecision:
    outcome: Outcome
    reason: str = ""
    kind: str = ""  # the approval's kind, with APPROVE; "grant" with ALLOW under a grant
    _: KW_ONLY  # who decided, by name only: two strings side by side are too easy to swap
    rule: str = ""  # the id of the rule on the tool's arguments that decided (core/policy/rules.py)
    grant: str = ""  # the standing grant an ALLOW was made under (core/grants.py), or ""
    # Values whose meaning differs from their spelling, or that could not be read as one thing
    # (core/policy/meaning.py): the prompt shows them, and never approves from a notification.
    read: tuple[Reading, ...] = ()
    cwd: str = ""  # the folder the rules read relative paths against, when they were asked

    def as_json(self) -> dict[str, JSONValue]:
        value: dict[str, JSONValue] = {
            "outcome": self.outcome.value,
            "reason": self.reason,
            "kind": self.kind,
        }
        # Each only when set: a decision recorded before rules and grants reads as it did.
        if self.rule:
            value["rule"] = self.rule
        if self.grant:
            value["grant"] = self.grant
        if self.read:
            value["read"] = [_read_json(r) for r in self.read]
        if self.cwd:
            value["cwd"] = self.cwd
        return value

    def reading(self, read: tuple[Reading, ...]) -> PolicyDecision:
        """The same decision, also saying what ``read`` means (each value once)."""
        if not read:
            return self
        return replace(self, read=tuple(dict.fromkeys((*self.read, *read))))

    @classmethod
    def from_json(cls, value: JSONValue) -> PolicyDecision:
        if not isinstance(value, dict):
            raise NotRecheckable("a recorded policy decision is not an object")
        try:
            return cls(
                Outcome(str(value["outcome"])),
                str(value["reason"]),
                str(value["kind"]),
                rule=str(value.get("rule") or ""),
                grant=str(value.get("grant") or ""),
                read=read_from_json(value.get("read")),
                cwd=str(value.get("cwd") or ""),
            )
        except (KeyError, ValueError) as e:
            raise NotRecheckable(f"a recorded policy decision is incomplete: {e}") from None

    def same_as(self, other: PolicyDecision) -> bool:
        """Whether two decisions do the same thing (the wording of a reason aside)."""
        return (self.outcome, self.kind) == (other.outcome, other.kind)


def _read_json(reading: Reading) -> dict[str, JSONValue]:
    return {"value": reading.spelling, "means": list(reading.meanings), "doubt": reading.doubt}


def read_from_json(value: Any) -> tuple[Reading, ...]:
    """``PolicyDecision.read`` as its record holds it; what does not read is left out."""
    found = []
    for item in value if isinstance(value, list) else []:
        means = item.get("means") if isinstance(item, dict) else None
        if isinstance(means, list) and isinstance(item.get("value"), str):
            found.append(Reading(item["value"], tuple(str(m) for m in means),
                                 str(item.get("doubt") or "")))  # fmt: skip
    return tuple(found)


@dataclass(frozen=True)
class PolicyRequest:
    """What a policy is handed: the request and a view of the run, in one canonical form."""

    text: str  # the canonical JSON this request is, and is recorded as
    # The value ``text`` was written from, kept for the record (``recorded``); a policy is only
    # ever handed a fresh parse (``value``), so nothing it does reaches this one.
    built: dict[str, JSONValue] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        *,
        tool: str,
        spec_hash: str,
        side_effect: SideEffect,
        idempotent: bool,
        arguments: JSONValue,
        run_id: str,
        goal: str,
        step: int,
        consecutive_failures: int,
    ) -> PolicyRequest:
        built: dict[str, JSONValue] = {
            "tool": tool,
            "spec_hash": spec_hash,
            "side_effect": side_effect.value,
            "idempotent": idempotent,
            "arguments": arguments,
            "run": {
                "id": run_id,
                "goal": goal,
                "step": step,
                "consecutive_failures": consecutive_failures,
            },
        }
        return cls(canonical.dumps_text(built), built)

    def recorded(self) -> JSONValue:
        """The request as its ``step.policy`` event records it (not parsed again when built
        here)."""
        return canonical.loads(self.text) if self.built is None else self.built

    def value(self) -> dict[str, Any]:
        """A fresh parsed copy: the policy may read or write it; nothing else sees it."""
        value = canonical.loads(self.text)
        if not isinstance(value, dict):
            raise NotRecheckable("a policy request is not an object")
        return value

    @property
    def tool(self) -> str:
        return str(self.value()["tool"])

    @property
    def side_effect(self) -> SideEffect:
        return SideEffect(self.value()["side_effect"])


class Policy(Protocol):
    def evaluate(self, request: PolicyRequest) -> PolicyDecision: ...


@runtime_checkable
class IdentifiedPolicy(Protocol):
    def evaluate(self, request: PolicyRequest) -> PolicyDecision: ...

    def identity(self) -> str: ...


def identity_of(policy: Policy) -> str | None:
    # What ``isinstance(policy, IdentifiedPolicy)`` checks, without the protocol machinery's
    # cost on every evaluation: an ``identity`` that is there and not None.
    identity = getattr(policy, "identity", None)
    if identity is None:
        return None
    value: str | None = identity()
    return value


# The MCP proxy's duplicate rule (decision 0012) stands in front of the operator's policy: an
# identical mutating call completed within the window waits for the operator as an approval of
# this kind, whatever the policy said (unless it denied or aborted). The proxy records every
# evaluation under the identity below, the policy's own wrapped; re-check unwraps it.
DUPLICATE_KIND = "duplicate"
# A request naming a path in Signoff's own folders waits for the operator as an approval of this
# kind, whatever the policy said short of deny or abort (core/policy/own_files.py).
OWN_FILES_KIND = "own_files"


def behind_duplicate_rule(identity: str) -> str:
    """The identity the proxy records for the policy ``identity`` behind its duplicate rule."""
    return canonical.sha256_hex({"policy": identity, "proxy": "duplicate-rule"})


def as_received(arguments: JSONValue, fixed: Mapping[str, JSONValue]) -> JSONValue:
    """The arguments as the server will receive them (rule 7): the tool's fixed values over the
    call's (the proxy's merge, core/proxy/server.py). The rule editor prefills from this too."""
    if isinstance(arguments, dict):
        return {**arguments, **fixed}
    return arguments


class Rule(enum.StrEnum):
    ALLOW = "allow"
    APPROVE = "approve"
    DENY = "deny"


DEFAULT_RULES: Mapping[SideEffect, Rule] = {
    SideEffect.READ_ONLY: Rule.ALLOW,
    SideEffect.LOCAL_MUTATION: Rule.APPROVE,
    SideEffect.REMOTE_MUTATION: Rule.APPROVE,
    SideEffect.DESTRUCTIVE: Rule.APPROVE,
}


def _decide(rule: Rule, side_effect: SideEffect, why: str) -> PolicyDecision:
    if rule is Rule.ALLOW:
        return PolicyDecision(Outcome.ALLOW, f"{why}: allow")
    if rule is Rule.DENY:
        return PolicyDecision(Outcome.DENY, f"{why}: deny")
    return PolicyDecision(Outcome.APPROVE, f"{why}: approve", kind=side_effect.value)


class ConfigPolicy:
    """Allow / approve / deny per class and per tool, then the rules on a tool's arguments
    (rule 7); no language, no state."""

    def __init__(
        self,
        classes: Mapping[SideEffect, Rule] | None = None,
        tools: Mapping[str, Rule] | None = None,
        *,
        rules: Mapping[str, Sequence[ArgumentRule]] | None = None,
        fixed: Mapping[str, Mapping[str, JSONValue]] | None = None,
        clock: Callable[[], datetime] | None = None,
        where: Where | None = None,
        elsewhere: frozenset[str] = frozenset(),
    ) -> None:
        """``rules`` and ``fixed``: per tool, by the gate's name for it (``server/tool``);
        ``where``: the folder the servers read relative paths against (None: not known, and
        a rule decides no request holding one: core/policy/meaning.py); ``elsewhere``: the
        servers on another machine (remote ones), whose values are read as text, not here."""
        self.classes = {**DEFAULT_RULES, **(classes or {})}
        self.tools = dict(tools or {})
        self.rules = {tool: tuple(found) for tool, found in (rules or {}).items() if found}
        self.fixed = {tool: dict(values) for tool, values in (fixed or {}).items()
                      if tool in self.rules and values}  # fmt: skip
        self.clock = clock or (lambda: datetime.now(UTC))
        self.where = where if where is not None else Where(None)
        self.elsewhere = elsewhere
        self._identity: tuple[object, str] | None = None  # (the rules it was made from, it)

    def at(self, moment: datetime) -> ConfigPolicy:
        """The same policy, its clock stopped at ``moment`` (for a re-check)."""
        return ConfigPolicy(self.classes, self.tools, rules=self.rules, fixed=self.fixed,
                            clock=lambda: moment, where=self.where,
                            elsewhere=self.elsewhere)  # fmt: skip

    def reading_from(self, where: Where) -> ConfigPolicy:
        """The same policy, reading values from ``where`` (the servers' working directory)."""
        return ConfigPolicy(self.classes, self.tools, rules=self.rules, fixed=self.fixed,
                            clock=self.clock, where=where, elsewhere=self.elsewhere)  # fmt: skip

    def where_for(self, tool: str) -> Where:
        """Where ``tool``'s values are read: here, or as text for a server elsewhere."""
        return Where.ELSEWHERE if tool.split("/", 1)[0] in self.elsewhere else self.where

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        value = request.value()
        side_effect = SideEffect(value["side_effect"])
        tool = value["tool"]
        if tool in self.tools:
            decision = _decide(self.tools[tool], side_effect, f"the rule for tool {tool}")
        else:
            decision = _decide(
                self.classes[side_effect], side_effect, f"the rule for {side_effect}"
            )
        rules = self.rules.get(tool)
        if not rules or decision.outcome is Outcome.DENY:
            return decision
        from core.policy import rules as argument_rules  # here: a policy with no rules loads none

        arguments = as_received(value["arguments"], self.fixed.get(tool, {}))
        decided = argument_rules.deciding(
            rules, arguments, destructive=side_effect is SideEffect.DESTRUCTIVE, now=self.clock(),
            where=(where := self.where_for(tool)),
        )  # fmt: skip
        found = decided.rule
        cwd = where.cwd or ""  # recorded: a re-check reads relative paths as this did
        if found is None:
            return replace(_asked(decision, decided, side_effect), cwd=cwd)
        note = f" ({found.note})" if found.note else ""
        if found.effect is argument_rules.Effect.REJECT:
            return PolicyDecision(Outcome.DENY, f"rejected by rule {found.id}{note}",
                                  rule=found.id, cwd=cwd)  # fmt: skip
        if decision.outcome is Outcome.APPROVE:
            return PolicyDecision(Outcome.ALLOW, f"allowed by rule {found.id}{note}",
                                  rule=found.id, cwd=cwd)  # fmt: skip
        return replace(decision, cwd=cwd)

    def configuration(self) -> dict[str, JSONValue]:
        value: dict[str, JSONValue] = {
            "classes": {c.value: r.value for c, r in sorted(self.classes.items())},
            "tools": {t: r.value for t, r in sorted(self.tools.items())},
        }
        if self.rules:  # only then: a policy with no rules keeps the identity it had
            value["rules"] = [r.as_json() for tool in sorted(self.rules)
                              for r in sorted(self.rules[tool], key=lambda r: r.id)]  # fmt: skip
            value["fixed"] = {tool: dict(values) for tool, values in sorted(self.fixed.items())}
        return value

    def identity(self) -> str:
        # Asked with every evaluation: made again only when the rules changed since.
        rules = (tuple(self.classes.items()), tuple(self.tools.items()),
                 tuple(self.rules.items()), tuple(self.fixed.items()))  # fmt: skip
        if self._identity is None or self._identity[0] != rules:
            self._identity = (rules, canonical.sha256_hex(self.configuration()))
        return self._identity[1]

    @classmethod
    def from_mapping(cls, policy: Mapping[str, Any], *, source: str = "policy") -> ConfigPolicy:
        """From the ``[policy]`` table: class = rule, and ``[policy.tools]``: tool = rule."""
        classes: dict[SideEffect, Rule] = {}
        tools: dict[str, Rule] = {}
        for key, value in policy.items():
            if key == "tools":
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{source}: policy.tools must be a table")
                for tool, rule in value.items():
                    tools[tool] = _rule(rule, f"{source}: policy.tools.{tool}")
                continue
            try:
                side_effect = SideEffect(key)
            except ValueError:
                known = ", ".join(s.value for s in SideEffect)
                raise ConfigError(
                    f"{source}: policy.{key} is not a side-effect class (known: {known}, tools)"
                ) from None
            classes[side_effect] = _rule(value, f"{source}: policy.{key}")
        return cls(classes, tools)


def _rule(value: Any, where: str) -> Rule:
    try:
        return Rule(value)
    except ValueError:
        raise ConfigError(f"{where} = {value!r}: expected allow, approve or deny") from None


def _asked(decision: PolicyDecision, decided: Decided, side_effect: SideEffect) -> PolicyDecision:
    """Rule 7: a request no rule could read as one thing is asked, saying why: an allowed one
    when a reject rule could not be ruled out, an asked one when an allow rule would have
    allowed it as written."""
    doubts = decided.doubts
    if not doubts or (decision.outcome is Outcome.ALLOW and not decided.unsure):
        return decision
    said = "; ".join(f"{canonical.dumps_text(r.spelling)} {r.words()}" for r in doubts[:3])
    reason = f"{decision.reason}; no rule decides it: {said}"
    if decision.outcome is Outcome.ALLOW:
        return PolicyDecision(Outcome.APPROVE, reason, kind=side_effect.value, read=doubts)
    return replace(decision, reason=reason).reading(doubts)


class DefaultPolicy(ConfigPolicy):
    """read_only: allow; local_mutation, remote_mutation, destructive: approve."""

    def __init__(self) -> None:
        super().__init__()


def load_policy(path: Path) -> ConfigPolicy:
    """The policy of the TOML configuration at ``path``; the default when there is none."""
    import tomllib  # here: the policy is imported by every command, the file read by few

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return DefaultPolicy()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    policy = data.get("policy", {})
    if not isinstance(policy, dict):
        raise ConfigError(f"{path}: policy must be a table")
    return ConfigPolicy.from_mapping(policy, source=str(path))
