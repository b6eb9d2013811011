"""Re-checking a run: would this policy decide the same as the recorded evaluations did?

Rules:

1. Every evaluation is recorded in a ``step.policy`` event with the exact canonical request
   the policy was handed, its decision, and the policy's identity when it has one.
2. A re-check hands the same request, rebuilt from the record, to the given policy and reports
   every step where the outcome or the approval's kind differs (the wording of a reason aside).
3. It proves the policy's answer, not the tool's behaviour, and trusts what it reads: verify the
   chain first. A policy that reads outside state (a clock, a file) cannot be re-checked exactly.
4. The proxy's duplicate rule (decision 0012) and the rule for Signoff's own files (decision
   0028) are not re-checked: one reads the history, the other the file system (where symbolic
   links point now). A recorded ``duplicate`` or ``own_files`` approval stands for whatever the
   policy behind it answered short of deny or abort, so it differs only when the policy would
   now deny or abort. The identity recorded (the policy's, wrapped by the proxy's rules or by
   ``OwnFilesRule``) is reported as the policy's own when it is the given policy's, wrapped.
5. A policy with a clock of its own (``at``, core/policy/policy.py rule 7: a rule's expiry) is asked
   as of the time the evaluation was recorded: an expired rule did decide before it expired.
6. A run allowed under a standing grant (core/grants.py: an allow of kind ``grant``) was decided
   by the operator, not the policy: it stands for the policy's allow or approve behind it, so it
   differs only when the policy would now deny or abort.
7. Rules on arguments read a relative path against the folder the evaluation recorded
   (``PolicyDecision.cwd``, core/policy/meaning.py), and symbolic links as they lead now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core import canonical
from core.errors import JSONRefused, NotRecheckable, UnknownRun
from core.grants import GRANT_KIND
from core.policy.meaning import Where
from core.policy.policy import (
    DUPLICATE_KIND,
    OWN_FILES_KIND,
    Outcome,
    Policy,
    PolicyDecision,
    PolicyRequest,
    behind_duplicate_rule,
    identity_of,
)
from core.store import Store


@dataclass(frozen=True)
class Difference:
    run_id: str
    step: int
    then: PolicyDecision
    now: PolicyDecision
    then_policy: str | None
    now_policy: str | None


@dataclass(frozen=True)
class Recheck:
    run_id: str
    evaluations: int
    differences: tuple[Difference, ...]


def recheck(store: Store, run_id: str, policy: Policy) -> Recheck:
    with store.snapshot() as conn:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise UnknownRun(f"there is no run {run_id}")
        rows = conn.execute(
            "SELECT seq, step_idx, payload, at FROM events"
            " WHERE run_id = ? AND kind = 'step.policy'"
            " ORDER BY seq",
            (run_id,),
        ).fetchall()
    # Here, not at the top: core imports this module with the package (core/__init__.py).
    from core.policy.own_files import behind_own_files_rule

    now_policy = identity_of(policy)
    wrapped = {behind_own_files_rule(now_policy)}
    if now_policy is not None:
        wrapped.add(behind_duplicate_rule(now_policy))
    differences = []
    at = getattr(policy, "at", None)
    for seq, step, payload_text, when in rows:
        try:
            payload = canonical.loads(payload_text)
        except JSONRefused as e:
            raise NotRecheckable(f"event {seq} cannot be read: {e}") from None
        if not isinstance(payload, dict) or not {"request", "decision", "policy"} <= set(payload):
            raise NotRecheckable(f"event {seq} does not record an evaluation")
        then = PolicyDecision.from_json(payload["decision"])
        request = PolicyRequest(canonical.dumps_text(payload["request"]))
        asked = policy if at is None else at(_time(seq, when))
        if then.cwd and hasattr(asked, "reading_from"):  # rule 7
            asked = asked.reading_from(Where(then.cwd))
        now = asked.evaluate(request)
        if not _same(then, now):
            then_policy = payload["policy"] if isinstance(payload["policy"], str) else None
            if then_policy is not None and then_policy in wrapped:
                then_policy = now_policy
            differences.append(Difference(run_id, int(step), then, now, then_policy, now_policy))
    return Recheck(run_id, len(rows), tuple(differences))


def _time(seq: int, text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise NotRecheckable(f"event {seq} has no time that can be read: {text!r}") from None


def _same(then: PolicyDecision, now: PolicyDecision) -> bool:
    operators = (then.outcome is Outcome.ALLOW and then.kind == GRANT_KIND) or (
        then.outcome is Outcome.APPROVE and then.kind in (DUPLICATE_KIND, OWN_FILES_KIND)
    )
    if operators:
        # The proxy's rule answered, over the policy's allow or approve.
        return now.outcome in (Outcome.ALLOW, Outcome.APPROVE)
    return now.same_as(then)
