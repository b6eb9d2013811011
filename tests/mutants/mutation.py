"""One named mutation of the product code (tests/mutants/__init__.py says what they are for)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    name: str  # unique, a few words
    guarantee: str  # the id in docs/guarantees.md
    path: str  # the product file, from the repository's root
    old: str  # exact text, found exactly once in the file
    new: str
    breaks: str  # the claim it breaks, in words
    caught_by: str  # the test (file::name) that fails first
