"""Re-checking a run: would this policy decide the same as the recorded evaluations did?

Rules:

1. Every evaluation is recorded in a ``step.policy`` event with the exact canonical request
   the policy was handed, its decision, and the policy's identity when it has one.
2. A re-check hands the same request, rebuilt from the record, to the given policy and reports
   every step where the outcome or the approval's kind differs (the wording of a reason aside).
3. It proves the policy's answer, not the tool's behaviour, and trusts what it reads: verify the
   chain first. A policy that reads outside state (a clock, a file) cannot be re-checked exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from core import canonical
from core.errors import JSONRefused, NotRecheckable, UnknownRun
from core.policy import Policy, PolicyDecision, PolicyRequest, identity_of
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
            "SELECT seq, step_idx, payload FROM events WHERE run_id = ? AND kind = 'step.policy'"
            " ORDER BY seq",
            (run_id,),
        ).fetchall()
    differences = []
    for seq, step, payload_text in rows:
        try:
            payload = canonical.loads(payload_text)
        except JSONRefused as e:
            raise NotRecheckable(f"event {seq} cannot be read: {e}") from None
        if not isinstance(payload, dict) or not {"request", "decision", "policy"} <= set(payload):
            raise NotRecheckable(f"event {seq} does not record an evaluation")
        then = PolicyDecision.from_json(payload["decision"])
        request = PolicyRequest(canonical.dumps_text(payload["request"]))
        now = policy.evaluate(request)
        if not now.same_as(then):
            then_policy = payload["policy"]
            differences.append(
                Difference(
                    run_id,
                    int(step),
                    then,
                    now,
                    then_policy if isinstance(then_policy, str) else None,
                    identity_of(policy),
                )
            )
    return Recheck(run_id, len(rows), tuple(differences))
