"""What a subscription or a completion leads to, asked of the policy as that read or get
(core/proxy/resources.py rule 5). Pure code.

Rules:

1. A ``resources/subscribe`` of a URI leads to reads of that URI: it is asked as the gate's
   ``resources/read`` of ``{uri}`` would be. A ``completion/complete`` of a resource template's
   argument leads to a read of the template filled in with the value typed and the values the
   host gave for its other variables (``context.arguments``: ``filled``); one of a prompt's
   argument, to a ``prompts/get`` of that prompt with those values and ``{name: value}`` as
   its arguments.
2. ``filled``: the template expanded as RFC 6570 says (levels 1 to 4: ``{x}``, ``{+x}``,
   ``{#x}``, ``{.x}``, ``{/x}``, ``{;x}``, ``{?x}``, ``{&x}``, lists, ``:n`` prefixes,
   ``*``), with the argument and the context's values defined (the others are undefined, so
   left out). Its value is put in as written, not percent-encoded: a reject rule judges every
   reading of a URI, escapes decoded (core/policy/meaning.py rule 6), and an encoded value
   would hide one layer of them.
3. ``asked``: the request is built as the gate builds a read's or a get's (the gate's name for
   the tool, its spec hash and class, the arguments), at step 0 of no run, and the proxy's
   policy decides it. A policy that raises, or answers something else, aborts it (fail
   closed, as the gate does: core/policy/policy.py rule 6).
4. Only an ALLOW lets the subscription or completion through. A deny or an abort refuses it,
   and so does an approve: neither has an approval of its own (the operator would be asked
   about a read nobody made). ``said`` is the refusal's message, with the decision's reason.
5. Nothing is recorded: these are checks, not calls. The read or get a subscription or a
   completion leads to is a run of its own when the host makes it.
"""

from __future__ import annotations

import re
from typing import Any

from core.policy.policy import Outcome, Policy, PolicyDecision, PolicyRequest
from core.proxy.offered import Exposed

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
# RFC 6570 section 3.2.1: an operator's first text, separator, and whether it names its values.
_OPERATORS = {
    "": ("", ",", False), "+": ("", ",", False), "#": ("#", ",", False),
    ".": (".", ".", False), "/": ("/", "/", False), ";": (";", ";", True),
    "?": ("?", "&", True), "&": ("&", "&", True),
}  # fmt: skip
_WOULD = {
    Outcome.DENY: "be refused",
    Outcome.APPROVE: "need the operator's approval, which a {what} cannot ask for",
    Outcome.ABORT: "be ended",
}


def filled(template: str, values: dict[str, str]) -> str:
    """The URI ``template`` makes with ``values`` (the argument completed and those the host
    already gave, ``context.arguments``), every other variable undefined (rule 2)."""

    def expanded(match: re.Match[str]) -> str:
        body = match.group(1)
        operator = body[:1] if body[:1] in _OPERATORS else ""
        first, separator, named = _OPERATORS[operator]
        parts = []
        for spec in body[len(operator) :].split(","):
            variable, _, prefix = spec.removesuffix("*").partition(":")
            if variable not in values:
                continue  # undefined: left out
            value = values[variable]
            text = value[: int(prefix)] if prefix.isdigit() else value
            if not named:
                parts.append(text)
            elif text:
                parts.append(f"{variable}={text}")
            else:  # an empty value: ";x", but "?x=" and "&x="
                parts.append(variable if operator == ";" else f"{variable}=")
        return first + separator.join(parts) if parts else ""

    return _EXPRESSION.sub(expanded, template)


def asked(
    policy: Policy, exposed: Exposed, spec_hash: str, arguments: dict[str, Any]
) -> PolicyDecision:
    """What ``policy`` decides of the gate's tool ``exposed`` called with ``arguments``
    (rule 3)."""
    side_effect = exposed.state.side_effect
    if side_effect is None:  # never, for the gate's own tools: refused all the same
        return PolicyDecision(Outcome.ABORT, f"{exposed.gate_name} has no side-effect class")
    try:
        request = PolicyRequest.build(
            tool=exposed.gate_name, spec_hash=spec_hash, side_effect=side_effect,
            idempotent=False, arguments=arguments, run_id="",  # no run: a check (rule 5)
            goal=f"{exposed.gate_name} for the host", step=0, consecutive_failures=0,
        )  # fmt: skip
        decision: object = policy.evaluate(request)
    except Exception as e:  # the operator's rules, or arguments that are not exact JSON
        return PolicyDecision(Outcome.ABORT, f"the policy could not decide ({type(e).__name__})")
    if not isinstance(decision, PolicyDecision):
        return PolicyDecision(Outcome.ABORT, f"the policy answered {decision!r}")
    return decision


def said(decision: PolicyDecision, what: str, lead: str) -> str:
    """Why the ``what`` (a subscription, a completion) leading to ``lead`` is refused."""
    would = _WOULD.get(decision.outcome, "not run").format(what=what)
    return f"Signoff refused this {what}: {lead} would {would}: {decision.reason}"
