"""The record of model calls: the one place that writes ``model_calls``, each row with its event
in the caller's transaction, what a run's calls spent, and the table rebuilt from the events.

Events (their payloads are what ``fold`` reads; core/replay.py folds them with the rest):

- ``model.started``  {attempt, provider, model, prompt_tokens, max_output_tokens,
                      projected_tokens, projected_cost, price}      written before anything is
                                                                     sent
- ``model.refused``  {the same, reason}                              a projection past a limit:
                                                                     nothing sent, the run ends
- ``model.answered`` {attempt, tokens_in, tokens_out, cost, usage}  the provider's answer
- ``model.lost``     {attempt, reason}                               no answer will come

Rules:

1. An attempt is numbered from 1 in its run, in the order it was begun.
2. What a run spent: an answered attempt counts its tokens and cost; one ``started`` (never
   answered: the process died, the caller dropped it) or ``lost`` counts at its projection,
   because a lost response may have cost money; a refused one counts nothing.
3. Amounts are exact decimal texts (core/prices.py ``text_of``), never floats.
4. ``compare`` raises ``StateDisagrees`` naming the first row the events do not make, a row no
   event made, or an event's row that is missing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from core.canonical import JSONValue
from core.errors import StateDisagrees
from core.limits import Spent
from core.prices import EXACT, Price, text_of
from core.store import Transaction

KINDS = frozenset({"model.started", "model.refused", "model.answered", "model.lost"})
_COLUMNS = (
    "step", "provider", "model", "status", "prompt_tokens", "max_output_tokens",
    "projected_tokens", "projected_cost", "tokens_in", "tokens_out", "cost", "usage", "detail",
)  # fmt: skip


@dataclass(frozen=True)
class Asked:
    """A call as it is asked for, before anything is sent: what it may cost at most."""

    provider: str
    model: str
    prompt_tokens: int
    max_output_tokens: int
    price: Price

    @property
    def projected(self) -> Spent:
        return Spent(self.prompt_tokens + self.max_output_tokens,
                     self.price.cost(self.prompt_tokens, self.max_output_tokens))  # fmt: skip


def spent(conn: sqlite3.Connection, run_id: str) -> Spent:
    """What the run's model calls spent (rule 2)."""
    tokens, cost = 0, Decimal(0)
    for status, tokens_in, tokens_out, paid, projected_tokens, projected_cost in conn.execute(
        "SELECT status, tokens_in, tokens_out, cost, projected_tokens, projected_cost"
        " FROM model_calls WHERE run_id = ? AND status != 'refused'",
        (run_id,),
    ):
        if status == "answered":
            tokens += tokens_in + tokens_out
            cost = EXACT.add(cost, Decimal(paid))
        else:
            tokens += projected_tokens
            cost = EXACT.add(cost, Decimal(projected_cost))
    return Spent(tokens, cost)


def next_attempt(conn: sqlite3.Connection, run_id: str) -> int:
    row = conn.execute(
        "SELECT coalesce(max(attempt), 0) + 1 FROM model_calls WHERE run_id = ?", (run_id,)
    ).fetchone()
    return int(row[0])


def start(
    tx: Transaction,
    run_id: str,
    step: int,
    attempt: int,
    asked: Asked,
    *,
    refused: str | None,
    at: str,
) -> None:
    """The attempt's row and event: ``started``, or ``refused`` with its reason."""
    projected = asked.projected
    tx.execute(
        "INSERT INTO model_calls (run_id, attempt, step_idx, provider, model, status,"
        " prompt_tokens, max_output_tokens, projected_tokens, projected_cost, detail, started_at,"
        " ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, attempt, step, asked.provider, asked.model,
         "started" if refused is None else "refused", asked.prompt_tokens,
         asked.max_output_tokens, projected.tokens, text_of(projected.cost), refused, at,
         None if refused is None else at),
    )  # fmt: skip
    payload: dict[str, JSONValue] = {
        "attempt": attempt, "provider": asked.provider, "model": asked.model,
        "prompt_tokens": asked.prompt_tokens, "max_output_tokens": asked.max_output_tokens,
        "projected_tokens": projected.tokens, "projected_cost": text_of(projected.cost),
        "price": dict(asked.price.as_json()),
    }  # fmt: skip
    if refused is not None:
        payload["reason"] = refused
    kind = "model.started" if refused is None else "model.refused"
    tx.append_event(kind=kind, payload=payload, at=at, run_id=run_id, step=step)


