"""The proxy's rules in front of the operator's policy, which neither can loosen: a deny or an
abort stands (core/proxy/server.py rule 2).

Rules:

1. A request naming Signoff's own files waits for the operator (``own_files``,
   core/policy/own_files.py), whatever the policy allowed.
2. An identical mutating call that may have taken effect within the window waits for the
   operator (``duplicate``).
3. A call the operator allowed for a while (a standing grant, core/grants.py) runs without
   asking, recorded as allowed under that grant, where the policy or the duplicate rule would
   have asked; not when an identical call may have run with its outcome unknown (it still
   asks), never over the own-files rule, a deny or an abort.
4. Each decision that is not an allow says what the request's paths and URLs mean where that
   is not how they are written (``PolicyDecision.read``, core/policy/meaning.py rule 8): the
   prompt and History show both, and such a request is never approved from a notification
   alone. An allowed call is shown to nobody, so its links are not read.

The per-call flags (``duplicate_of``, ``grant``, ``may_have_run``) are set by the proxy for one
proposal; proposals are synchronous, so no other call can see them.
"""

from __future__ import annotations

from typing import Any

from core.grants import GRANT_KIND, Grant
from core.policy import meaning
from core.policy.own_files import OwnFiles
from core.policy.own_files import apply as apply_own_files
from core.policy.policy import (
    OWN_FILES_KIND,
    ConfigPolicy,
    Outcome,
    PolicyDecision,
    PolicyRequest,
    behind_duplicate_rule,
)
from core.tools import SideEffect


class ProxyRules:
    """The proxy's rules before the operator's policy, which neither can loosen: a deny or an
    abort stands. A request naming Signoff's own files waits for the operator (``own_files``,
    core/policy/own_files.py); an identical mutating call that completed within the window waits for
    the operator (``duplicate``). The duplicate flag is set per proposal by the proxy;
    proposals are synchronous, so no other call can see it."""

    def __init__(
        self,
        inner: ConfigPolicy,
        own_files: OwnFiles | None = None,
        where: meaning.Where | None = None,
    ) -> None:
        self.inner = inner
        self.own_files = own_files
        self.where = where if where is not None else meaning.Where(None)  # the servers' folder
        self.duplicate_of: str | None = None
        # Set per proposal too: the operator's standing grant for this exact call, and
        # whether an identical call may have run with its outcome unknown (it still asks).
        self.grant: Grant | None = None
        self.may_have_run = False

    def evaluate(self, request: PolicyRequest) -> PolicyDecision:
        value = request.value()  # once, for all
        decision = self._decide(request, value)
        if decision.outcome is Outcome.ALLOW:  # nobody is shown it: no links read (rule 4)
            return decision
        # What each path or URL means where the spelling says otherwise (rule 4).
        where = self.where
        if isinstance(self.inner, ConfigPolicy):  # a remote server's values: read as text
            where = self.inner.where_for(value["tool"]) if self.inner.elsewhere else where
        return decision.reading(meaning.shown(value["arguments"], where))

    def _decide(self, request: PolicyRequest, value: dict[str, Any]) -> PolicyDecision:
        decision = self.inner.evaluate(request)
        if self.own_files is not None:
            decision = apply_own_files(
                self.own_files, decision, value["arguments"],
                mutating=SideEffect(value["side_effect"]) is not SideEffect.READ_ONLY,
            )  # fmt: skip
        if decision.kind == OWN_FILES_KIND:  # says what it touches: the stronger word
            return decision
        if self.duplicate_of is not None and decision.outcome in (Outcome.ALLOW, Outcome.APPROVE):
            decision = PolicyDecision(
                Outcome.APPROVE, f"the same call ran at {self.duplicate_of}", kind="duplicate",
                read=decision.read,
            )  # fmt: skip
        grant = self.grant
        if decision.outcome is Outcome.APPROVE and grant is not None and not self.may_have_run:
            return PolicyDecision(Outcome.ALLOW, grant.sentence(), GRANT_KIND, grant=grant.id)
        return decision

    def identity(self) -> str:
        # The policy's own, wrapped as it was before the own-files rule: a re-check of older
        # records still names the policy behind (core/recheck.py rule 4).
        return behind_duplicate_rule(self.inner.identity())
