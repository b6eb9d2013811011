"""Standing grants (core/grants.py, decision 0050): "allow this exact request for 15 min / 1 h /
until Signoff quits". What each scope allows, what it does not, that each run names its grant,
that a re-check counts it as the operator's, and that a grant nobody signed is not honoured.

The gate's tools are named as the proxy names them (``server/tool``): the call hash a grant binds
covers the server, the tool, its pinned spec and the canonical arguments."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import canonical, grants, operator_key
from core.anchor import Anchor
from core.approvals import approve, call_hash
from core.decisions import Decision
from core.errors import ScopeRefused
from core.gate import Gate, VerdictOutcome
from core.grants import Grant
from core.heads import KeyringHeadStore, MemoryHeadStore
from core.policy.own_files import OwnFiles
from core.policy.policy import (
    OWN_FILES_KIND,
    ConfigPolicy,
    Outcome,
    PolicyDecision,
    PolicyRequest,
    Rule,
)
from core.proxy.rules import ProxyRules
from core.recheck import recheck
from core.records import read_approval
from core.store import Store, format_time
from core.tools import SideEffect, Tool
from core.transitions import CallLabel
from core.verify import verify
from tests.conftest import run_signoff
from tests.core.gatekit import COUNTER_SCHEMA, Calls, make_gate
from tests.forgery import FORGED_MACS, event, forged_mac, rewrite_event

pytestmark = pytest.mark.guarantee("G-GATE-6")

SERVER_TOOLS = ("srv/write", "srv/push", "other/write")
# Two hosts, as the proxy records them (core/proxy/host_identity.py): an id and a label.
HOST_A = ("a" * 64, "host-a 1.0 (process 41)")
HOST_B = ("b" * 64, "host-b 1.0 (process 42)")


def tools(calls: Calls) -> list[Tool]:
    def make(name: str) -> Tool:
        def run(args: dict[str, Any]) -> str:
            calls.made.append((name, args))
            return "done"

        return Tool(name, f"{name} the counter", COUNTER_SCHEMA, SideEffect.LOCAL_MUTATION, run)

    return [make(name) for name in SERVER_TOOLS]


def gate(store: Store, calls: Calls, rules: ProxyRules | None = None) -> Gate:
    return make_gate(store, tools(calls), policy=rules or ProxyRules(ConfigPolicy()))


def ask(g: Gate, run_id: str, tool: str = "srv/write", n: int = 7,
        host: tuple[str, str] | None = HOST_A) -> str:  # fmt: skip
    """A call the policy asks the operator about, made by ``host`` (None: no host, a library
    run); its approval id."""
    server, name = tool.split("/")
    hosted = (None, None) if host is None else host
    s = g.begin(run_id, "goal", call=CallLabel(server, name, "k" * 64, *hosted))
    v = s.step().propose(Decision.tool_call(tool, {"n": n}))
    assert v.outcome == VerdictOutcome.PENDING and v.approval is not None, v
    return v.approval.id


def hash_of(g: Gate, tool: str = "srv/write", n: int = 7) -> str:
    return call_hash(spec_hash=g.tools[tool].spec_hash, tool=tool, arguments={"n": n})


def granted(store: Store, g: Gate, scope: str = "15min", **kw: Any) -> Grant:
    """The operator approves the call of run ``r`` with ``scope``; the grant it made."""
    approval_id = ask(g, "r")
    approve(store, "r", approval_id, "operator:me", "same again is fine", scope=scope, **kw)
    with store.snapshot() as conn:
        [grant] = grants.listed(conn)
    return grant


def live(store: Store, g: Gate, tool: str = "srv/write", n: int = 7,
         now: datetime | None = None, host: str = HOST_A[0]) -> Grant | None:  # fmt: skip
    """The grant the identical call of ``host`` (host A unless said) runs under now."""
    return refused_or(store, g, tool, n, now, host)[0]


def refused_or(store: Store, g: Gate, tool: str = "srv/write", n: int = 7,
               now: datetime | None = None, host: str = HOST_A[0],
               ) -> tuple[Grant | None, list[str]]:  # fmt: skip
    at = None if now is None else format_time(now)
    call = hash_of(g, tool, n)
    return asyncio.run(grants.live(store, operator_key.default(), call, at, host=host))


def sql(store: Store, statement: str, params: tuple[Any, ...] = ()) -> None:
    """A write to the database file from outside Signoff, as an agent's file tool could."""
    conn = sqlite3.connect(store.path)
    conn.execute(statement, params)
    conn.commit()
    conn.close()


