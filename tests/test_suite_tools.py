"""The suite's own tools: which tests a change touches (tests/touched.py, ``make quick``), and
where a run's time went (tests/suite_time.py, printed by ``make test``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest, suite_time, touched
from tests.conftest import ROOT


def test_a_module_brings_its_packages_tests_that_import_it_and_those_named_after_it() -> None:
    found = touched.tests_for(["core/canonical.py"])
    assert "tests/core/test_canonical.py" in found  # named after it (and imports it)
    importers = {
        str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
        if touched.imports(p.read_text(), "core.canonical")
    }  # fmt: skip
    ours = {t for t in importers if t.startswith("tests/core/")}
    assert ours and ours <= set(found)
    assert importers - ours and not (importers - ours) & set(found)  # other packages' tests wait
    assert touched.tests_for(["core/proxy/server.py"]) == sorted(
        t for t in touched.tests_for(["core/proxy/server.py"]) if t.startswith("tests/proxy/")
    )
    assert "tests/test_suite_tools.py" in touched.tests_for(["tests/touched.py"])


def test_each_way_of_importing_a_module_counts_and_a_longer_name_does_not() -> None:
    for source in ("import core.store\n", "from core.store import Store\n",
                   "from core import store\n", "from core import (\n    errors,\n    store,\n)\n",
                   "    from core.store import Store  # lazily\n"):  # fmt: skip
        assert touched.imports(source, "core.store"), source
    for source in ("from core import store_x\n", "import core.stores\n", "# core.store\n"):
        assert not touched.imports(source, "core.store"), source


def test_a_test_file_brings_itself_and_the_docs_bring_their_checks() -> None:
    assert touched.tests_for(["tests/core/test_store.py", "README.md", "docs/x.md"]) == [
        "tests/core/test_store.py", "tests/test_docs.py"
    ]  # fmt: skip
    assert touched.tests_for(["tests/core/test_gone.py", "pyproject.toml"]) == []


def test_the_time_of_a_run_is_summed_per_part_from_pytests_own_report(tmp_path: Path) -> None:
    tests = tmp_path / "tests" / "core"
    tests.mkdir(parents=True)
    (tests / "test_one.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(tmp_path), "-c", "/dev/null", f"--junit-xml={report}", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    seconds, counts, wall = suite_time.read(report)
    assert counts["core"] == 2 and sum(counts.values()) == 2
    assert wall > 0 and 0 <= seconds["core"] <= wall
    shown = subprocess.run(
        [sys.executable, "-m", "tests.suite_time", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "core" in shown and "the runs themselves" in shown


def test_a_missing_system_part_fails_in_ci_and_never_counts_as_a_claim_seen_broken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In CI `need` fails the test (no skip), with an error that is not an assertion: a
    mutation's run reads such a failure as saying nothing of the claim."""
    sys.path.insert(0, str(ROOT / "tests/mutants/plugin"))
    try:
        from mutation_outcomes import _assertion
    finally:
        sys.path.remove(str(ROOT / "tests/mutants/plugin"))
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(conftest.MissingSystemPart) as raised:
        conftest.need(False, "Xvfb")
    assert not _assertion(raised.value)
    assert _assertion(AssertionError("a claim seen broken"))
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception):
        conftest.need(False, "Xvfb")
