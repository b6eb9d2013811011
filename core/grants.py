"""Standing grants: "allow this exact request for 15 min, 1 h, or until Signoff quits".

Rules (decision 0050):

1. A grant is made only with the operator's approval of a request the policy asked about (an
   approval whose kind is a side-effect class), in that decision's transaction. Never for an
   interrupted call, a duplicate or a request naming Signoff's own files: those ask about
   what a call may already have done, once each (``ScopeRefused``, nothing decided).
2. It binds the step's recorded call hash (``approvals.call_hash``: the tool's pinned spec,
   ``server/tool`` and the canonical arguments), so a changed argument, another tool, a re-pinned
   tool or another server is another call. The server and tool are kept for people.
3. Its scope is ``15min`` or ``1h`` (until the decision's time plus that) or ``app`` (until
   Signoff quits: the app's session id, and at most ``APP_CAP`` after the decision, for an
   app that never got to end its session).
4. It is signed like a decision (core/operator_key.py): HMAC-SHA-256 under the operator key
   over the RFC 8785 form of ``grant_fields``. The MAC is in the ``grant.made`` event, appended
   to the chain under the approval's run and step; the ``grants`` row is a view for queries.
5. A call is allowed under a grant (``live``) only when a row with its call hash is unrevoked and
   unexpired, and the chain holds exactly one ``grant.made`` of that grant, naming that call
   hash and the calling host (rule 8), unexpired by its own ``until``, whose MAC verifies
   under this database's key, and no ``grant.revoked`` of it. A grant made before grants named
   their host (``signoff.grant.v1``) covers no call: the operator approves the request again.
   Anything else (a row written into the database directly, an ``until`` moved, a revocation
   undone) is not a grant: the call asks as if there were none. Unsigned grants are honoured
   only where an unsigned decision would be (operator_key rule 4), and no grant is honoured by
   a process reaching another keyring than the one the chain records (operator_key rule 6).
   With an anchor (core/anchor.py), the database must also still hold the head kept in the
   keyring, and the events from the grant's making to that head must chain to it (core/
   anchor.py rule 7): one cut back to before a revocation the keyring saw, padded or not, is
   not trusted with a grant (the call asks; ``DatabaseRestored`` is logged).
6. Ending a grant needs no key (it only takes away): ``revoke`` by its id, ``end_app_session``
   when the app quits, ``start_app_session`` ending every other session's when it starts. Who
   ends one keeps the head that holds the end in the keyring (``signoff grants revoke``, the
   app at quit; the app's witness while it runs), so that cutting the end off is seen (rule 5).
7. The proxy's duplicate rule yields to a grant (the operator chose repetition) when the
   earlier identical call completed; a call whose earlier run may have run with its outcome
   unknown (at any age, past the duplicate window too), or another host's identical call not
   ended yet, still asks. A deny, an abort and
   the rule for Signoff's own files stand (core/proxy/server.py ``ProxyRules``).
8. A grant names the host it was given for (decision 0070): the host of the approval's run
   (``runs.host``, core/proxy/host_identity.py: the clientInfo and the process that launched
   the proxy) and that run's label for people ("claude-code 2.0 (process 4242)"), both signed.
   It covers that host's identical calls only; another host's identical call asks as if there
   were no grant. A request no host made (a library run) is approved once (``ScopeRefused``).
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from core import canonical, operator_key
from core.canonical import JSONValue
from core.errors import (
    DatabaseRestored,
    HeadUnavailable,
    JSONRefused,
    OperatorKeyUnavailable,
    ScopeRefused,
    UnknownGrant,
)
from core.records import ApprovalView
from core.store import Store, Transaction, format_time, utc_now

if TYPE_CHECKING:
    from core.anchor import Anchor
from core.tools import SideEffect

VERSION = "signoff.grant.v2"  # v2: the host (rule 8)
GRANT_KIND = "grant"  # the kind of a policy decision allowed under a grant
SCOPES: dict[str, timedelta | None] = {
    "15min": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "app": None,
}
APP_CAP = timedelta(hours=12)
SCOPE_WORDS = {"15min": "for 15 min", "1h": "for 1 h", "app": "until Signoff quits"}
# Signed, but not written into the event's payload: the event itself carries them (its run,
# step and time), or they are constants of this database and this version.
_IMPLIED = ("v", "database", "run", "step", "at")
_COLUMNS = (
    "id, approval_id, run_id, step_idx, call_hash, server, tool, scope, until, app_session,"
    " decided_by, decided_at, reason, revoked_at, revoked_by"
)
# The host of a grant is its run's (rule 8): read with the row, never copied into it.
_HOST = (
    "SELECT r.host, COALESCE((SELECT json_extract(e.payload, '$.call.host.label') FROM events e"
    " WHERE e.run_id = r.id AND e.kind = 'run.started' ORDER BY e.seq LIMIT 1), '')"
    " FROM runs r WHERE r.id = ?"
)
_SELECT = (
    "SELECT g.id, g.approval_id, g.run_id, g.step_idx, g.call_hash, g.server, g.tool, g.scope,"
    " g.until, g.app_session, g.decided_by, g.decided_at, g.reason, r.host,"
    " COALESCE((SELECT json_extract(e.payload, '$.call.host.label') FROM events e"
    "  WHERE e.run_id = g.run_id AND e.kind = 'run.started' ORDER BY e.seq LIMIT 1), ''),"
    " g.revoked_at, g.revoked_by FROM grants g LEFT JOIN runs r ON r.id = g.run_id"
)


@dataclass(frozen=True)
class Grant:
    id: str
    approval_id: str
    run_id: str
    step: int
    call_hash: str
    server: str | None
    tool: str
    scope: str
    until: str
    app_session: str | None
    by: str
    at: str
    reason: str
    host: str | None  # the id of the host it was given for (rule 8)
    host_label: str  # that host, for people
    revoked_at: str | None = None
    revoked_by: str | None = None

    def sentence(self) -> str:
        """What a run allowed under it records: which grant, whose, when, and its scope."""
        return (
            f"allowed under grant {self.id} (approved by {self.by} at {self.at},"
            f" scope {SCOPE_WORDS.get(self.scope, self.scope)}, until {self.until})"
        )


def grant_fields(database_id: str, grant: Grant) -> dict[str, JSONValue]:
    """What the MAC covers (rule 4)."""
    return {
        "v": VERSION,
        "database": database_id,
        "grant": grant.id,
        "approval": grant.approval_id,
        "run": grant.run_id,
        "step": grant.step,
        "call_hash": grant.call_hash,
        "server": grant.server,
        "tool": grant.tool,
        "scope": grant.scope,
        "until": grant.until,
        "app_session": grant.app_session,
        "by": grant.by,
        "at": grant.at,
        "reason": grant.reason,
        "host": grant.host,
        "host_label": grant.host_label,
    }


def check_scope(scope: str, kind: str, app_session: str | None) -> None:
    """Raise ``ScopeRefused`` unless this approval may be given this scope (rules 1 and 3)."""
    if scope not in SCOPES:
        raise ScopeRefused(f"{scope!r} is not a scope; known: once, {', '.join(SCOPES)}")
    if kind not in {s.value for s in SideEffect}:
        raise ScopeRefused(
            f"a request asked about as {kind} is approved once each time, never for a while"
        )
    if scope == "app" and not app_session:
        raise ScopeRefused("'until Signoff quits' needs the app's session: decide it in the app")


def make(
    tx: Transaction,
    database_id: str,
    key: bytes | None,
    approval: ApprovalView,
    *,
    scope: str,
    app_session: str | None,
    by: str,
    at: str,
    reason: str,
) -> Grant:
    """Write the grant the operator's approval of ``approval`` gives (rules 1 to 4), in the
    decision's transaction. ``check_scope`` was passed."""
    conn = tx.conn
    row = conn.execute(
        "SELECT s.request_hash, s.tool_name, r.server, r.tool FROM steps s JOIN runs r"
        " ON r.id = s.run_id WHERE s.run_id = ? AND s.idx = ?",
        (approval.run_id, approval.step),
    ).fetchone()
    if row is None or row[0] is None or row[1] is None:
        raise ScopeRefused(f"approval {approval.id} names no recorded call")
    call_hash, gate_tool, server, tool = row
    host, host_label = conn.execute(_HOST, (approval.run_id,)).fetchone()
    if host is None:
        raise ScopeRefused(
            f"approval {approval.id} is of a call no host made: a grant covers one host's"
            " calls, so it is approved once"
        )
    duration = SCOPES[scope]
    decided = datetime.fromisoformat(at)
    until = format_time(decided + (APP_CAP if duration is None else duration))
    grant = Grant(
        f"gr-{secrets.token_hex(6)}", approval.id, approval.run_id, approval.step, call_hash,
        server, tool or gate_tool, scope, until, app_session if scope == "app" else None,
        by, at, reason, host, host_label,
    )  # fmt: skip
    signed = operator_key.Signature(None, None)
    if key is not None:
        fields = grant_fields(database_id, grant)
        signed = operator_key.Signature(operator_key.key_id(key), operator_key.mac(key, fields))
    tx.execute(
        f"INSERT INTO grants ({_COLUMNS}) VALUES ({', '.join('?' * 15)})",  # noqa: S608
        (grant.id, grant.approval_id, grant.run_id, grant.step, grant.call_hash, grant.server,
         grant.tool, grant.scope, grant.until, grant.app_session, grant.by, grant.at,
         grant.reason, None, None),
    )  # fmt: skip
    payload = {k: v for k, v in grant_fields(database_id, grant).items() if k not in _IMPLIED}
    payload.update(key=signed.key, mac=signed.mac)
    tx.append_event(kind="grant.made", payload=payload, at=at, run_id=grant.run_id,
                    step=grant.step)  # fmt: skip
    return grant


