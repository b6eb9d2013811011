"""Signoff's error family.

Every error a person may see is a ``SignoffError`` whose message is written for the operator:
what went wrong, where, and what to do about it. Each is named for what went wrong, so code
(and tests) match on the type, never on the text. Security checks raise; none returns a bool.
"""

from __future__ import annotations


class SignoffError(Exception):
    """Base of every error Signoff raises on purpose."""


# --- JSON that will be hashed -------------------------------------------------------------


class JSONRefused(SignoffError, ValueError):
    """JSON that cannot be hashed without losing something; refused rather than approximated."""


class MalformedJSON(JSONRefused):
    """The text is not JSON at all."""


class InvalidUTF8(JSONRefused):
    """The bytes are not valid UTF-8."""


class DuplicateKey(JSONRefused):
    """An object names the same key twice; readers disagree on which value wins."""


class IntegerOutOfRange(JSONRefused):
    """An integer outside ±(2^53-1) would change value in any IEEE-754 reader."""


class NonFiniteNumber(JSONRefused):
    """NaN or an infinity: not JSON, and has no canonical form."""


class ImpreciseNumber(JSONRefused):
    """A number that would be written back as a different number (precision beyond a double)."""


class LoneSurrogate(JSONRefused):
    """A string holds half of a UTF-16 surrogate pair, which has no UTF-8 form."""


class NotJSON(JSONRefused):
    """A Python value with no JSON form (a set, bytes, an object, a non-string key)."""


class NestedTooDeeply(MalformedJSON):
    """JSON nested deeper than Signoff reads; refused rather than exhausting the stack."""


class HostLineTooLong(JSONRefused):
    """A line from the host longer than the proxy reads; refused whole, never cut."""


# --- The store ----------------------------------------------------------------------------


class StoreError(SignoffError):
    """The database cannot be used as it is."""


class DatabaseMissing(StoreError):
    """There is no database where one was expected."""


class UnsafePermissions(StoreError):
    """The database file or its directory can be written by someone other than the owner.

    An approval's hash has no secret in it: whoever can write the file can forge one.
    """


class UnexpectedSchemaObject(StoreError):
    """The database carries a trigger or a view, which could rewrite what Signoff writes."""


class NotASignoffDatabase(StoreError):
    """The file is not a Signoff database (not SQLite, or someone else's tables)."""


class SchemaTooNew(StoreError):
    """The database was written by a newer Signoff whose schema this one does not know."""


class StoreBusy(StoreError):
    """Another process held the database's write lock for longer than the busy timeout."""


class StoreFull(StoreError):
    """The disk (or the database's size limit) is full; the transaction was rolled back."""


# --- The chain ----------------------------------------------------------------------------


class ChainBroken(SignoffError):
    """The audit chain does not verify. ``seq`` is the first event found wrong."""

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class EventAltered(ChainBroken):
    """An event's stored hash does not match its fields: the event, or one before it, changed."""


class EventMissing(ChainBroken):
    """The sequence skips a number: one or more events were deleted."""


class LogTruncated(ChainBroken):
    """The log ends before the witnessed head: events were deleted or an older copy restored."""


class HeadMismatch(ChainBroken):
    """The event at the witnessed head's sequence has another hash: history was rewritten."""


class DatabaseReplaced(ChainBroken):
    """The database at this place is not the one whose head was witnessed."""


class StateDisagrees(SignoffError):
    """A state table says what no event says: a run, step or approval row edited, added or
    removed behind the chain, or a decision row with no authenticated decision event.
    ``row`` names the first such row."""

    def __init__(self, message: str, *, row: str) -> None:
        super().__init__(message)
        self.row = row


class HeadUnavailable(SignoffError):
    """The head store (the OS keyring) cannot be reached; the chain is not anchored."""


class LockTimeout(SignoffError):
    """A lock beside the database stayed held by another process past its deadline."""


class LockRefused(SignoffError):
    """What stands at a lock's path is not a regular file of the user's (a folder, a link, a
    FIFO, another user's file): it is never waited on, and never taken as the lock. The message
    says what is there and what to do."""


# --- Tools, configuration, policy ----------------------------------------------------------


