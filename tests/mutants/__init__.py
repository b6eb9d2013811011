"""Named mutations of the product code, each breaking exactly one claim of docs/guarantees.md.

tests/test_mutations.py applies each to a temporary copy of the tree, runs only the tests marked
with its claim's id (``--guarantee ID``), and fails unless the first to fail is ``caught_by``,
failing on an assertion (tests/mutants/runner.py): a claim whose tests pass with the claim
broken, or fail only because a module no longer imports, is not backed by them. ``caught_by``
names the test that fails first, as the runner last saw it (the runner says when it changes,
and names the unmarked tests that catch a survivor). tests/test_docs.py checks that it is
marked with the claim.

A mutation is an exact text replaced in one product file; the text must occur exactly once, so
a change of the code that moves it makes the runner say the mutation no longer applies instead
of silently testing nothing. Every guarantee has at least one (tests/test_docs.py checks), and a
new guarantee comes with its own.

    .venv/bin/python -m tests.mutants    lists them by guarantee

They are kept in two lists: core.py (store, chain, JSON, gate, crash) and outer.py (proxy,
configuration, hosts, pins, app).
"""

from __future__ import annotations

from collections import defaultdict

from tests.mutants.core import CORE
from tests.mutants.mutation import Mutation
from tests.mutants.outer import OUTER

__all__ = ["MUTATIONS", "Mutation", "by_guarantee"]

MUTATIONS: tuple[Mutation, ...] = (*CORE, *OUTER)


def by_guarantee() -> dict[str, list[Mutation]]:
    found: dict[str, list[Mutation]] = defaultdict(list)
    for mutation in MUTATIONS:
        found[mutation.guarantee].append(mutation)
    return dict(found)