def _grant(row: tuple[object, ...]) -> Grant:
    return Grant(*row)  # type: ignore[arg-type]


def listed(conn: sqlite3.Connection, *, now: str | None = None) -> list[Grant]:
    """Every grant recorded, newest first; with ``now``, only those not ended by then."""
    sql = _SELECT
    params: tuple[str, ...] = ()
    if now is not None:
        sql += " WHERE g.revoked_at IS NULL AND g.until > ?"
        params = (now,)
    order = " ORDER BY g.decided_at DESC, g.rowid DESC"
    return [_grant(r) for r in conn.execute(sql + order, params)]


def candidates(conn: sqlite3.Connection, call_hash: str, now: str) -> list[Grant]:
    """The rows that say a grant covers this call now: to be checked (``authentic``)."""
    rows = conn.execute(
        f"{_SELECT} WHERE g.call_hash = ? AND g.until > ?"
        " AND g.revoked_at IS NULL ORDER BY g.decided_at DESC, g.rowid DESC",
        (call_hash, now),
    ).fetchall()
    return [_grant(r) for r in rows]


def authentic(
    conn: sqlite3.Connection, database_id: str, key: bytes | None, grant: Grant, call_hash: str,
    host: str, now: str, *, unsigned: bool = False,
) -> str | None:  # fmt: skip
    """None when the chain holds ``grant`` as the operator made it, covering ``call_hash`` of
    ``host`` at ``now`` and not revoked (rule 5); else why not, in a sentence. ``unsigned``:
    whether an unsigned grant counts here (``OperatorKey.unsigned_counts``)."""
    rows = conn.execute(
        "SELECT seq, kind, payload, at FROM events WHERE run_id = ? AND step_idx = ?"
        " AND kind IN ('grant.made', 'grant.revoked')",
        (grant.run_id, grant.step),
    ).fetchall()
    made: list[tuple[int, dict[str, JSONValue], str]] = []
    for seq, kind, text, at in rows:
        try:
            payload = canonical.loads(text)
        except JSONRefused:
            continue
        if not isinstance(payload, dict) or payload.get("grant") != grant.id:
            continue
        if kind == "grant.revoked":
            return f"grant {grant.id} was ended (event {seq})"
        made.append((seq, payload, at))
    if len(made) != 1:
        return f"the chain holds {len(made)} records of grant {grant.id} being made, not one"
    seq, payload, at = made[0]
    fields = grant_fields(database_id, grant)
    recorded = {k: payload.get(k) for k in fields if k not in _IMPLIED}
    if recorded != {k: v for k, v in fields.items() if k in recorded} or at != grant.at:
        if "host" not in payload:  # signoff.grant.v1 (rule 5)
            return (
                f"grant {grant.id} (event {seq}) was made before grants named their host: it"
                " covers no call; approve the request again"
            )
        return f"grant {grant.id}'s row is not what its record (event {seq}) says"
    if grant.call_hash != call_hash or not now < grant.until:
        return f"grant {grant.id} does not cover this call now"
    if grant.host != host:  # rule 8
        return f"grant {grant.id} was given to {grant.host_label or 'another host'}, not this host"
    sent = payload.get("mac")
    if sent is None:
        if key is None and unsigned:
            return None
        return f"grant {grant.id} (event {seq}) carries no MAC"
    if key is None:
        return f"grant {grant.id} cannot be checked: the OS keyring holds no operator key"
    expected = operator_key.mac(key, fields)
    if payload.get("key") != operator_key.key_id(key) or not operator_key.mac_matches(
        sent, expected
    ):
        return f"grant {grant.id} (event {seq}) is not authenticated by this database's key"
    return None


