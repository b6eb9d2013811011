"""The comparison: a step's two observations are equal, or equal once exactly the named
differences that apply to the step (tests/conformance/differences.py) are normalised, each
explicitly. Values are compared as JSON: object keys unordered, everything else exact (1 and
1.0 differ, so do true and 1).

``Verdict.needed`` is the smallest set of the applicable differences that makes the two equal:
a difference applicable to a step but needed by none of a run's steps is stale.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from tests.conformance.differences import DIFFERENCES, VOLATILE, Context, Difference

SAME = "same"
NOT_APPLICABLE = "n/a"


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass
class Verdict:
    applicable: list[Difference]
    needed: list[Difference] | None  # None: no set of the applicable differences explains it
    direct: Any
    proxied: Any
    exercised: bool = True  # False: the server sent nothing of the kind, either way

    @property
    def explained(self) -> bool:
        return self.needed is not None


def masked(value: Any, context: Context) -> Any:
    """``value`` with what the server makes up anew on each call masked (not proxy business)."""
    for mask in VOLATILE:
        if mask.applies(context):
            value = mask.mask(copy.deepcopy(value))
    return value


def normalised(
    differences: list[Difference], direct: Any, proxied: Any, context: Context
) -> tuple[Any, Any]:
    """The two observations once each of ``differences`` is normalised, in order."""
    a, b = direct, proxied
    for difference in differences:
        a, b = difference.normalise(copy.deepcopy(a), copy.deepcopy(b), context)
    return a, b


def apply(differences: list[Difference], direct: Any, proxied: Any, context: Context) -> bool:
    a, b = normalised(differences, direct, proxied, context)
    return canonical(a) == canonical(b)


def compare(context: Context, direct: Any, proxied: Any) -> Verdict:
    direct, proxied = masked(direct, context), masked(proxied, context)
    applicable = [d for d in DIFFERENCES if d.applies(context)]
    verdict = Verdict(applicable, None, direct, proxied)
    if context.step.kind in ("log", "notes") and direct == [] == proxied:
        verdict.exercised = False
    if canonical(direct) == canonical(proxied):
        verdict.needed = []
        return verdict
    if apply(applicable, direct, proxied, context):
        # Drop each difference the others explain without: what is left is each needed.
        needed = list(applicable)
        for difference in applicable:
            rest = [d for d in needed if d is not difference]
            if apply(rest, direct, proxied, context):
                needed = rest
        verdict.needed = needed
        return verdict
    # A normaliser for a difference that no longer occurs can spoil the rest: smallest first.
    for size in range(1, len(applicable)):
        for subset in combinations(applicable, size):
            if apply(list(subset), direct, proxied, context):
                verdict.needed = list(subset)
                return verdict
    return verdict


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two JSON values first differ, shortly."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                side = "direct" if key in a else "proxied"
                return f"{path}/{key}: only {side} has it: {_short(a.get(key, b.get(key)))}"
            if canonical(a[key]) != canonical(b[key]):
                return first_difference(a[key], b[key], f"{path}/{key}")
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if canonical(x) != canonical(y):
                return first_difference(x, y, f"{path}/{i}")
        if len(a) != len(b):
            return f"{path}: {len(a)} items direct, {len(b)} proxied"
    return f"{path or '/'}: direct {_short(a)}, proxied {_short(b)}"


def _short(value: Any, limit: int = 300) -> str:
    text = canonical(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def cell(verdicts: list[Verdict]) -> str | list[str]:
    """A feature's cell in the matrix from its steps' verdicts: same, n/a, or the ids needed
    (in the registry's order)."""
    verdicts = [v for v in verdicts if v.exercised]
    if not verdicts:
        return NOT_APPLICABLE
    ids = {d.id for v in verdicts for d in v.needed or []}
    if not ids:
        return SAME
    return [d.id for d in DIFFERENCES if d.id in ids]
