"""Policies: the default, the configuration policy from TOML, and what a policy is handed."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from core.policy.policy import (
    ConfigPolicy,
    DefaultPolicy,
    Outcome,
    PolicyRequest,
    Rule,
    load_policy,
)
from core.tools import SideEffect


def _request(side_effect: SideEffect, tool: str = "t") -> PolicyRequest:
    return PolicyRequest.build(
        tool=tool, spec_hash="s" * 64, side_effect=side_effect, idempotent=False,
        arguments={"a": [1, 2]}, run_id="r", goal="g", step=0, consecutive_failures=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("side_effect", "outcome", "kind"),
    [
        (SideEffect.READ_ONLY, Outcome.ALLOW, ""),
        (SideEffect.LOCAL_MUTATION, Outcome.APPROVE, "local_mutation"),
        (SideEffect.REMOTE_MUTATION, Outcome.APPROVE, "remote_mutation"),
        (SideEffect.DESTRUCTIVE, Outcome.APPROVE, "destructive"),
    ],
)
def test_the_default_policy(side_effect: SideEffect, outcome: Outcome, kind: str) -> None:
    decision = DefaultPolicy().evaluate(_request(side_effect))
    assert (decision.outcome, decision.kind) == (outcome, kind)


def test_a_policy_gets_a_copy_it_may_scribble_on() -> None:
    request = _request(SideEffect.READ_ONLY)
    value = request.value()
    value["arguments"]["a"].append(3)
    value["tool"] = "other"
    assert request.value()["arguments"] == {"a": [1, 2]}
    assert request.tool == "t"


def test_the_configuration_policy_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[policy]\nread_only = "approve"\ndestructive = "deny"\n\n'
        '[policy.tools]\n"fs.read" = "allow"\n'
    )
    policy = load_policy(path)
    assert policy.evaluate(_request(SideEffect.READ_ONLY)).outcome is Outcome.APPROVE
    assert policy.evaluate(_request(SideEffect.READ_ONLY, "fs.read")).outcome is Outcome.ALLOW
    assert policy.evaluate(_request(SideEffect.DESTRUCTIVE)).outcome is Outcome.DENY
    assert policy.evaluate(_request(SideEffect.LOCAL_MUTATION)).outcome is Outcome.APPROVE


def test_no_configuration_is_the_default_policy(tmp_path: Path) -> None:
    policy = load_policy(tmp_path / "none.toml")
    assert policy.identity() == DefaultPolicy().identity()


@pytest.mark.parametrize(
    "text",
    [
        '[policy]\nread_onyl = "allow"\n',
        '[policy]\nread_only = "maybe"\n',
        '[policy]\ntools = "all"\n',
        '[policy.tools]\nx = "sure"\n',
        "policy = 3\n",
        "[policy\n",
    ],
)
def test_a_bad_policy_configuration_is_refused_naming_the_key(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    assert str(path) in str(info.value)


def test_the_identity_names_the_configuration() -> None:
    a = ConfigPolicy({SideEffect.READ_ONLY: Rule.ALLOW})
    b = ConfigPolicy({SideEffect.READ_ONLY: Rule.APPROVE})
    assert a.identity() == DefaultPolicy().identity()
    assert a.identity() != b.identity()
    assert len(a.identity()) == 64