def revoke(store: Store, grant_id: str, *, by: str, at: str | None = None) -> Grant:
    """End a grant now (rule 6); ``UnknownGrant`` when there is none live by that id."""
    at = at or utc_now()
    with store.transaction() as tx:
        row = tx.conn.execute(
            f"{_SELECT} WHERE g.id = ? AND g.revoked_at IS NULL", (grant_id,)
        ).fetchone()
        if row is None:
            raise UnknownGrant(f"there is no grant {grant_id} still in force")
        _end(tx, _grant(row), by, at, "revoked")
    return _grant(row)


def keep_end(store: Store, anchor: Anchor | None = None) -> str:
    """Keep the database's head, which holds the grants just ended, in the keyring (rule 6);
    "" when kept, else why not (the end stands: it is in the chain)."""
    from core.anchor import Anchor
    from core.errors import SignoffError
    from core.heads import KeyringHeadStore

    try:
        (anchor or Anchor(KeyringHeadStore())).advance(store, store.head(), latest=True)
    except SignoffError as e:
        return f"{e} [{type(e).__name__}]"
    return ""


def start_app_session(store: Store, session: str, *, by: str = "signoff app") -> int:
    """The app starts: every "until Signoff quits" grant of another session ends (an app that
    quit without ending its own). The number ended."""
    return _end_where(store, "app_session IS NOT ?", session, by, "the app started again")


