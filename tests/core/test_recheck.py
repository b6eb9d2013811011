"""Re-check: would today's policy decide each recorded evaluation the same?"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from core.approvals import approve
from core.decisions import Decision
from core.errors import NotRecheckable, UnknownRun
from core.gate import VerdictOutcome
from core.policy.policy import ConfigPolicy, DefaultPolicy, Outcome, Rule
from core.recheck import recheck
from core.store import Store
from core.tools import SideEffect
from tests.conftest import run_signoff
from tests.core.gatekit import Calls, make_gate, standard_tools


def _history(store: Store) -> None:
    """Run r: a read (allowed), a push (approved, run), a delete (pending)."""
    g = make_gate(store, standard_tools(Calls()))
    s = g.begin("r", "goal")
    step = s.step()
    step.propose(Decision.tool_call("read", {"n": 1}))
    asyncio.run(step.execute())
    v = s.step().propose(Decision.tool_call("push", {"n": 2}))
    approve(store, "r", v.approval.id, "operator")
    s, _ = g.attach("r")
    asyncio.run(s.current().execute())
    s.step().propose(Decision.tool_call("delete", {"n": 3}))


def test_the_same_policy_decides_the_same(gate_store: Store) -> None:
    _history(gate_store)
    result = recheck(gate_store, "r", DefaultPolicy())
    assert result.evaluations == 4  # read, push, push again at attach, delete
    assert result.differences == ()


def test_a_changed_policy_is_reported_step_by_step(gate_store: Store) -> None:
    _history(gate_store)
    today = ConfigPolicy({SideEffect.READ_ONLY: Rule.APPROVE, SideEffect.DESTRUCTIVE: Rule.DENY})
    result = recheck(gate_store, "r", today)
    assert [(d.step, d.then.outcome, d.now.outcome) for d in result.differences] == [
        (0, Outcome.ALLOW, Outcome.APPROVE),
        (2, Outcome.APPROVE, Outcome.DENY),
    ]
    assert all(d.then_policy == DefaultPolicy().identity() for d in result.differences)
    assert all(d.now_policy == today.identity() for d in result.differences)


def test_an_unknown_run_or_an_unreadable_evaluation_is_not_recheckable(store: Store) -> None:
    gate_store = store  # untraced: this test edits the log itself
    _history(gate_store)
    with pytest.raises(UnknownRun):
        recheck(gate_store, "nope", DefaultPolicy())
    conn = sqlite3.connect(gate_store.path)
    conn.execute("UPDATE events SET payload = '{}' WHERE kind = 'step.policy'")
    conn.commit()
    conn.close()
    with pytest.raises(NotRecheckable):
        recheck(gate_store, "r", DefaultPolicy())


def test_signoff_recheck_exit_codes(home: Path) -> None:
    with Store.open(home / "signoff.db") as store:
        _history(store)
    same = run_signoff("recheck", "r", home=home)
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith("same:")

    (home / "config.toml").write_text('[policy]\ndestructive = "deny"\n')
    differs = run_signoff("recheck", "r", "--json", home=home)
    assert differs.returncode == 1
    result = json.loads(differs.stdout)
    assert [
        (d["step"], d["then"]["outcome"], d["now"]["outcome"]) for d in result["differences"]
    ] == [(2, "approve", "deny")]
    text = run_signoff("recheck", "r", home=home)
    assert text.stdout.strip() == "run r step 2: then approve (destructive), now deny"

    missing = run_signoff("recheck", "nope", "--json", home=home)
    assert missing.returncode == 2
    assert json.loads(missing.stdout)["error"] == "UnknownRun"
    (home / "config.toml").write_text('[policy]\ndestructive = "sometimes"\n')
    bad = run_signoff("recheck", "r", "--json", home=home)
    assert (bad.returncode, json.loads(bad.stdout)["error"]) == (2, "ConfigError")


def test_a_relative_path_is_rechecked_against_the_folder_it_was_read_from(
    gate_store: Store, tmp_path: Path
) -> None:
    """An allow rule decided ``a.md`` as a file in the server's folder: a re-check from another
    folder (the terminal's) reads it from the folder recorded, and decides the same."""
    from core.policy import rules
    from core.policy.meaning import Where
    from core.tools import Tool

    in_notes = rules.on_arguments([("path", rules.under_folder("/notes"))])
    notes = rules.ArgumentRule.make("s", "write", rules.Effect.ALLOW, in_notes)
    tool = Tool("write", "write", {"type": "object"}, SideEffect.LOCAL_MUTATION, lambda a: "ok")
    policy = ConfigPolicy(rules={"write": (notes,)})
    gate = make_gate(gate_store, [tool], policy=policy.reading_from(Where("/notes")))
    step = gate.begin("r", "goal").step()
    verdict = step.propose(Decision.tool_call("write", {"path": "a.md"}))
    assert verdict.outcome is VerdictOutcome.ALLOWED
    assert recheck(gate_store, "r", policy).differences == ()  # policy reads from nowhere
