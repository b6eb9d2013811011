"""Lists the mutations by guarantee: ``python -m tests.mutants``."""

from tests.mutants import by_guarantee

for guarantee, mutations in sorted(by_guarantee().items()):
    print(guarantee)
    for m in mutations:
        print(f"  {m.name}: {m.breaks}\n    {m.path}; caught by {m.caught_by or '(nothing)'}")