# --- what each scope allows, and what it does not ------------------------------------------


@pytest.mark.parametrize(("scope", "lasts"), [("15min", 15 * 60), ("1h", 3600)])
def test_a_timed_scope_allows_exactly_that_call_until_it_ends(
    gate_store: Store, scope: str, lasts: int
) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g, scope)
    decided = datetime.fromisoformat(grant.at)
    assert datetime.fromisoformat(grant.until) - decided == timedelta(seconds=lasts)
    assert (grant.server, grant.tool, grant.call_hash) == ("srv", "write", hash_of(g))
    assert live(gate_store, g, now=decided + timedelta(seconds=lasts - 1)) == grant
    # After its end; a changed argument; a changed tool; the same tool of another server.
    assert live(gate_store, g, now=decided + timedelta(seconds=lasts + 1)) is None
    assert live(gate_store, g, n=8) is None
    assert live(gate_store, g, tool="srv/push") is None
    assert live(gate_store, g, tool="other/write") is None


def test_until_signoff_quits_lasts_for_the_apps_session_only(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g, "app", app_session="session-1")
    assert grant.app_session == "session-1" and live(gate_store, g) == grant
    assert grants.start_app_session(gate_store, "session-1") == 0  # its own session: kept
    assert live(gate_store, g) == grant
    assert grants.end_app_session(gate_store, "session-1") == 1  # the app quits
    assert live(gate_store, g) is None