class SchemaRefused(SignoffError):
    """A tool's input schema is refused: not a schema, not exact JSON, or it refers outside."""


class ConfigError(SignoffError):
    """The configuration has an unknown key or a bad value; the message names where."""


class ConfigChangedOutside(ConfigError):
    """config.toml differs from the configuration Signoff recorded (a hand edit, an agent's
    write, a restored copy): it is not taken up, and Signoff does not edit it, until the operator
    accepts it or restores the recorded one (``signoff settings accept|restore``)."""


class ConfigUnrecorded(ConfigError):
    """The database holds no configuration authenticated by its operator key that could be
    trusted or restored."""


class ClassificationRefused(ConfigError):
    """A classification of one or more tools is refused whole: ``problems`` lists each entry
    that cannot be taken, and nothing was written."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class TTLRefused(ConfigError):
    """A time-to-live that cannot work: a lease TTL of zero or less, or not finite (a lease
    that lapses as it is taken, a heartbeat that never sleeps, or a dead process that blocks its
    run for ever), or a grant TTL of zero (every approval would lapse as it is granted)."""


class RuleRefused(ConfigError):
    """A rule on a tool's arguments is refused whole (core/policy/rules.py): the configuration
    is left as it was."""


class RuleConditionInvalid(RuleRefused):
    """A rule's condition is not a self-contained JSON Schema object that compiles (or a
    shorthand, such as a folder that is not absolute, cannot be made into one)."""


class RuleIdMismatch(RuleRefused):
    """A rule's id is not the one its server, tool, effect, condition and expiry make: it was
    changed by hand, and "allowed by rule R" would name something else (core/policy/rules.py
    rule 8)."""


class RuleExpiryInvalid(RuleRefused):
    """A rule's expiry cannot be read as a duration or a time, or is not in the future."""


class RuleTargetUnknown(RuleRefused):
    """A rule names a server that is not configured, or a tool of it that was never pinned."""


class RuleNeedsConfirmation(RuleRefused):
    """An allow rule on a destructive tool needs the operator's explicit second confirmation."""


class UnknownRule(RuleRefused):
    """No rule in the configuration has this id."""


class NotRecheckable(SignoffError):
    """A recorded evaluation cannot be rebuilt from the record, so it cannot be re-checked."""


class PriceRefused(ConfigError, ValueError):
    """A price in the operator's configuration is not an exact, non-negative amount per million
    tokens (a float, a negative or non-finite number, an unknown field), or a limit on tokens or
    cost is not one. Nothing is configured from it."""


class UnknownPrice(ConfigError):
    """No price is configured for this provider and model: the call is refused before anything
    is sent or charged (a cost is never guessed, nor taken as zero)."""


# --- The gate ------------------------------------------------------------------------------


class GateError(SignoffError):
    """A gate call was refused; nothing was changed."""


class UnknownRun(GateError):
    """No run has this id."""


class RunExists(GateError):
    """A run with this id already exists; ``begin`` starts new runs only."""


class RunStateError(GateError):
    """The call does not fit the run's or the session's state (misuse, or the session is over)."""


class SessionClosed(GateError):
    """The session was closed, or a call on it failed; open a new one with ``attach``."""


class RunLeased(GateError):
    """Another live session (in this or another process) holds the run's lease."""


class LeaseLost(GateError):
    """This session no longer holds the run's lease; it refuses every further call."""


class PolicyFailed(GateError):
    """The policy raised, or answered something that is not a decision. The gate records the
    decision it was asked about and the failure (``exception``: the type's name), ends the run
    as ``policy_error`` and runs nothing."""

    def __init__(self, message: str, *, exception: str) -> None:
        super().__init__(message)
        self.exception = exception


class ApprovalError(GateError):
    """An approval cannot be decided or used as asked."""


class UnknownApproval(ApprovalError):
    """No approval of this run has this id."""


class ApprovalNotPending(ApprovalError):
    """The approval was already decided."""


class ApprovalMismatch(ApprovalError):
    """The request recorded for the approval no longer hashes to what was approved."""


class ApprovalExpired(ApprovalError):
    """The grant outlived its TTL before it was executed; the run was cancelled."""


