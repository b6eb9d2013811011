"""The database schema, as numbered migrations recorded in the database itself.

Each migration runs in one write transaction that also records it in ``migrations`` and sets
``PRAGMA user_version``, so a database is always at exactly one known version. A database at
a version this code does not know (written by a newer Signoff) is refused, never downgraded.

Tables are STRICT, so a value of the wrong type is refused by SQLite rather than stored.
State tables (runs, steps, approvals, tool_specs, model_calls) are the truth; ``events`` is the
audit log, appended in the transaction of the change it explains and never read for control flow.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


_INITIAL = (
    """CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) STRICT""",
    """CREATE TABLE migrations (
        version    INTEGER PRIMARY KEY,
        name       TEXT NOT NULL,
        applied_at TEXT NOT NULL
    ) STRICT""",
    # A tool as it was when a decision used it, stored once, by the hash of its canonical spec.
    """CREATE TABLE tool_specs (
        hash       TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        spec       TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT""",
    # One run: a goal pursued in steps. The lease (owner, expiry by the wall clock, in unix
    # seconds) lives on the row: a run RUNNING is leased to the process executing it.
    """CREATE TABLE runs (
        id                   TEXT PRIMARY KEY,
        goal                 TEXT NOT NULL,
        status               TEXT NOT NULL CHECK (status IN
                               ('RUNNING', 'WAITING_FOR_APPROVAL',
                                'COMPLETED', 'FAILED', 'CANCELLED')),
        end_reason           TEXT,
        result               TEXT,
        limits               TEXT NOT NULL,
        step_count           INTEGER NOT NULL DEFAULT 0,
        consecutive_failures INTEGER NOT NULL DEFAULT 0,
        active_seconds       REAL NOT NULL DEFAULT 0,
        lease_owner          TEXT,
        lease_expires_at     REAL,
        created_at           TEXT NOT NULL,
        updated_at           TEXT NOT NULL
    ) STRICT""",
    "CREATE INDEX runs_by_status ON runs (status, created_at)",
    # One step of a run: the decision as proposed (verbatim, recorded before validation), the
    # canonical request it became, and what came of it.
    """CREATE TABLE steps (
        run_id         TEXT NOT NULL REFERENCES runs (id),
        idx            INTEGER NOT NULL CHECK (idx >= 0),
        status         TEXT NOT NULL CHECK (status IN
                         ('deciding', 'pending', 'executing', 'done', 'failed',
                          'denied', 'interrupted')),
        decision       TEXT,
        origin         TEXT,
        tool_name      TEXT,
        tool_spec_hash TEXT REFERENCES tool_specs (hash),
        arguments      TEXT,
        request_hash   TEXT,
        observation    TEXT,
        started_at     TEXT NOT NULL,
        ended_at       TEXT,
        PRIMARY KEY (run_id, idx)
    ) STRICT""",
    # A request waiting on the operator, bound by SHA-256 to the exact canonical request.
    """CREATE TABLE approvals (
        id             TEXT PRIMARY KEY,
        run_id         TEXT NOT NULL,
        step_idx       INTEGER NOT NULL,
        kind           TEXT NOT NULL,
        request        TEXT NOT NULL,
        request_hash   TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN
                         ('pending', 'approved', 'rejected', 'expired', 'consumed',
                          'superseded')),
        policy_reason  TEXT,
        created_at     TEXT NOT NULL,
        decided_by     TEXT,
        decided_reason TEXT,
        decided_at     TEXT,
        FOREIGN KEY (run_id, step_idx) REFERENCES steps (run_id, idx)
    ) STRICT""",
    "CREATE INDEX approvals_by_status ON approvals (status, created_at)",
    "CREATE INDEX approvals_by_run ON approvals (run_id, step_idx)",
    # The audit chain: one sequence across all runs; see core/chain.py for the hash.
    """CREATE TABLE events (
        seq      INTEGER PRIMARY KEY CHECK (seq >= 1),
        run_id   TEXT REFERENCES runs (id),
        step_idx INTEGER,
        kind     TEXT NOT NULL,
        payload  TEXT NOT NULL,
        at       TEXT NOT NULL,
        hash     TEXT NOT NULL
    ) STRICT""",
    "CREATE INDEX events_by_run ON events (run_id, seq)",
)

# The proxy's runs: which server and tool each call was for, the call key that finds the run a
# re-call belongs to (and duplicates), and when its outcome was handed back to a host.
_PROXY_CALLS = (
    "ALTER TABLE runs ADD COLUMN server TEXT",
    "ALTER TABLE runs ADD COLUMN tool TEXT",
    "ALTER TABLE runs ADD COLUMN call_key TEXT",
    "ALTER TABLE runs ADD COLUMN collected_at TEXT",
    "CREATE INDEX runs_by_call_key ON runs (call_key, created_at)",
)

# The host a proxy call was made by (core/proxy/host_identity.py): a re-call finds only its own
# host's runs; ``call_key`` stays the same for every host, so that duplicates are found across
# hosts. NULL for runs made before hosts were recorded, and for library runs.
_HOSTS = ("ALTER TABLE runs ADD COLUMN host TEXT",)

# The whole of a proxy call's large result while a re-call of its host may still collect it
# (core/kept_results.py, decision 0029): the chain records its hash, never its bytes, so
# a row here is a copy, checked against that hash when read, and deleted once handed back.
_RESULTS = (
    """CREATE TABLE result_blobs (
        run_id     TEXT PRIMARY KEY REFERENCES runs (id),
        sha256     TEXT NOT NULL,
        data       BLOB NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT""",
)

# Standing grants (core/grants.py, decision 0050): "allow this exact request for a while",
# made by the operator's signed decision. The row is a view for queries; the ``grant.made``
# event (signed) and ``grant.revoked`` in the chain are the authority.
_GRANTS = (
    """CREATE TABLE grants (
        id          TEXT PRIMARY KEY,
        approval_id TEXT NOT NULL,
        run_id      TEXT NOT NULL REFERENCES runs (id),
        step_idx    INTEGER NOT NULL,
        call_hash   TEXT NOT NULL,
        server      TEXT,
        tool        TEXT NOT NULL,
        scope       TEXT NOT NULL,
        until       TEXT NOT NULL,
        app_session TEXT,
        decided_by  TEXT NOT NULL,
        decided_at  TEXT NOT NULL,
        reason      TEXT NOT NULL,
        revoked_at  TEXT,
        revoked_by  TEXT
    ) STRICT""",
    "CREATE INDEX grants_by_call ON grants (call_hash, until)",
)

# Model calls (core/model_calls.py, decision 0060): one row per attempt, written before anything
# is sent and with its events, like a step. Amounts are exact decimal texts, never floats. An
# attempt not answered (``started``, ``lost``) is charged at its projection.
_MODEL_CALLS = (
    """CREATE TABLE model_calls (
        run_id            TEXT NOT NULL REFERENCES runs (id),
        attempt           INTEGER NOT NULL CHECK (attempt >= 1),
        step_idx          INTEGER NOT NULL,
        provider          TEXT NOT NULL,
        model             TEXT NOT NULL,
        status            TEXT NOT NULL CHECK (status IN
                            ('started', 'answered', 'lost', 'refused')),
        prompt_tokens     INTEGER NOT NULL,
        max_output_tokens INTEGER NOT NULL,
        projected_tokens  INTEGER NOT NULL,
        projected_cost    TEXT NOT NULL,
        tokens_in         INTEGER,
        tokens_out        INTEGER,
        cost              TEXT,
        usage             TEXT CHECK (usage IN ('reported', 'counted', 'partly counted')),
        detail            TEXT,
        started_at        TEXT NOT NULL,
        ended_at          TEXT,
        PRIMARY KEY (run_id, attempt),
        FOREIGN KEY (run_id, step_idx) REFERENCES steps (run_id, idx)
    ) STRICT""",
)
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial", _INITIAL),
    Migration(2, "proxy calls", _PROXY_CALLS),
    Migration(3, "hosts", _HOSTS),
    Migration(4, "result blobs", _RESULTS),
    Migration(5, "grants", _GRANTS),
    Migration(6, "model calls", _MODEL_CALLS),
)

LATEST = MIGRATIONS[-1].version
