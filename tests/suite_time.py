"""Where the suite's time goes, part by part, against the budget docs/reliability.md keeps:

    python -m tests.suite_time [REPORT...]

reads the JUnit reports `make test` writes (``build/test-report.xml``, and
``build/test-report-apart.xml`` for the tests run alone) and prints, for each part, its tests'
time (setup, call and teardown, summed over the workers) and its budget, and the runs' own
time. A part over its budget is said, not failed: timed assertions do not belong in
tests, and a busy machine is no defect of the code. The parts are the ones issue 36 named.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET  # our own pytest's report, not outside input
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "build" / "test-report.xml"
WALL_BUDGET = 15 * 60  # seconds of pytest for the whole run, on the 2-core CI machine


@dataclass(frozen=True)
class Part:
    name: str
    files: tuple[str, ...]  # patterns of test files, from the repository's root
    budget: float  # seconds of test time, summed over the workers


# The first part whose pattern matches a file takes it. The budgets (docs/reliability.md) are
# the last clean runs' figures and some room; they add up to what 4 workers do in 13 minutes.
KEYRING_FILES = (
    "tests/core/test_secret_service.py", "tests/core/test_heads.py", "tests/core/test_anchor.py",
    "tests/core/test_planted_keyring.py", "tests/core/test_witness.py",
    "tests/proxy/test_keyring_reach.py", "tests/proxy/test_forged_approvals.py",
    "tests/app/test_keyring_locked.py",
)  # fmt: skip
PARTS = (
    Part("mutation suite", ("tests/test_mutations.py",), 900),
    Part("bundle build and packaging", ("tests/packaging/*",), 120),
    Part("keyring suites", KEYRING_FILES, 150),
    Part("desktop (Xvfb, D-Bus, Qt)", ("tests/app/*",), 320),
    Part("reliability suites", ("tests/reliability/*",), 200),
    Part("conformance", ("tests/conformance/*",), 130),
    Part("proxy", ("tests/proxy/*",), 1050),
    Part("core", ("tests/core/*",), 220),
    Part("the project's own checks", ("tests/*",), 60),
)


def part_of(file: str) -> Part:
    return next(p for p in PARTS if any(fnmatch(file, pattern) for pattern in p.files))


def read(report: Path) -> tuple[dict[str, float], dict[str, int], float]:
    """Seconds and tests per part, and the run's own seconds."""
    root = ET.parse(report).getroot()  # noqa: S314
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None, f"{report}: no test suite in it"
    seconds: dict[str, float] = {p.name: 0.0 for p in PARTS}
    tests: dict[str, int] = {p.name: 0 for p in PARTS}
    for case in suite.iter("testcase"):
        # classname: tests.core.test_store (a class adds its name): the file is its module's.
        module = case.get("classname", "").split(".")
        while module and not module[-1].startswith("test_"):
            module.pop()
        part = part_of("/".join(module) + ".py")
        seconds[part.name] += float(case.get("time", 0))
        tests[part.name] += 1
    return seconds, tests, float(suite.get("time", 0))


def main(argv: list[str]) -> int:
    reports = [Path(a) for a in argv] or [REPORT]
    seconds = {p.name: 0.0 for p in PARTS}
    tests = {p.name: 0 for p in PARTS}
    wall = 0.0
    for report in reports:
        if not report.exists():  # a run that held no test writes none
            continue
        its_seconds, its_tests, its_wall = read(report)
        for part in PARTS:
            seconds[part.name] += its_seconds[part.name]
            tests[part.name] += its_tests[part.name]
        wall += its_wall
    if not wall:
        print(f"no report at {', '.join(map(str, reports))}: run make test first")
        return 1
    print(f"{'part':<28} {'tests':>6} {'seconds':>8} {'budget':>7}")
    for part in PARTS:
        over = "  over its budget" if seconds[part.name] > part.budget else ""
        print(f"{part.name:<28} {tests[part.name]:>6} {seconds[part.name]:>8.0f}"
              f" {part.budget:>7.0f}{over}")  # fmt: skip
    total = sum(seconds.values())
    over = "  over its budget" if wall > WALL_BUDGET else ""
    print(f"{'all, summed over workers':<28} {sum(tests.values()):>6} {total:>8.0f}")
    print(f"{'the runs themselves':<28} {'':>6} {wall:>8.0f} {WALL_BUDGET:>7}{over}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
