"""A step's model calls: recorded before they are sent, held to the run's token and cost limits
by projection, charged when their answer is lost, priced only by the operator's prices.

The "provider" here is the test's own list of calls made: a loop sends only once ``begin``
returned, so a call refused by ``begin`` is one the provider never saw.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from decimal import Decimal, localcontext
from pathlib import Path

import pytest

from core.decisions import Decision
from core.errors import (
    LeaseLost,
    ModelLimitReached,
    ModelUsageRefused,
    PriceRefused,
    RunStateError,
    SessionClosed,
    StateDisagrees,
    UnknownPrice,
)
from core.gate import Gate, Session, VerdictOutcome
from core.limits import Limits
from core.model_calls import MOST_TOKENS, ModelCaller
from core.prices import HeuristicCounter, ModelConfig, Prices
from core.replay import check_state
from core.store import Store
from core.verify import verify
from tests.conftest import NO_KEYRING_ENV, run_signoff
from tests.core.gatekit import Calls, FakeClock, make_gate, record_snapshot, standard_tools
from tests.core.model_child import PRICES

PROMPT = "x" * 40  # 10 tokens by the heuristic counter


def _gate(store: Store, **config: object) -> Gate:
    config.setdefault("model", ModelConfig(Prices.from_mapping(PRICES)))
    return make_gate(store, standard_tools(Calls()), anchor=None, **config)


def _caller(session: Session) -> ModelCaller:
    step = session.current() or session.step()
    assert step is not None
    caller = step.model()
    assert caller is not None
    return caller


def _rows(store: Store) -> list[tuple[object, ...]]:
    return store._conn.execute(
        "SELECT attempt, status, projected_tokens, tokens_in, tokens_out, cost FROM model_calls"
        " ORDER BY attempt"
    ).fetchall()


def _intact(store: Store) -> None:
    """The chain verifies and the tables, model calls included, are what the events make."""
    verify(store)
    check_state(store, None)


# --- limits by projection ---------------------------------------------------------------------


@pytest.mark.guarantee("G-MODEL-1")
def test_a_call_whose_projection_passes_the_token_limit_is_refused_and_nothing_is_sent(
    gate_store: Store,
) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=100))
    sent: list[str] = []
    first = _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    sent.append(PROMPT)
    first.answered(tokens_in=10, tokens_out=30)  # 40 spent
    with pytest.raises(ModelLimitReached) as refused:
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=51)  # 40 + 61 > 100
    assert refused.value.reason == "limit_tokens"
    assert sent == [PROMPT]  # the loop had nothing to send
    assert (s.run().status, s.run().end_reason) == ("FAILED", "limit_tokens")
    assert _rows(gate_store) == [(1, "answered", 60, 10, 30, "0.00048"),
                                 (2, "refused", 61, None, None, None)]  # fmt: skip
    step = gate_store._conn.execute("SELECT status, observation FROM steps").fetchone()
    assert step[0] == "failed" and json.loads(step[1])["error"] == "limit_tokens"
    with pytest.raises(RunStateError):
        s.step()
    _intact(gate_store)


@pytest.mark.guarantee("G-MODEL-1")
def test_a_single_call_larger_than_the_limit_is_refused_before_anything_is_spent(
    gate_store: Store,
) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=100))
    with pytest.raises(ModelLimitReached):
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=91)
    assert _rows(gate_store) == [(1, "refused", 101, None, None, None)]


@pytest.mark.guarantee("G-MODEL-1")
def test_the_cost_limit_is_judged_by_projection_in_exact_decimals(gate_store: Store) -> None:
    """In 3.00 and out 15.00 per million: 10 in and 50 out at most project 0.00078."""
    s = _gate(gate_store).begin("r", "goal", Limits(max_cost="0.00100"))
    a = _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert a.projected.cost == Decimal("0.00078")
    assert a.answered(tokens_in=10, tokens_out=10).cost == Decimal("0.00018")
    b = _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)  # 0.00096: fits
    b.answered(tokens_in=10, tokens_out=50)
    with pytest.raises(ModelLimitReached) as refused:  # 0.00096 + 0.00078 > 0.001
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert refused.value.reason == "limit_cost"
    assert (s.run().status, s.run().end_reason) == ("FAILED", "limit_cost")
    costs = [c for (c,) in gate_store._conn.execute("SELECT cost FROM model_calls")]
    assert costs == ["0.00018", "0.00078", None]
    _intact(gate_store)


@pytest.mark.guarantee("G-MODEL-1")
def test_a_run_that_spent_its_limit_starts_no_further_step(gate_store: Store) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=60))
    step = s.step()
    assert step is not None
    caller = step.model()
    assert caller is not None
    caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50).answered(
        tokens_in=10, tokens_out=50
    )  # exactly the limit: allowed
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    asyncio.run(step.execute())
    assert s.step() is None
    assert (s.run().status, s.run().end_reason) == ("FAILED", "limit_tokens")


# --- prices -----------------------------------------------------------------------------------


@pytest.mark.guarantee("G-MODEL-2")
def test_a_model_with_no_price_is_refused_and_nothing_is_recorded_or_charged(
    gate_store: Store,
) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=100))
    caller = _caller(s)
    before = record_snapshot(gate_store)
    for provider, model in (("acme", "large"), ("other", "small"), ("acme", "small/x")):
        with pytest.raises(UnknownPrice):
            caller.begin(provider, model, prompt=PROMPT, max_output_tokens=1)
    assert record_snapshot(gate_store) == before
    assert _rows(gate_store) == []
    step = s.current()  # the session goes on
    assert step is not None
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED


@pytest.mark.guarantee("G-MODEL-2")
@pytest.mark.parametrize(
    "entry",
    [
        {"input_per_mtok": 3.0, "output_per_mtok": "15"},  # a float is not exact
        {"input_per_mtok": "-1", "output_per_mtok": "15"},
        {"input_per_mtok": "NaN", "output_per_mtok": "15"},
        {"input_per_mtok": "three", "output_per_mtok": "15"},
        {"input_per_mtok": True, "output_per_mtok": "15"},
        {"input_per_mtok": "3"},
        {"input_per_mtok": "3", "output_per_mtok": "15", "currency": "EUR"},
        {"input_per_mtok": "1e999999", "output_per_mtok": "15"},  # a million digits written
        {"input_per_mtok": "1e-999999", "output_per_mtok": "15"},
        {"input_per_mtok": "1e18", "output_per_mtok": "15"},
        {"input_per_mtok": "0.0000000000000000001", "output_per_mtok": "15"},
    ],
)
def test_a_price_that_is_not_an_exact_amount_is_refused(entry: dict[str, object]) -> None:
    with pytest.raises(PriceRefused):
        Prices.from_mapping({"acme/small": entry})


def test_costs_are_exact_however_many_digits_a_price_has(gate_store: Store) -> None:
    """Python's default decimal context rounds at 28 digits; a cost, a projection and what a
    run spent never do, for any price the configuration accepts."""
    long_price = "3.123456789012345678"
    assert Prices.from_mapping({"acme/small": {"input_per_mtok": "1e3", "output_per_mtok": 0}})
    config = ModelConfig(Prices.from_mapping(
        {"acme/small": {"input_per_mtok": long_price, "output_per_mtok": long_price}}))  # fmt: skip
    s = _gate(gate_store, model=config).begin("r", "goal", Limits(max_cost="1e17"))
    tokens = 123_456_789_012
    with localcontext() as wide:
        wide.prec = 100
        exact = Decimal(long_price) * tokens * 2 / 1_000_000
    attempt = _caller(s).begin("acme", "small", prompt="", max_output_tokens=tokens)
    assert attempt.answered(tokens_in=tokens, tokens_out=tokens).cost == exact
    assert gate_store._conn.execute("SELECT cost FROM model_calls").fetchone() == (str(exact),)
    _intact(gate_store)


def test_prices_are_read_from_the_operators_toml() -> None:
    prices = Prices.from_toml(
        '[prices."acme/small"]\ninput_per_mtok = "3.00"\noutput_per_mtok = "15"\n'
        '[prices."hub/org/model-7b"]\ninput_per_mtok = 0\noutput_per_mtok = "0.10"\n'
    )
    assert prices.price("acme", "small").cost(1_000_000, 1) == Decimal("3.000015")
    assert prices.price("hub", "org/model-7b").output_per_mtok == Decimal("0.10")
    with pytest.raises(PriceRefused):
        Prices.from_toml('[prices."no-model"]\ninput_per_mtok = "1"\noutput_per_mtok = "1"\n')
    with pytest.raises(PriceRefused):
        Prices.from_toml("[prices\n")
    assert Prices.from_toml("").by_model == {}  # no prices: every model is unknown


# --- a lost or ambiguous attempt is charged ----------------------------------------------------


@pytest.mark.guarantee("G-MODEL-3")
def test_a_lost_answer_is_charged_at_its_projection(gate_store: Store) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=100))
    _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50).lost("timed out")
    with pytest.raises(ModelLimitReached):  # 60 charged + 60 projected > 100
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert _rows(gate_store) == [(1, "lost", 60, None, None, None),
                                 (2, "refused", 60, None, None, None)]  # fmt: skip
    _intact(gate_store)


@pytest.mark.guarantee("G-MODEL-3")
def test_an_answer_after_the_session_closed_is_refused_and_the_attempt_stays_charged(
    gate_store: Store,
) -> None:
    g = _gate(gate_store)
    s = g.begin("r", "goal", Limits(max_tokens=100))
    attempt = _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    s.close()
    with pytest.raises(SessionClosed):
        attempt.answered(tokens_in=1, tokens_out=1)
    s, _ = g.attach("r")
    with pytest.raises(ModelLimitReached):
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert _rows(gate_store)[0] == (1, "started", 60, None, None, None)
    _intact(gate_store)


@pytest.mark.guarantee("G-MODEL-3")
def test_a_session_abandoned_mid_call_leaves_the_call_charged_for_the_next_process(
    home: Path,
) -> None:
    wall = [1_000_000.0]
    with Store.open(home / "signoff.db") as first:
        s = _gate(first, wall_clock=lambda: wall[0]).begin("r", "goal", Limits(max_tokens=100))
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
        del s  # dropped, never closed: as a loop that died between sending and hearing back
    wall[0] += 31  # past the lease the dead session can no longer renew
    with Store.open(home / "signoff.db") as second:
        s, verdict = _gate(second, wall_clock=lambda: wall[0]).attach("r")
        assert verdict is None
        with pytest.raises(ModelLimitReached):
            _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
        assert _rows(second) == [(1, "started", 60, None, None, None),
                                 (2, "refused", 60, None, None, None)]  # fmt: skip
        _intact(second)


@pytest.mark.guarantee("G-MODEL-3")
def test_a_process_killed_mid_call_leaves_it_charged_and_the_record_consistent(
    tmp_path: Path,
) -> None:
    database = tmp_path / "signoff.db"
    child = subprocess.run(
        [sys.executable, "-m", "tests.core.model_child", str(database)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (child.returncode, child.stdout) == (-9, "begun\n"), child.stderr
    with Store.open(database) as store:
        _intact(store)  # what the killed process committed is whole
        # The wall clock of a later moment: the dead process's lease (30 s) has run out.
        g = _gate(store, wall_clock=lambda: 4_000_000_000.0)
        s, _ = g.attach("r")
        step = s.step()  # 60 charged: a step may start
        assert step is not None
        with pytest.raises(ModelLimitReached):
            _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
        assert _rows(store) == [(1, "started", 60, None, None, None),
                                (2, "refused", 60, None, None, None)]  # fmt: skip
        _intact(store)


def test_a_session_whose_lease_ran_out_records_no_call_and_sends_nothing(home: Path) -> None:
    wall = [1_000_000.0]
    with Store.open(home / "signoff.db") as store:
        s = _gate(store, wall_clock=lambda: wall[0]).begin("r", "goal", None)
        caller = _caller(s)
        wall[0] += 31  # nothing renewed it: another process may have taken the run over
        with pytest.raises(LeaseLost):
            caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
        assert _rows(store) == []


def test_a_steps_caller_stays_usable_after_its_step_ends_while_the_session_goes_on(
    gate_store: Store,
) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=1000))
    step = s.step()
    assert step is not None
    caller = step.model()
    assert caller is not None
    assert step.propose(Decision.tool_call("read", {"n": 1})).outcome == VerdictOutcome.ALLOWED
    asyncio.run(step.execute())
    caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=5).answered(tokens_out=5)
    assert gate_store._conn.execute("SELECT step_idx, status FROM model_calls").fetchall() == [
        (0, "answered")
    ]
    _intact(gate_store)


# --- the record --------------------------------------------------------------------------------

EDITS = {
    "a call's tokens": "UPDATE model_calls SET tokens_out = 1 WHERE attempt = 1",
    "a call's cost": "UPDATE model_calls SET cost = '0' WHERE attempt = 1",
    "a lost call made answered": "UPDATE model_calls SET status = 'answered', tokens_in = 0,"
    " tokens_out = 0, cost = '0' WHERE attempt = 2",
    "a call's row deleted": "DELETE FROM model_calls WHERE attempt = 2",
    "a call's row added": "INSERT INTO model_calls SELECT run_id, 3, step_idx, provider, model,"
    " status, prompt_tokens, max_output_tokens, projected_tokens, projected_cost, tokens_in,"
    " tokens_out, cost, usage, detail, started_at, ended_at FROM model_calls WHERE attempt = 1",
}


@pytest.mark.guarantee("G-MODEL-3")
@pytest.mark.parametrize("edit", EDITS)
def test_each_edit_of_the_model_calls_behind_the_chain_is_found_naming_the_row(
    home: Path, edit: str
) -> None:
    database = home / "signoff.db"
    with Store.open(database) as store:
        s = _gate(store).begin("r", "goal", Limits(max_tokens=1000))
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50).answered(
            response_text="y" * 120
        )
        _caller(s).begin("acme", "small", prompt=PROMPT, max_output_tokens=50).lost("reset")
    assert json.loads(run_signoff("verify", "--json", home=home, env=NO_KEYRING_ENV).stdout)["ok"]
    conn = sqlite3.connect(database)
    conn.execute(EDITS[edit])
    conn.commit()
    conn.close()
    with Store.open(database) as store, pytest.raises(StateDisagrees) as found:
        check_state(store, None)
    assert found.value.row in ("model_calls r/1", "model_calls r/2", "model_calls r/3")
    done = run_signoff("verify", "--json", home=home, env=NO_KEYRING_ENV)
    assert (done.returncode, json.loads(done.stdout)["error"]) == (1, "StateDisagrees")


def test_an_answer_without_usage_is_counted_and_says_so(gate_store: Store) -> None:
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=1000))
    caller = _caller(s)
    counted = caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert counted.answered(response_text="é" * 6).usage == "counted"  # 12 bytes: 3 tokens
    partly = caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert partly.answered(response_text="ignored", tokens_out=7).usage == "partly counted"
    reported = caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert reported.answered(tokens_in=11, tokens_out=2).usage == "reported"
    assert [r[3:5] for r in _rows(gate_store)] == [(10, 3), (10, 7), (11, 2)]
    with pytest.raises(RunStateError):
        reported.answered(tokens_in=1, tokens_out=1)  # an attempt is answered once
    with pytest.raises(ModelUsageRefused):
        caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50).answered()
    with pytest.raises(ModelUsageRefused):
        caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=-1)
    _intact(gate_store)


@pytest.mark.guarantee("G-MODEL-1")
def test_an_answer_of_more_output_than_the_call_allowed_cannot_pass_the_limit(
    gate_store: Store,
) -> None:
    """Projected at 10 + 50 under a limit of 60, a call cannot be recorded as having answered
    more than the 50 it allowed: reported, that is usage that cannot be believed (refused, the
    attempt still charged at its projection); counted from the text, the estimate is capped."""
    s = _gate(gate_store).begin("r", "goal", Limits(max_tokens=120))
    caller = _caller(s)
    reported = caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    with pytest.raises(ModelUsageRefused, match="cannot be believed"):
        reported.answered(tokens_in=10, tokens_out=500)
    reported.lost("its usage could not be believed")
    counted = caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=50)
    assert counted.answered(response_text="x" * 2000).tokens_out == 50  # 500 by the estimate
    assert [r[1:5] for r in _rows(gate_store)] == [("lost", 60, None, None),
                                                   ("answered", 60, 10, 50)]  # fmt: skip
    with pytest.raises(ModelLimitReached):  # 120 spent: not one token more
        caller.begin("acme", "small", prompt="", max_output_tokens=1)
    _intact(gate_store)


def test_a_count_too_large_for_the_record_is_refused_by_name_and_the_session_goes_on(
    gate_store: Store,
) -> None:
    """A counter, a provider or a loop giving a count past what the record holds exactly (an
    integer beyond 2^53 - 1) is a bad description of the call: refused before anything is
    written, not a failed call that closes the session with the attempt left charged."""

    class Huge:
        def count(self, text: str) -> int:
            return 2**60

    huge = MOST_TOKENS + 1
    s = _gate(gate_store).begin("r", "goal", None)
    caller = _caller(s)
    with pytest.raises(ModelUsageRefused):
        caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=huge)
    attempt = caller.begin("acme", "small", prompt=PROMPT, max_output_tokens=MOST_TOKENS)
    with pytest.raises(ModelUsageRefused):
        attempt.answered(tokens_in=10, tokens_out=huge)
    attempt.answered(tokens_in=10, tokens_out=MOST_TOKENS)
    counting = _gate(gate_store, model=ModelConfig(Prices.from_mapping(PRICES), counter=Huge()))
    t = counting.begin("t", "goal", None)
    with pytest.raises(ModelUsageRefused):
        _caller(t).begin("acme", "small", prompt=PROMPT, max_output_tokens=1)
    assert s.run().status == t.run().status == "RUNNING"  # both sessions go on
    assert [r[1] for r in _rows(gate_store)] == ["answered"]
    _intact(gate_store)


def test_an_exact_counter_is_a_one_line_swap(gate_store: Store) -> None:
    class Words:
        def count(self, text: str) -> int:
            return len(text.split())

    config = ModelConfig(Prices.from_mapping(PRICES), counter=Words())
    s = _gate(gate_store, model=config).begin("r", "goal", None)
    attempt = _caller(s).begin("acme", "small", prompt="three short words", max_output_tokens=5)
    assert attempt.projected.tokens == 8
    assert [HeuristicCounter().count(t) for t in ("", "abcd", "abcde", "é")] == [0, 1, 2, 1]


def test_a_gate_with_no_model_configuration_offers_no_model_caller(gate_store: Store) -> None:
    g = make_gate(gate_store, standard_tools(Calls()), anchor=None, clock=FakeClock())
    step = g.begin("r", "goal", None).step()
    assert step is not None and step.model() is None


def test_model_limits_round_trip_and_older_limits_still_load() -> None:
    limits = Limits(max_tokens=5, max_cost="0.50")
    assert limits.max_cost == Decimal("0.50")
    assert Limits.from_json(limits.as_json()) == limits
    assert "max_tokens" not in Limits().as_json()  # a run without them is recorded as before
    old = {"max_steps": 3, "max_consecutive_failures": 5, "loop_repeats": 3,
           "max_active_seconds": None, "max_elapsed_seconds": None,
           "grant_ttl_seconds": None}  # fmt: skip
    assert Limits.from_json(old).max_tokens is None
    for bad in ({"max_cost": 0.5}, {"max_tokens": -1}, {"max_tokens": 1.5}):
        with pytest.raises(PriceRefused):
            Limits(**bad)  # type: ignore[arg-type]