class GrantUsed(RunStateError):
    """The chain says this grant was already used (its tool started) or closed: a grant runs
    once, whatever the tables say. Another session ran it, or the tables were set back."""


class DecisionUnauthenticated(ApprovalError):
    """The record says approved, but no ``approval.decided`` event authenticated with the
    operator key says so for this approval and this request: nobody gave it. Nothing runs."""


class ScopeRefused(ApprovalError):
    """A request cannot be allowed for a while as asked: an unknown scope, "until Signoff
    quits" with no app session, or a request the operator is asked about for what it may
    already have done (interrupted, a duplicate, Signoff's own files). Nothing was decided."""


class UnknownGrant(ApprovalError):
    """No standing grant has this id, or it has already ended."""


class OperatorKeyUnavailable(ApprovalError):
    """The operator key cannot be read from the OS keyring (none there, locked, failing), so a
    decision can be neither signed nor checked. Nothing runs; the request keeps waiting."""


class KeyringLockRefused(OperatorKeyUnavailable):
    """The lock every keyring call of Signoff's is made under (``~/.cache/signoff/
    secret-service.lock``) is not Signoff's lock file: no keyring call is made until it is
    removed (decision 0067). Nothing runs; the request keeps waiting."""


class KeyringChanged(OperatorKeyUnavailable):
    """This process reaches the operator key through another keyring than the one the chain
    records for this database: nothing approved runs, and no decision is signed, until the
    operator confirms the change (``signoff decisions keyring accept``, decision 0066)."""


class KeyringUnreachable(OperatorKeyUnavailable):
    """No OS keyring can be reached ("cannot reach the OS keyring: no session bus", "...: the
    Secret Service does not answer", "...: the keyring is locked"): never "it holds no key".
    Nothing runs; the tray shows which proxy, started by which host (decision 0069)."""


class NoKeyringAnswers(KeyringUnreachable):
    """No OS keyring answered at all (no session bus, no Secret Service on it): the only
    unreachable keyring that unauthenticated mode, the operator's choice, takes for a machine
    with no keyring (core/operator_key.py rule 4). A locked keyring never is."""


class SessionBusRefused(SignoffError):
    """The session bus address the app left is not used: the file is not the user's own private
    file, or the address is not a socket of the user's that no other user can replace
    (core/session_bus.py rule 3)."""


class DatabaseRestored(GateError):
    """The database no longer holds the head anchored before an approved side effect: it was
    restored from an older copy, or rewritten. Nothing runs until the operator looks."""


class DatabaseUnconfirmed(DatabaseRestored):
    """Another database than the one anchored at this place lies there now (core/heads.py rule
    2): nothing approved runs until the operator confirms it (``signoff anchor accept``).
    ``anchored_seq`` is the sequence kept for the database anchored there."""

    def __init__(self, message: str, *, anchored_seq: int) -> None:
        super().__init__(message)
        self.anchored_seq = anchored_seq


class NotAnchored(GateError):
    """The head could not be anchored outside the database before an approved side effect
    (the keyring failed, or another anchoring held the lock too long). Nothing ran."""


class ModelLimitReached(GateError):
    """A model call's projection (tokens spent + the prompt's tokens + the most it may answer,
    and their cost) would pass the run's token or cost limit: nothing was sent, the refusal is
    recorded, and the run ended ``FAILED`` with ``reason`` (``limit_tokens``, ``limit_cost``)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ModelUsageRefused(GateError):
    """A model call or its answer was described wrongly (no provider or model, a count that is
    not a non-negative integer, an answer with neither its text nor its output tokens, an
    attempt answered twice): nothing was recorded from it."""


# --- The proxy's upstream servers ----------------------------------------------------------


class UpstreamError(SignoffError):
    """An upstream MCP server could not be used as asked."""


class UpstreamStartFailed(UpstreamError):
    """The server's command could not be started, or it did not complete the handshake."""


class UpstreamGone(UpstreamError):
    """The server exited or closed its output."""


class UpstreamNotDelivered(UpstreamGone):
    """The server was gone before a request reached it: the request was never made."""


class UpstreamTimeout(UpstreamError):
    """The server did not answer within the time allowed."""


