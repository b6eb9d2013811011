"""The claims' tests fail when the claim is broken: each mutation of tests/mutants applied to
a temporary copy of the tree, with only its claim's marked tests run there (``--guarantee``).

    make test ARGS="-m mutation"              all of them
    make test ARGS="-m mutation -k verify"    one

tests/mutants/runner.py says how a mutation is judged: caught only by an assertion of a test
marked with its claim (the one ``caught_by`` names, first); a survivor is looked for in the
rest of its part's tests, and one an unmarked test catches is a gap to mark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutants import MUTATIONS, Mutation
from tests.mutants.runner import CAUGHT, RUN_TIMEOUT, judge, mutated_copy

pytestmark = [pytest.mark.mutation, pytest.mark.slow]


# Three runs at most: the caught_by test alone, the claim's tests, a survivor's part.
@pytest.mark.timeout(3 * RUN_TIMEOUT + 60)
@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_the_claims_tests_fail_with_the_claim_broken(mutation: Mutation, tmp_path: Path) -> None:
    verdict = judge(mutation, mutated_copy(mutation, tmp_path), tmp_path)
    assert verdict.kind == CAUGHT, verdict.message
