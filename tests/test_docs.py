"""The documentation says what the code does: claims have tests, commands are documented."""

from __future__ import annotations

import ast
import re

from core.cli import build_parser
from tests.conftest import ROOT
from tests.mutants import MUTATIONS, by_guarantee

GUARANTEE_ID = re.compile(r"\bG-[A-Z]+-\d+\b")
MARKED = re.compile(r'guarantee\("(G-[A-Z]+-\d+)"\)')
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _listed() -> set[str]:
    table = (ROOT / "docs" / "guarantees.md").read_text()
    return set(re.findall(r"^\| (G-[A-Z]+-\d+) \|", table, flags=re.M))


def _marked_in_tests() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        found.update(MARKED.findall(path.read_text()))
    return found


def test_every_listed_guarantee_has_a_test() -> None:
    missing = _listed() - _marked_in_tests()
    assert not missing, f"claims with no test: {sorted(missing)}"


def test_every_guarantee_a_test_names_is_listed() -> None:
    unknown = _marked_in_tests() - _listed()
    assert not unknown, f"tests name claims docs/guarantees.md does not list: {sorted(unknown)}"


def test_every_listed_guarantee_has_a_mutation_its_tests_must_catch() -> None:
    missing = _listed() - set(by_guarantee())
    assert not missing, f"claims with no mutation in tests/mutants: {sorted(missing)}"
    unknown = set(by_guarantee()) - _listed()
    assert not unknown, f"mutations of claims docs/guarantees.md does not list: {sorted(unknown)}"


def _marks(node_id: str) -> set[str]:
    """The claims a test is marked with: its function's decorators, its class's, its module's
    ``pytestmark`` (a mark on one parameter counts for the test)."""
    file, *names = node_id.split("::")
    source = (ROOT / file).read_text()
    found: set[str] = set()
    scope: list[ast.stmt] = ast.parse(source).body
    for statement in scope:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in statement.targets
        ):
            found.update(MARKED.findall(ast.get_source_segment(source, statement) or ""))
    for name in names:
        name = name.split("[")[0]
        named = [n for n in scope if isinstance(n, DEFINITIONS) and n.name == name]
        assert len(named) == 1, f"{node_id}: no {name} in {file}"
        node = named[0]
        for decorator in node.decorator_list:
            found.update(MARKED.findall(ast.get_source_segment(source, decorator) or ""))
        scope = node.body
    return found


def test_every_mutation_is_caught_by_a_test_marked_with_its_claim() -> None:
    """A caught_by that is not marked never runs in its claim's run (``--guarantee``): the
    mutation would be judged by whatever else fails, or survive."""
    listed = _listed()
    unmarked = [
        f"{m.name!r}: {m.caught_by} is not marked with {m.guarantee}"
        for m in MUTATIONS
        if m.guarantee in listed and m.guarantee not in _marks(m.caught_by)
    ]
    assert not unmarked, unmarked
    assert all(m.guarantee in listed for m in MUTATIONS)


def test_every_guarantee_the_readme_states_is_listed() -> None:
    stated = set(GUARANTEE_ID.findall((ROOT / "README.md").read_text()))
    assert stated, "the README states no guarantee ids"
    assert stated <= _listed()


def test_every_command_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        assert f"`signoff {name}" in readme, f"signoff {name} is not documented in the README"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme
    assert re.search(r"^make test$", ci, flags=re.M)


def test_every_decision_record_is_indexed() -> None:
    decisions = ROOT / "docs" / "decisions"
    index = (decisions / "README.md").read_text()
    for record in sorted(decisions.glob("[0-9][0-9][0-9][0-9]-*.md")):
        assert record.name in index, f"{record.name} is missing from docs/decisions/README.md"


def test_the_compatibility_page_is_the_render_of_what_the_suite_observed() -> None:
    from tests.conformance import render

    page = (ROOT / "docs" / "compatibility.md").read_text()
    assert page == render.render(), (
        "docs/compatibility.md is not the render of tests/conformance/observed.json; run"
        " make compatibility"
    )


def test_every_listed_difference_is_observed_and_every_observed_one_listed() -> None:
    """A difference no run needs any more is stale; one observed must be named, with a reason."""
    from tests.conformance import render
    from tests.conformance.differences import DIFFERENCES

    observed = {
        i
        for servers in render.load()["features"].values()
        for clients in servers.values()
        for value in clients.values()
        if isinstance(value, list)
        for i in value
    }
    listed = {d.id for d in DIFFERENCES}
    assert not listed - observed, f"listed, observed nowhere (stale): {sorted(listed - observed)}"
    assert not observed - listed, f"observed, not listed: {sorted(observed - listed)}"


def test_the_readme_gate_example_runs_as_written(tmp_path, monkeypatch, capsys) -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"## Using the gate from your own loop.*?```python\n(.*?)```", readme, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README.md", "exec"), {})  # noqa: S102  # our own README
    assert capsys.readouterr().out == "pushed 7\n"