class UpstreamCancelled(UpstreamError):
    """The host cancelled a call in flight; the server was told, and sent no answer within the
    grace period: the server may have acted on it."""


class UpstreamProtocolError(UpstreamError):
    """The server sent something that is not the MCP it claims to speak."""


class UpstreamAnswerUnreadable(UpstreamProtocolError):
    """A request reached the server, and what came back cannot be read as its answer (a line
    over the size limit, a result that is not an object): the server may have acted on it."""


class UpstreamAnswerTooLarge(UpstreamAnswerUnreadable):
    """The server answered a request with a line longer than Signoff reads: it answered, so it
    acted on the request, and its answer (``size`` bytes) is dropped unread."""

    def __init__(self, message: str, size: int = 0) -> None:
        super().__init__(message)
        self.size = size


class UpstreamAnswerInexact(UpstreamAnswerUnreadable):
    """The server answered with JSON Signoff's parser refuses (a key twice, an integer beyond
    2^53, invalid UTF-8): it acted on the request, and its answer cannot be passed on exactly."""


class UpstreamRefused(UpstreamProtocolError):
    """The server answered a request with a JSON-RPC error, kept whole in ``error`` (its code,
    message and data as sent) so that the host can be given exactly that error."""

    def __init__(self, message: str, error: dict[str, object]) -> None:
        super().__init__(message)
        self.error = error


class ListingRefused(UpstreamError):
    """The server's tool listing is refused whole: a name twice, or past the bounds."""


# --- Remote servers over Streamable HTTP (core/proxy/remote.py, core/proxy/http_upstream.py) --


class RemoteConfigRefused(ConfigError):
    """A remote server's URL or header is refused (plain http beyond this computer, a header
    Signoff sets itself, a secret written into the file): config.toml is left as it was."""


class RemoteSecretMissing(UpstreamStartFailed):
    """A header names an environment variable or a keyring secret that is not there (or holds
    what no header may carry): the server is not contacted. The message names it, never a
    value."""


class UpstreamTokenRefused(UpstreamError):
    """The remote server answered HTTP 401 or 403: the credentials its headers carry were
    refused, and the request was not run. The token itself is never shown."""


class UpstreamUnreachable(UpstreamNotDelivered):
    """The remote server could not be reached (connection refused, no such host, TLS failed):
    no request was made."""


class UpstreamNotMCP(UpstreamGone):
    """The remote server's HTTP answer is not MCP (a web page, a redirect, a status with no
    JSON-RPC answer): whether a call it so answered ran is not known."""


class UpstreamSessionExpired(UpstreamNotDelivered):
    """The remote server no longer knows Signoff's session (HTTP 404 with a session id): the
    request was not run, and the server is greeted anew before the next one."""


class PromptUnavailable(SignoffError):
    """A prompt the host asked for is not offered now: no server offering prompts lists it, or
    it is not pinned (core/proxy/resources.py rule 3). Its get is refused before the gate, and
    nothing reaches the server."""


class PromptChanged(PromptUnavailable):
    """The prompt as its server lists it now is not the one pinned (its bytes changed since the
    operator pinned it, or since the host's listing showed it): its get is refused, nothing
    reaches the server, until the operator pins it again (``signoff pin NAME``)."""


class SamplingRefused(SignoffError):
    """A server asked the host's model (sampling) and may not: the operator has not allowed it
    for this server, or the host offers none. The host never saw the request."""


class ToolFailed(SignoffError):
    """Raised by a tool whose failure carries a JSON ``detail`` worth recording with it (a
    server's JSON-RPC error, kept whole so that a re-call can hand back the same)."""

    def __init__(self, message: str, detail: object) -> None:
        super().__init__(message)
        self.detail = detail


class OutcomeUnknown(SignoffError):
    """Raised by a tool that cannot tell whether its call took effect (cut off, timed out).

    For a tool that is neither read-only nor idempotent, the gate then pauses the run on an
    ``interrupted_side_effect`` approval instead of recording a failure that invites a retry.
    """


class TelemetryFailed(SignoffError):
    """The OTLP endpoint did not take the spans (unreachable, or it answered an error). The
    record is untouched: telemetry is a copy (core/telemetry.py)."""