def answer(
    tx: Transaction,
    run_id: str,
    step: int,
    attempt: int,
    *,
    tokens_in: int,
    tokens_out: int,
    cost: Decimal,
    usage: str,
    at: str,
) -> bool:
    """The provider's answer; False (nothing written) when the attempt is not ``started``."""
    if not tx.execute(
        "UPDATE model_calls SET status = 'answered', tokens_in = ?, tokens_out = ?, cost = ?,"
        " usage = ?, ended_at = ? WHERE run_id = ? AND attempt = ? AND status = 'started'",
        (tokens_in, tokens_out, text_of(cost), usage, at, run_id, attempt),
    ).rowcount:
        return False
    payload: dict[str, JSONValue] = {"attempt": attempt, "tokens_in": tokens_in,
                                     "tokens_out": tokens_out, "cost": text_of(cost),
                                     "usage": usage}  # fmt: skip
    tx.append_event(kind="model.answered", payload=payload, at=at, run_id=run_id, step=step)
    return True


def lose(tx: Transaction, run_id: str, step: int, attempt: int, *, reason: str, at: str) -> bool:
    """No answer will come; False (nothing written) when the attempt is not ``started``."""
    if not tx.execute(
        "UPDATE model_calls SET status = 'lost', detail = ?, ended_at = ?"
        " WHERE run_id = ? AND attempt = ? AND status = 'started'",
        (reason, at, run_id, attempt),
    ).rowcount:
        return False
    tx.append_event(kind="model.lost", payload={"attempt": attempt, "reason": reason}, at=at,
                    run_id=run_id, step=step)  # fmt: skip
    return True


# --- rebuilt from the events ---------------------------------------------------------------


def fold(
    models: dict[tuple[str, int], dict[str, Any]],
    runs: dict[str, Any],
    run_id: str | None,
    idx: int | None,
    kind: str,
    p: dict[str, Any],
) -> None:
    """Apply one ``model.*`` event; ``KeyError`` when it does not follow from those before."""
    if run_id is None or run_id not in runs:
        raise KeyError(f"a model call of no known run ({run_id})")
    key = (run_id, p["attempt"])
    if kind in ("model.started", "model.refused"):
        if key in models:
            raise KeyError(f"model call {key} begun twice")
        models[key] = {
            "step": idx, "provider": p["provider"], "model": p["model"],
            "status": "started" if kind == "model.started" else "refused",
            "prompt_tokens": p["prompt_tokens"], "max_output_tokens": p["max_output_tokens"],
            "projected_tokens": p["projected_tokens"], "projected_cost": p["projected_cost"],
            "tokens_in": None, "tokens_out": None, "cost": None, "usage": None,
            "detail": p.get("reason"),
        }  # fmt: skip
        return
    made = models[key]
    if made["status"] != "started":
        raise KeyError(f"model call {key} ended while {made['status']}")
    if kind == "model.answered":
        made.update(status="answered", tokens_in=p["tokens_in"], tokens_out=p["tokens_out"],
                    cost=p["cost"], usage=p["usage"])  # fmt: skip
    else:
        made.update(status="lost", detail=p["reason"])


def compare(conn: sqlite3.Connection, models: dict[tuple[str, int], dict[str, Any]]) -> None:
    """Raise ``StateDisagrees`` for the first row the events do not make (rule 4)."""
    rows = conn.execute(
        "SELECT run_id, attempt, step_idx, provider, model, status, prompt_tokens,"
        " max_output_tokens, projected_tokens, projected_cost, tokens_in, tokens_out, cost,"
        " usage, detail FROM model_calls ORDER BY run_id, attempt"
    ).fetchall()
    for run_id, attempt, *found in rows:
        where = f"model_calls {run_id}/{attempt}"
        made = models.get((run_id, attempt))
        if made is None:
            raise StateDisagrees(
                f"model call {attempt} of run {run_id} has no model.started event", row=where
            )
        if tuple(found) != tuple(made[c] for c in _COLUMNS):
            raise StateDisagrees(
                f"model call {attempt} of run {run_id} is recorded as {found[3]}, but its events"
                f" make it {made['status']}" if found[3] != made["status"] else
                f"model call {attempt} of run {run_id}: its tokens, cost or model are not what"
                " its events recorded",
                row=where,
            )  # fmt: skip
    if len(rows) != len(models):
        run_id, attempt = sorted(set(models) - {(r[0], r[1]) for r in rows})[0]
        raise StateDisagrees(f"model call {attempt} of run {run_id} has events but no row",
                             row=f"model_calls {run_id}/{attempt}")  # fmt: skip
