"""What a model call costs: the operator's prices, a token counter, and the model configuration.

Pure code (a TOML text is parsed, no file is read here).

Rules:

1. Prices are the operator's data, never the code's: there is no built-in table, and a
   (provider, model) with no price raises ``UnknownPrice``; a cost is never guessed, nor taken
   as zero (``$0.00`` reads as "free", not as "unknown").
2. A price is an exact amount per million tokens, one for input and one for output: a decimal
   text (``"3.00"``) or an integer. A float (inexact), a negative or non-finite amount, one of
   10^18 or more or with more than 18 decimal places (``"1e999999"`` would be a million
   digits in the record), or an unknown field is refused (``PriceRefused``). Costs are
   ``Decimal``, exact: never a float, and computed in ``EXACT``, which never rounds.
3. A price's key is ``"provider/model"``: the provider is the text before the first ``/``, the
   model the rest (a model's own name may hold ``/``).
4. ``HeuristicCounter`` estimates tokens as ceil(UTF-8 bytes / 4). It is an estimate, used when
   a provider reports no usage and to project a prompt before it is sent; it knows no
   tokeniser. ``TokenCounter`` is a protocol: an exact counter is a one-line swap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Context, Decimal, DecimalException, Inexact, InvalidOperation, Overflow
from typing import Any, Protocol

from core.errors import PriceRefused, UnknownPrice

MILLION = Decimal(1_000_000)
DIGITS = 18  # an amount is below 10^18, to at most 18 decimal places (rule 2)
# Cost arithmetic: bounded amounts times counts below 2^53 stay far inside this precision, and
# a rounding would raise rather than change a figure (the default context rounds at 28 digits).
EXACT = Context(prec=100, traps=[Inexact, InvalidOperation, Overflow])
_PRICE_FIELDS = frozenset({"input_per_mtok", "output_per_mtok"})


def amount(value: object, what: str) -> Decimal:
    """An exact, finite, non-negative amount from a decimal text, an integer or a Decimal."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise PriceRefused(f"{what} must be a decimal text such as \"3.00\" or an integer, "
                           f"not {value!r}")  # fmt: skip
    try:
        exact = Decimal(value.strip() if isinstance(value, str) else value)
    except InvalidOperation:
        raise PriceRefused(f"{what} is not a number: {value!r}") from None
    if not exact.is_finite() or exact < 0:
        raise PriceRefused(f"{what} must be a finite amount of 0 or more, not {value!r}")
    try:
        places = -int(EXACT.normalize(exact).as_tuple().exponent) if exact else 0  # finite: int
        fine = not exact or (exact.adjusted() < DIGITS and places <= DIGITS)
    except DecimalException:  # more digits than EXACT holds
        fine = False
    if not fine:
        raise PriceRefused(f"{what} must be below 10^{DIGITS}, to at most {DIGITS} decimal"
                           f" places, not {value!r}")  # fmt: skip
    return exact


def text_of(value: Decimal) -> str:
    """The one text form of an amount in the record: plain digits, no exponent."""
    return format(EXACT.normalize(value), "f") if value else "0"


@dataclass(frozen=True)
class Price:
    """What a million tokens cost, read and written."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal

    def cost(self, tokens_in: int, tokens_out: int) -> Decimal:
        paid = EXACT.add(EXACT.multiply(tokens_in, self.input_per_mtok),
                         EXACT.multiply(tokens_out, self.output_per_mtok))  # fmt: skip
        return EXACT.divide(paid, MILLION)

    def as_json(self) -> dict[str, str]:
        return {"input_per_mtok": text_of(self.input_per_mtok),
                "output_per_mtok": text_of(self.output_per_mtok)}  # fmt: skip


@dataclass(frozen=True)
class Prices:
    """The operator's prices by (provider, model); ``price`` raises ``UnknownPrice``."""

    by_model: Mapping[tuple[str, str], Price] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any]) -> Prices:
        """``{"provider/model": {"input_per_mtok": "3.00", "output_per_mtok": "15.00"}}``."""
        if not isinstance(table, Mapping):
            raise PriceRefused(f'prices must be a table of "provider/model", not {table!r}')
        found: dict[tuple[str, str], Price] = {}
        for key, entry in table.items():
            provider, _, model = str(key).partition("/")
            if not provider or not model:
                raise PriceRefused(f'a price\'s key is "provider/model", not {key!r}')
            if not isinstance(entry, Mapping) or set(entry) != _PRICE_FIELDS:
                raise PriceRefused(
                    f"the price of {key} must give exactly input_per_mtok and output_per_mtok"
                )
            found[(provider, model)] = Price(
                amount(entry["input_per_mtok"], f"{key}'s input_per_mtok"),
                amount(entry["output_per_mtok"], f"{key}'s output_per_mtok"),
            )
        return cls(found)

    @classmethod
    def from_toml(cls, text: str) -> Prices:
        """The ``[prices."provider/model"]`` tables of a TOML text (nothing else is read)."""
        import tomllib  # here: most commands price nothing (decision 0033)

        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise PriceRefused(f"the prices do not read as TOML: {e}") from None
        return cls.from_mapping(document.get("prices", {}))

    def price(self, provider: str, model: str) -> Price:
        found = self.by_model.get((provider, model))
        if found is None:
            raise UnknownPrice(
                f"no price is configured for {provider}/{model}; add"
                f' [prices."{provider}/{model}"] with input_per_mtok and output_per_mtok'
            )
        return found


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class HeuristicCounter:
    """ceil(UTF-8 bytes / 4): an estimate, honest about being one (rule 4)."""

    name = "heuristic: ceil(utf-8 bytes / 4)"

    def count(self, text: str) -> int:
        return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)


@dataclass(frozen=True)
class ModelConfig:
    """A gate's model configuration (``GateConfig.model``): with it, each open step offers an
    accounting model caller (``OpenStep.model()``, core/model_calls.py)."""

    prices: Prices
    counter: TokenCounter = field(default_factory=HeuristicCounter)
