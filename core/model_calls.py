"""A step's accounting model caller: a loop that calls a model records each call through it,
held to the run's token and cost limits. No provider SDK is involved: the loop calls its
provider itself and passes on what it returned.

    attempt = step.model().begin("anthropic", "claude", prompt=text, max_output_tokens=512)
    reply = my_provider(text)                  # the loop's own call
    attempt.answered(response_text=reply.text, tokens_in=reply.usage_in, tokens_out=None)

Rules:

1. ``OpenStep.model()`` is None when the gate has no ``GateConfig.model`` (core/prices.py).
2. ``begin`` looks the price up first: an unknown (provider, model) raises ``UnknownPrice`` and
   nothing is recorded or charged. It then projects the call (the prompt's tokens by the
   configured counter + ``max_output_tokens``, and their cost at the price), and in one
   transaction under the run's lease, live by the wall clock, adds the projection to what the
   run spent (core/model_record.py rule 2) and checks the run's limits (core/limits.py rule
   6). A projection past a limit is recorded as refused, the open step fails and the run ends
   ``FAILED`` with ``limit_tokens`` or ``limit_cost``, and ``ModelLimitReached`` is raised:
   the loop must send nothing. Otherwise the attempt is recorded as started, committed, before
   ``begin`` returns: only then may the loop send.
3. ``answered`` records the usage the provider reported; a count it did not report is made by
   the counter (input: the prompt's count; output: the response text's, at most
   ``max_output_tokens``), and the usage is recorded as ``counted`` or ``partly counted``. A
   reported output past ``max_output_tokens`` cannot be believed (seed 000: fail closed) and is
   refused by rule 6: the provider could not have answered more, and a run's limit would be
   passed by an answer the projection held it to. The cost is computed at the attempt's price,
   exactly. ``lost(reason)`` records that no answer will come.
4. An attempt not answered stays charged at its projection: lost, or never ended because the
   process died or the session ended before the answer (the answer is then refused with the
   session's error, and the record keeps the charge). Charging a lost response is the
   conservative choice: it may have cost money.
5. Calls are serialised with the session's other calls, and refused once it is over. The
   caller stays usable after its step ends while the session goes on; its attempts are
   recorded under its step.
6. A bad description of a call or an answer (no provider, a count that is not a non-negative
   integer or is past ``MOST_TOKENS``, no text and no output count, an attempt ended twice)
   raises ``ModelUsageRefused`` or ``RunStateError`` before anything is written; the session
   goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from core import model_record, transitions
from core.canonical import MAX_SAFE_INTEGER
from core.errors import ModelLimitReached, ModelUsageRefused, RunStateError
from core.hold import Hold
from core.limits import Spent, spending_exceeded
from core.model_record import Asked
from core.prices import EXACT, ModelConfig, TokenCounter
from core.store import Transaction, format_time

# The most tokens one count may be: a call's projection (prompt + output) stays an integer the
# record holds exactly (core/canonical.py: at most 2^53 - 1).
MOST_TOKENS = MAX_SAFE_INTEGER // 2


@dataclass(frozen=True)
class Usage:
    """What an answered attempt recorded: tokens, exact cost, and whether they were counted."""

    tokens_in: int
    tokens_out: int
    cost: Decimal
    usage: str  # reported, counted, partly counted


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelUsageRefused(f"{what} must be an integer of 0 or more, not {value!r}")
    if value > MOST_TOKENS:
        raise ModelUsageRefused(f"{what} must be at most {MOST_TOKENS}, not {value}")
    return value


def _counted(counter: TokenCounter, text: str, what: str) -> int:
    return _count(counter.count(text), f"the token counter's count of {what}")


class ModelCaller:
    """The accounting model caller of one step (rules 1 to 6)."""

    def __init__(self, hold: Hold, step: int, config: ModelConfig) -> None:
        self._hold = hold
        self.step = step
        self._config = config

    def begin(
        self, provider: str, model: str, *, prompt: str, max_output_tokens: int
    ) -> ModelAttempt:
        """Record the attempt before the loop sends it, or refuse it (rule 2)."""
        for name, value in (("provider", provider), ("model", model)):
            if not isinstance(value, str) or not value:
                raise ModelUsageRefused(f"a model call must name its {name}, not {value!r}")
        if not isinstance(prompt, str):
            raise ModelUsageRefused(f"the prompt must be text, not {type(prompt).__name__}")
        most = _count(max_output_tokens, "max_output_tokens")
        price = self._config.prices.price(provider, model)  # UnknownPrice: nothing recorded
        asked = Asked(provider, model, _counted(self._config.counter, prompt, "the prompt"),
                      most, price)  # fmt: skip
        s = self._hold
        with s._call():
            now = s._gate.config.clock()
            at = format_time(now)
            with s._write(starts_side_effect=True) as tx:
                used = model_record.spent(tx.conn, s.run_id)
                projected = asked.projected
                after = Spent(used.tokens + projected.tokens, EXACT.add(used.cost, projected.cost))
                reason = spending_exceeded(s._run.limits, after, projected=True)
                attempt = model_record.next_attempt(tx.conn, s.run_id)
                model_record.start(tx, s.run_id, self.step, attempt, asked, refused=reason, at=at)
                if reason is not None:
                    _end_run(s, tx, reason, asked, now, at)
        if reason is not None:
            s._finish("ended")
            raise ModelLimitReached(
                f"a call to {provider}/{model} could bring run {s.run_id} to {after.tokens}"
                f" tokens and {after.cost} in cost, past its limit ({reason}): nothing may be"
                " sent, and the run ended",
                reason=reason,
            )
        return ModelAttempt(self, attempt, asked)


def _end_run(s: Hold, tx: Transaction, reason: str, asked: Asked, now: datetime, at: str) -> None:
    """A projection past a limit: the open step fails, the run ends FAILED (rule 2)."""
    state = s._open
    if state is not None and not state.started:
        transitions.finish_step(
            tx, s.run_id, state.index, status="failed", active_seconds=s._active(now),
            observation={"error": reason, "detail": f"a call to {asked.provider}/{asked.model}"
                         " would pass the run's limit; nothing was sent"},
            at=at,
        )  # fmt: skip
    transitions.end_run(tx, s.run_id, status="FAILED", reason=reason, at=at)


class ModelAttempt:
    """One call begun and recorded: answer it, or say it was lost (rules 3 and 4)."""

    def __init__(self, caller: ModelCaller, attempt: int, asked: Asked) -> None:
        self._caller = caller
        self.attempt = attempt
        self.asked = asked
        self._ended = False

    @property
    def projected(self) -> Spent:
        return self.asked.projected

    def answered(
        self,
        *,
        response_text: str | None = None,
        tokens_in: int | None = None,
        tokens_out: int | None = None,
    ) -> Usage:
        """Record the provider's answer; what it did not report is counted (rule 3)."""
        self._check_open()
        counter = self._caller._config.counter
        if tokens_out is None and not isinstance(response_text, str):
            raise ModelUsageRefused("an answer needs its text or its output tokens")
        most = self.asked.max_output_tokens
        got_in = self.asked.prompt_tokens if tokens_in is None else _count(tokens_in, "tokens_in")
        if tokens_out is None:  # an estimate: no more than the call could answer
            text = response_text if isinstance(response_text, str) else ""
            got_out = min(most, _counted(counter, text, "the response"))
        elif _count(tokens_out, "tokens_out") > most:
            raise ModelUsageRefused(
                f"tokens_out {tokens_out} is more than the {most} the call allowed: usage that"
                " cannot be believed (the attempt stays charged at its projection)"
            )
        else:
            got_out = tokens_out
        counted = (tokens_in is None) + (tokens_out is None)
        usage = Usage(got_in, got_out, self.asked.price.cost(got_in, got_out),
                      ("reported", "partly counted", "counted")[counted])  # fmt: skip
        self._write(lambda tx, at: model_record.answer(
            tx, *self._where(), tokens_in=usage.tokens_in, tokens_out=usage.tokens_out,
            cost=usage.cost, usage=usage.usage, at=at,
        ))  # fmt: skip
        return usage

    def lost(self, reason: str) -> None:
        """No answer will come: the attempt stays charged at its projection (rule 4)."""
        self._check_open()
        if not isinstance(reason, str):
            raise ModelUsageRefused(f"a lost attempt's reason is text, not {reason!r}")
        self._write(lambda tx, at: model_record.lose(tx, *self._where(), reason=reason, at=at))

    def _where(self) -> tuple[str, int, int]:
        return self._caller._hold.run_id, self._caller.step, self.attempt

    def _check_open(self) -> None:
        if self._ended:
            raise RunStateError(f"model call {self.attempt} has already ended")

    def _write(self, record: Callable[[Transaction, str], bool]) -> None:
        s = self._caller._hold
        with s._call():
            at = format_time(s._gate.config.clock())
            with s._write() as tx:
                if not record(tx, at):
                    raise RunStateError(f"model call {self.attempt} is no longer open")
        self._ended = True