def end_app_session(store: Store, session: str, *, by: str = "signoff app") -> int:
    """The app quits: its "until Signoff quits" grants end. The number ended."""
    return _end_where(store, "app_session = ?", session, by, "the app quit")


def _end_where(store: Store, clause: str, session: str, by: str, why: str) -> int:
    at = utc_now()
    with store.transaction() as tx:
        rows = tx.conn.execute(
            f"{_SELECT} WHERE g.scope = 'app' AND g.revoked_at IS NULL AND g.{clause}",
            (session,),
        ).fetchall()
        for row in rows:
            _end(tx, _grant(row), by, at, why)
    return len(rows)


def _end(tx: Transaction, grant: Grant, by: str, at: str, why: str) -> None:
    tx.execute("UPDATE grants SET revoked_at = ?, revoked_by = ? WHERE id = ?", (at, by, grant.id))
    tx.append_event(kind="grant.revoked", payload={"grant": grant.id, "by": by, "why": why},
                    at=at, run_id=grant.run_id, step=grant.step)  # fmt: skip


def used_by(conn: sqlite3.Connection, run_ids: list[str]) -> dict[str, str]:
    """The grant each of these runs ran under, from its recorded evaluation (for listings)."""
    if not run_ids:
        return {}
    found: dict[str, str] = {}
    rows = conn.execute(
        "SELECT run_id, payload FROM events WHERE kind = 'step.policy' AND run_id IN"
        " (SELECT value FROM json_each(?))",
        (canonical.dumps_text(list(run_ids)),),
    )
    for run_id, text in rows:
        try:
            decision = canonical.loads(text)
        except JSONRefused:
            continue
        if isinstance(decision, dict) and isinstance(decision.get("decision"), dict):
            grant = decision["decision"].get("grant")  # type: ignore[union-attr]
            if isinstance(grant, str) and grant:
                found[str(run_id)] = grant
    return found


async def live(
    store: Store,
    operator: operator_key.OperatorKey,
    call_hash: str,
    now: str | None = None,
    *,
    host: str,
    anchor: Anchor | None = None,
) -> tuple[Grant | None, list[str]]:
    """The grant this call of ``host`` (its id, core/proxy/host_identity.py) may run under now
    (rules 5 and 8), and why each row that claimed to cover it does not. The keyring is read
    off the event loop, and only when a row claims a grant."""
    import asyncio  # here: the commands that decide (and load this module) use no event loop

    now = now or utc_now()
    with store.snapshot() as conn:
        found = candidates(conn, call_hash, now)
    if not found:
        return None, []
    if anchor is not None:
        from core.anchor import first_event, holds_since
        from core.heads import kept_head

        # Read from the keyring itself, not the head this process last kept: the end was kept
        # by another process (rule 6). The keyring on a thread of its own, the database here.
        try:
            kept, _ = await asyncio.to_thread(
                kept_head, anchor.heads, store.path, store.database_id
            )
            if kept is not None:  # the chain from the first grant made on holds the kept head
                since = min(first_event(store, g.run_id, g.step, "grant.made") for g in found)
                holds_since(store, kept, since)
        except HeadUnavailable as e:
            return None, [f"the chain's head cannot be read from the keyring: {e} [NotAnchored]"]
        except DatabaseRestored as e:
            return None, [f"{e} [{type(e).__name__}]"]
    try:
        await asyncio.to_thread(operator.keys.keyring)  # chosen off the loop; then kept
        with store.snapshot() as conn:
            changed = operator_key.keyring_problem(conn, operator.keys)
        if changed:  # the same as for a one-time approval (core/operator_key.py rule 6)
            return None, [f"{changed} [KeyringChanged]"]
        key = await asyncio.to_thread(operator.key_or_none, store.database_id)
        keeps = key is not None or await asyncio.to_thread(operator.keeps_keys)
    except OperatorKeyUnavailable as e:
        return None, [str(e)]
    refused: list[str] = []
    with store.snapshot() as conn:
        unsigned = not keeps and operator_key.unsigned_mode(conn)
        for grant in found:
            why = authentic(conn, store.database_id, key, grant, call_hash, host, now,
                            unsigned=unsigned)  # fmt: skip
            if why is None:
                return grant, refused
            refused.append(why)
    return None, refused