def test_an_app_starting_ends_what_an_app_that_did_not_quit_left(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    granted(gate_store, g, "app", app_session="crashed")
    assert grants.start_app_session(gate_store, "next") == 1
    assert live(gate_store, g) is None


def test_until_signoff_quits_needs_the_apps_session(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    approval_id = ask(g, "r")
    with pytest.raises(ScopeRefused):
        approve(gate_store, "r", approval_id, "operator:me", scope="app")
    with gate_store.snapshot() as conn:
        assert read_approval(conn, approval_id).status == "pending"  # nothing decided


def test_a_duplicate_is_never_approved_for_a_while(gate_store: Store) -> None:
    """A duplicate asks about what a call may already have done: once each time."""
    rules = ProxyRules(ConfigPolicy())
    rules.duplicate_of = "2026-12-05T10:00:00.000000Z"
    g = gate(gate_store, Calls(), rules)
    approval_id = ask(g, "r")
    with pytest.raises(ScopeRefused):
        approve(gate_store, "r", approval_id, "operator:me", scope="15min")
    with gate_store.snapshot() as conn:
        assert read_approval(conn, approval_id).status == "pending"
        assert grants.listed(conn) == []


def test_a_revoked_grant_allows_nothing_more(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    grants.revoke(gate_store, grant.id, by="operator:me")
    assert live(gate_store, g) is None


# --- the host it was given for (rule 8, decision 0070) ------------------------------------


def edit_payload(store: Store, kind: str, run_id: str, **changed: Any) -> None:
    """Rewrite an event's payload in the database file, as a file writer could (the chain's
    hash then breaks, which ``signoff verify`` sees; a call under a grant does not verify it)."""
    with store.snapshot() as conn:
        seq, text = conn.execute(
            "SELECT seq, payload FROM events WHERE kind = ? AND run_id = ?", (kind, run_id)
        ).fetchone()
    payload = canonical.loads(text)
    payload.update(changed)
    if "call" in changed:  # a nested change: run.started's host
        payload["call"] = {**canonical.loads(text)["call"], **changed["call"]}
    sql(store, "UPDATE events SET payload = ? WHERE seq = ?",
        (canonical.dumps_text(payload), seq))  # fmt: skip


def test_a_grant_edited_to_name_another_host_is_not_honoured(store: Store) -> None:
    """A file writer makes host A's grant host B's: the run's host, its label and the grant's
    record all say B, so the row and the record agree; the MAC, over the host, does not."""
    g = gate(store, Calls())
    granted(store, g)
    sql(store, "UPDATE runs SET host = ? WHERE id = 'r'", (HOST_B[0],))
    assert live(store, g, host=HOST_B[0]) is None  # the row alone: not what the record says
    edit_payload(store, "run.started", "r", call={"host": {"id": HOST_B[0], "label": HOST_B[1]}})
    edit_payload(store, "grant.made", "r", host=HOST_B[0], host_label=HOST_B[1])
    with store.snapshot() as conn:
        [forged] = grants.listed(conn)
    assert (forged.host, forged.host_label) == HOST_B
    found, refused = refused_or(store, g, host=HOST_B[0])
    assert found is None and len(refused) == 1, refused
    assert refused[0].endswith("is not authenticated by this database's key"), refused
    assert live(store, g) is None  # nor host A's, whose grant it no longer says it is


def test_a_grant_covers_the_identical_call_of_the_host_it_was_given_for_only(
    gate_store: Store,
) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    assert (grant.host, grant.host_label) == HOST_A
    assert live(gate_store, g) == grant
    found, refused = refused_or(gate_store, g, host=HOST_B[0])
    assert found is None and refused == [
        f"grant {grant.id} was given to {HOST_A[1]}, not this host"
    ]
    with gate_store.snapshot() as conn:
        (payload,) = conn.execute("SELECT payload FROM events WHERE kind = 'grant.made'").fetchone()
    made = canonical.loads(payload)
    assert (made["host"], made["host_label"]) == HOST_A  # recorded, and signed with the rest


def test_a_request_no_host_made_is_approved_once_not_for_a_while(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    approval_id = ask(g, "r", host=None)
    with pytest.raises(ScopeRefused):
        approve(gate_store, "r", approval_id, "operator:me", scope="15min")
    with gate_store.snapshot() as conn:
        assert read_approval(conn, approval_id).status == "pending"  # nothing decided
        assert grants.listed(conn) == []


def test_a_grant_made_before_grants_named_their_host_covers_no_call(store: Store) -> None:
    """A ``signoff.grant.v1`` grant, signed as it was then (no host in its fields): honoured by
    no host, with the reason said."""
    g = gate(store, Calls())
    grant = granted(store, g)
    key = operator_key.default().key(store.database_id)
    assert key is not None
    fields = grants.grant_fields(store.database_id, grant)
    old = {k: v for k, v in fields.items() if k not in ("host", "host_label")}
    old["v"] = "signoff.grant.v1"
    recorded = {k: v for k, v in old.items() if k not in ("v", "database", "run", "step", "at")}
    with store.snapshot() as conn:
        (text,) = conn.execute("SELECT payload FROM events WHERE kind = 'grant.made'").fetchone()
    payload = {**recorded, "key": canonical.loads(text)["key"], "mac": operator_key.mac(key, old)}
    with store.snapshot() as conn:
        (seq,) = conn.execute("SELECT seq FROM events WHERE kind = 'grant.made'").fetchone()
    sql(store, "UPDATE events SET payload = ? WHERE seq = ?", (canonical.dumps_text(payload), seq))
    for host in (HOST_A[0], HOST_B[0]):
        found, refused = refused_or(store, g, host=host)
        assert found is None and "before grants named their host" in refused[0], refused


# --- the proxy's rules: where a grant applies ----------------------------------------------


def rules_with(grant: Grant, policy: ConfigPolicy | None = None) -> ProxyRules:
    rules = ProxyRules(policy or ConfigPolicy())
    rules.grant = grant
    return rules


def evaluate(rules: ProxyRules, g: Gate, arguments: dict[str, Any] | None = None) -> PolicyDecision:
    tool = g.tools["srv/write"]
    request = PolicyRequest.build(
        tool=tool.name, spec_hash=tool.spec_hash, side_effect=SideEffect.LOCAL_MUTATION,
        idempotent=False, arguments={"n": 7} if arguments is None else arguments, run_id="x",
        goal="goal", step=0, consecutive_failures=0,
    )  # fmt: skip
    return rules.evaluate(request)


def test_a_grant_yields_the_duplicate_rule_but_not_a_call_that_may_have_run(
    gate_store: Store,
) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    rules = rules_with(grant)
    assert evaluate(rules, g) == PolicyDecision(
        Outcome.ALLOW, grant.sentence(), "grant", grant=grant.id
    )
    rules.duplicate_of = "2026-12-05T10:00:00.000000Z"  # the earlier identical call completed
    assert evaluate(rules, g).grant == grant.id
    rules.may_have_run = True  # its outcome is unknown: the operator is asked again
    assert (evaluate(rules, g).outcome, evaluate(rules, g).kind) == (Outcome.APPROVE, "duplicate")


def test_a_grant_never_overrides_a_deny(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    denied = rules_with(grant, ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.DENY}))
    assert evaluate(denied, g).outcome is Outcome.DENY


class Aborting(ConfigPolicy):
    """A policy that ends the run (rule 2 of core/policy/policy.py): what a grant must not
    turn into an allow."""

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        return PolicyDecision(Outcome.ABORT, "this run is not to be")


def test_a_grant_never_overrides_an_abort(gate_store: Store) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    aborted = rules_with(grant, Aborting())
    assert evaluate(aborted, g) == PolicyDecision(Outcome.ABORT, "this run is not to be")
    aborted.duplicate_of = "2026-12-05T10:00:00.000000Z"  # the duplicate rule yields to it too
    assert evaluate(aborted, g).outcome is Outcome.ABORT


def test_a_grant_never_overrides_the_rule_for_signoffs_own_files(
    gate_store: Store, home: Path
) -> None:
    """The grant is live for this host's call; the call names Signoff's configuration, so it
    waits for the operator as ``own_files`` all the same, the identical call before it
    completed or not."""
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    config = home / ".config/signoff"
    config.mkdir(parents=True, exist_ok=True)
    rules = rules_with(grant)
    rules.own_files = OwnFiles((config,), cwd=home)
    touching = {"n": 7, "path": str(config / "config.toml")}
    for completed_before in (None, "2026-12-05T10:00:00.000000Z"):
        rules.duplicate_of = completed_before
        decided = evaluate(rules, g, touching)
        assert (decided.outcome, decided.kind, decided.grant) == (
            Outcome.APPROVE, OWN_FILES_KIND, "",
        ), completed_before  # fmt: skip
    assert evaluate(rules, g).grant == grant.id  # the same grant still covers its own call


# --- recorded, shown and re-checked --------------------------------------------------------


def run_under(store: Store, g: Gate, grant: Grant, run_id: str = "again") -> None:
    g.config.policy.grant = grant  # type: ignore[attr-defined]  # as the proxy sets it
    s = g.begin(run_id, "goal", call=CallLabel("srv", "write", "k" * 64))
    step = s.step()
    v = step.propose(Decision.tool_call("srv/write", {"n": 7}))
    g.config.policy.grant = None  # type: ignore[attr-defined]
    assert v.outcome == VerdictOutcome.ALLOWED, v
    asyncio.run(step.execute())


def test_a_run_under_a_grant_names_it_and_a_recheck_counts_it_as_the_operators(
    gate_store: Store, home: Path
) -> None:
    calls = Calls()
    g = gate(gate_store, calls)
    grant = granted(gate_store, g)
    run_under(gate_store, g, grant)
    assert calls.made == [("srv/write", {"n": 7})]
    with gate_store.snapshot() as conn:
        assert grants.used_by(conn, ["again", "r"]) == {"again": grant.id}
        (payload,) = conn.execute(
            "SELECT payload FROM events WHERE run_id = 'again' AND kind = 'step.policy'"
        ).fetchone()
    decision = canonical.loads(payload)["decision"]
    assert decision["grant"] == grant.id and grant.id in decision["reason"]
    assert "approved by operator:me" in decision["reason"] and "for 15 min" in decision["reason"]
    # Decided by the operator: today's policy asking (or allowing) agrees; denying does not.
    assert recheck(gate_store, "again", ConfigPolicy()).differences == ()
    deny = ConfigPolicy({SideEffect.LOCAL_MUTATION: Rule.DENY})
    assert len(recheck(gate_store, "again", deny).differences) == 1
    shown = run_signoff("runs", home=home, ok=True).stdout
    assert f"allowed under grant {grant.id}" in shown
    listed = run_signoff("grants", "list", home=home, ok=True).stdout
    assert grant.id in listed and "srv/write" in listed
    verified = run_signoff("verify", "--no-keyring", home=home)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_signoff_grants_revoke_ends_a_grant(gate_store: Store, home: Path) -> None:
    g = gate(gate_store, Calls())
    grant = granted(gate_store, g)
    ended = run_signoff("grants", "revoke", grant.id, home=home, ok=True)
    assert live(gate_store, g) is None
    # The end is kept in the keyring (rule 6): cutting it off the chain would be seen.
    assert KeyringHeadStore().load(gate_store.database_id) == gate_store.head(), ended.stderr
    assert grant.id not in run_signoff("grants", "list", home=home, ok=True).stdout
    again = run_signoff("grants", "revoke", grant.id, home=home)
    assert again.returncode == 2 and "UnknownGrant" in again.stderr


# --- a grant nobody signed is not honoured -------------------------------------------------


def test_a_grant_row_written_into_the_database_is_not_honoured(store: Store) -> None:
    g = gate(store, Calls())
    ask(g, "r")  # a run to hang the forged row on, as a real one would be
    until = format_time(datetime.now(UTC) + timedelta(days=1))
    sql(store, "INSERT INTO grants (id, approval_id, run_id, step_idx, call_hash, server, tool,"
               " scope, until, decided_by, decided_at, reason) VALUES ('gr-forged', 'ap-1', 'r',"
               " 0, ?, 'srv', 'write', '1h', ?, 'operator:me', ?, '')",
        (hash_of(g), until, format_time(datetime.now(UTC))))  # fmt: skip
    found, refused = refused_or(store, g)
    assert found is None and refused and "0 records" in refused[0]


def test_a_grant_whose_end_was_moved_or_revocation_undone_is_not_honoured(store: Store) -> None:
    g = gate(store, Calls())
    grant = granted(store, g)
    later = format_time(datetime.now(UTC) + timedelta(days=30))
    sql(store, "UPDATE grants SET until = ? WHERE id = ?", (later, grant.id))
    assert live(store, g, now=datetime.fromisoformat(grant.until) + timedelta(minutes=1)) is None
    assert live(store, g) is None  # the row no longer says what the signed record says
    sql(store, "UPDATE grants SET until = ? WHERE id = ?", (grant.until, grant.id))
    assert live(store, g) == grant
    grants.revoke(store, grant.id, by="operator:me")
    sql(store, "UPDATE grants SET revoked_at = NULL, revoked_by = NULL WHERE id = ?", (grant.id,))
    assert live(store, g) is None  # the chain says it was ended


def test_a_forged_grant_event_with_no_mac_is_not_honoured(store: Store) -> None:
    """All a file writer can do: a row and a ``grant.made`` event whose chain hash verifies (the
    chain is not keyed), with no MAC or a made-up one."""
    g = gate(store, Calls())
    approval_id = ask(g, "r")
    now = datetime.now(UTC)
    for mac in (None, "0" * 64):
        grant = Grant(f"gr-{'x' if mac else 'y'}", approval_id, "r", 0, hash_of(g), "srv",
                      "write", "1h", format_time(now + timedelta(hours=1)), None, "operator:me",
                      format_time(now), "", *HOST_A)  # fmt: skip
        fields = grants.grant_fields(store.database_id, grant)
        payload = {k: v for k, v in fields.items() if k not in ("v", "database", "run", "step",
                                                                   "at")}  # fmt: skip
        with store.transaction() as tx:
            tx.execute(
                "INSERT INTO grants (id, approval_id, run_id, step_idx, call_hash, server, tool,"
                " scope, until, app_session, decided_by, decided_at, reason) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (grant.id, approval_id, "r", 0, grant.call_hash, "srv", "write", "1h",
                 grant.until, None, grant.by, grant.at, ""),
            )  # fmt: skip
            tx.append_event(kind="grant.made", payload={**payload, "key": "k", "mac": mac},
                            at=grant.at, run_id="r", step=0)  # fmt: skip
    found, refused = refused_or(store, g)
    assert found is None and len(refused) == 2


def made_event(store: Store, run_id: str = "r") -> int:
    """The stored ``grant.made`` event of the grant given in run ``run_id``."""
    return last_seq_of(store, "grant.made", run_id)


def last_seq_of(store: Store, kind: str, run_id: str) -> int:
    (seq,) = store._conn.execute(
        "SELECT max(seq) FROM events WHERE kind = ? AND run_id = ?", (kind, run_id)
    ).fetchone()
    return int(seq)


def not_authenticated(refused: list[str]) -> bool:
    return len(refused) == 1 and refused[0].endswith("is not authenticated by this database's key")


@pytest.mark.parametrize("how", FORGED_MACS)
def test_a_grant_whose_mac_is_forged_under_the_real_key_id_is_not_honoured(
    store: Store, how: str
) -> None:
    """A real grant's MAC rewritten in the database, under the key id every signed event
    shows, to one near it (another grant's: valid where it was made), the chain's hashes
    computed again: only the comparison of the MAC can refuse it."""
    g = gate(store, Calls())
    granted(store, g)
    approve(store, "r2", ask(g, "r2", n=8), "operator:me", scope="15min")
    made = event(store.path, made_event(store))[3]
    other = event(store.path, made_event(store, "r2"))[3]["mac"]
    rewrite_event(store.path, made_event(store), mac=forged_mac(how, made["mac"], other))
    assert event(store.path, made_event(store))[3]["key"] == made["key"]  # the real key id
    verify(store)  # the chain holds
    found, refused = refused_or(store, g)
    assert found is None and not_authenticated(refused), refused
    assert live(store, g, n=8) is not None  # the real one beside it is honoured


# What a grant's MAC covers (core/grants.py rule 4), each changed by a writer of the database
# file in the grant's row (or its run's) and its stored record alike, so that they agree: the
# call it claims to cover is then asked about, the grant "not authenticated". Its version and
# database are the code's and the key's own: no write to the file changes them.
LATER = format_time(datetime.now(UTC) + timedelta(days=2))
GRANT_EDITS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    # field: (the row's change, the record's change, the call then claimed: live()'s arguments)
    "grant": ("UPDATE grants SET id = 'gr-renamed'", {"grant": "gr-renamed"}, {}),
    "approval": ("UPDATE grants SET approval_id = 'ap-other'", {"approval": "ap-other"}, {}),
    "run": ("UPDATE grants SET run_id = 'r2'", {"run_id": "r2"}, {}),
    "step": ("UPDATE grants SET step_idx = 1", {"step_idx": 1}, {}),
    "call_hash": ("UPDATE grants SET call_hash = :n8", {"call_hash": ":n8"}, {"n": 8}),
    "server": ("UPDATE grants SET server = 'other'", {"server": "other"}, {}),
    "tool": ("UPDATE grants SET tool = 'push'", {"tool": "push"}, {}),
    "scope": ("UPDATE grants SET scope = '1h'", {"scope": "1h"}, {}),
    "until": ("UPDATE grants SET until = :later", {"until": ":later"}, {}),
    "app_session": ("UPDATE grants SET app_session = 's1'", {"app_session": "s1"}, {}),
    "by": ("UPDATE grants SET decided_by = 'operator:root'", {"by": "operator:root"}, {}),
    "at": ("UPDATE grants SET decided_at = :later", {"at": ":later"}, {}),
    "reason": ("UPDATE grants SET reason = 'always'", {"reason": "always"}, {}),
    "host": ("UPDATE runs SET host = :b WHERE id = 'r'", {"host": ":b"}, {"host": HOST_B[0]}),
    "host_label": ("", {"host_label": "someone"}, {}),
}


@pytest.mark.parametrize("field", GRANT_EDITS)
def test_a_real_grant_edited_in_any_field_its_mac_covers_is_not_honoured(
    store: Store, field: str
) -> None:
    g = gate(store, Calls())
    grant = granted(store, g)
    ask(g, "r2", n=9)  # another run of the same host, for a grant moved to it
    assert live(store, g) == grant
    values = {":n8": hash_of(g, n=8), ":later": LATER, ":b": HOST_B[0]}
    statement, record, claimed = GRANT_EDITS[field]
    record = {k: values.get(v, v) for k, v in record.items()}
    columns = {k: record.pop(k) for k in ("run_id", "step_idx") if k in record}
    if "at" in record:  # the record's time is its event's
        columns["at"] = record.pop("at")
    params = {k[1:]: v for k, v in values.items()}
    rows = ((statement, params),) if statement else ()
    rewrite_event(store.path, made_event(store), sql=rows, **columns, **record)
    if field == "host_label":  # the label is its run's, from the run's start
        started = last_seq_of(store, "run.started", "r")
        call = event(store.path, started)[3]["call"]
        call["host"] = {**call["host"], "label": "someone"}
        rewrite_event(store.path, started, call=call)
    with store.snapshot() as conn:
        [edited] = grants.listed(conn)
    assert edited != grant  # the row says what the record says
    verify(store)
    found, refused = refused_or(store, g, **claimed)
    assert found is None and not_authenticated(refused), refused


# What the call hash a grant binds covers (core/grants.py rule 2), and the host beside it
# (rule 8): a call that differs in any of them is another call, which the grant does not cover.
def _repinned(calls: Calls) -> list[Tool]:
    """The same tools, srv/write re-pinned with a reworded description (its spec changed)."""
    return [
        dataclasses.replace(t, description="write the counter, and mail it out")
        if t.name == "srv/write"
        else t
        for t in tools(calls)
    ]


CALL_CHANGES: dict[str, dict[str, Any]] = {
    "arguments": {"n": 8},
    "tool": {"tool": "srv/push"},
    "server": {"tool": "other/write"},
    "pinned spec": {},
    "host": {"host": HOST_B[0]},
}


@pytest.mark.parametrize("change", CALL_CHANGES)
def test_a_grant_covers_no_call_that_differs_in_what_its_call_hash_or_host_covers(
    store: Store, change: str
) -> None:
    calls = Calls()
    g = gate(store, calls)
    grant = granted(store, g)
    assert live(store, g) == grant
    if change == "pinned spec":
        g = make_gate(store, _repinned(calls), policy=ProxyRules(ConfigPolicy()))
    assert live(store, g, **CALL_CHANGES[change]) is None


def test_an_end_cut_off_the_chain_brings_no_grant_back_once_the_end_is_kept(
    store: Store,
) -> None:
    """An agent with a file tool deletes the tail ``grant.revoked`` event and clears the row:
    the chain alone cannot tell, but the head kept in the keyring at the end (rule 6) can."""
    g = gate(store, Calls())
    grant = granted(store, g, "app", app_session="s1")
    assert grants.end_app_session(store, "s1") == 1  # the app quits
    anchor = Anchor(MemoryHeadStore())
    assert grants.keep_end(store, anchor) == ""  # as the app does at quit
    sql(store, "DELETE FROM events WHERE kind = 'grant.revoked'")
    sql(store, "UPDATE grants SET revoked_at = NULL, revoked_by = NULL WHERE id = ?", (grant.id,))
    assert live(store, g) == grant  # the chain alone reads as if it had never ended
    found, refused = asyncio.run(grants.live(store, operator_key.default(), hash_of(g),
                                             host=HOST_A[0], anchor=anchor))  # fmt: skip
    assert found is None and "DatabaseRestored" in refused[0]


@pytest.mark.guarantee("G-KEY-2")
def test_an_end_cut_off_and_padded_back_to_the_kept_length_brings_no_grant_back(
    store: Store,
) -> None:
    """As above, and the cut log is padded back to the kept length with rows carrying the
    live hashes, so the event at the kept sequence has the kept hash: the events from the
    grant's making are recomputed, and they do not chain to it."""
    g = gate(store, Calls())
    grant = granted(store, g, "app", app_session="s1")
    assert grants.end_app_session(store, "s1") == 1
    anchor = Anchor(MemoryHeadStore())
    assert grants.keep_end(store, anchor) == ""
    with store.snapshot() as conn:
        (seq, kept) = conn.execute(
            "SELECT seq, hash FROM events WHERE kind = 'grant.revoked'"
        ).fetchone()
    sql(store, "UPDATE events SET kind = 'filler', payload = '{}', run_id = NULL,"
               " step_idx = NULL WHERE seq = ?", (seq,))  # fmt: skip
    sql(store, "UPDATE grants SET revoked_at = NULL, revoked_by = NULL WHERE id = ?", (grant.id,))
    assert store.head().hash == kept  # the stored hash at the kept sequence is the kept one
    found, refused = asyncio.run(grants.live(store, operator_key.default(), hash_of(g),
                                             host=HOST_A[0], anchor=anchor))  # fmt: skip
    assert found is None and "DatabaseRestored" in refused[0], refused


@pytest.mark.guarantee("G-KEY-3")
def test_a_standing_grant_runs_nothing_through_another_keyring_than_the_recorded_one(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a one-time approval: a process reaching the operator key through another keyring
    (keyrings.alt's file holding the same key) than the one the chain records is refused."""
    from keyrings.alt.file import PlaintextKeyring

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    g = gate(store, Calls())
    grant = granted(store, g)
    assert live(store, g) == grant
    other_keys = operator_key.KeyringKeyStore(PlaintextKeyring())  # type: ignore[arg-type]
    other_keys.save(store.database_id, operator_key.default().key_for_deciding(store))
    other = operator_key.OperatorKey(other_keys)
    found, refused = asyncio.run(grants.live(store, other, hash_of(g), host=HOST_A[0]))
    assert found is None and refused[0].endswith("[KeyringChanged]"), refused
