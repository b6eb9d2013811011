"""The same client script against each real server, directly and through ``signoff proxy``:
every step answers the same, or differs only by the named differences that apply to it
(tests/conformance/differences.py), each of them still occurring; and what the suite observed
is what tests/conformance/observed.json holds (docs/compatibility.md is rendered from it).

One server process per run: the SDK's script runs over a single connection; the Inspector
starts one process per step (its CLI makes one request a run), both sides' at once, four at a
time. When what the suite observes changes on purpose (a work package fixed a difference and
deleted it), ``make compatibility`` runs the suite afresh, keeps what it observed in
observed.json and renders docs/compatibility.md; commit both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conformance import compare, inspector, render, sdk
from tests.conformance.compare import Verdict, cell, first_difference
from tests.conformance.differences import Context
from tests.conformance.script import FEATURES, INSPECTOR, SDK, SDK_AUTO, Step, steps
from tests.conformance.targets import SERVERS, Proxied, Target, build, configure

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("conformance")]  # its servers once

RUNS = [(server, client) for server in SERVERS for client in (SDK, INSPECTOR)] + [
    ("everything", SDK_AUTO)
]
_prepared: dict[str, tuple[Target, Proxied]] = {}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conformance")


def prepared(server: str, base: Path) -> tuple[Target, Proxied]:
    """The target and a Signoff home serving it, made once for the module's runs."""
    if server not in _prepared:
        target = build(server, base / server / "files")
        _prepared[server] = (target, configure(target, base / server))
    return _prepared[server]


def observe(client: str, target: Target, proxied: Proxied, chosen: list[Step], where: Path) -> Any:
    """The steps' observations directly and through the proxy, each run from the same files."""
    where.mkdir(parents=True, exist_ok=True)
    if client == INSPECTOR:
        target.reset()
        return inspector.run(target.server, proxied.command, target, chosen, where)
    auto = client == SDK_AUTO
    target.reset()
    direct = sdk.run(target.server, target, chosen, where / "direct.stderr", auto=auto)
    target.reset()
    through = sdk.run(proxied.command, target, chosen, where / "proxied.stderr", auto=auto)
    return direct, through


def _explain(context: Context, verdict: Verdict) -> str:
    applicable = ", ".join(d.id for d in verdict.applicable) or "none"
    direct, proxied = compare.normalised(verdict.applicable, verdict.direct, verdict.proxied,
                                         context)  # fmt: skip
    return (
        f"{context.server}/{context.client} step {context.step.id}"
        f" ({context.step.feature}): a difference no listed one explains (applicable:"
        f" {applicable}; shown with all of them applied): {first_difference(direct, proxied)}"
    )


@pytest.mark.parametrize(("server", "client"), RUNS, ids=[f"{s}-{c}" for s, c in RUNS])
def test_direct_and_through_the_proxy_differ_only_as_listed(
    server: str, client: str, base: Path
) -> None:
    target, proxied = prepared(server, base)
    chosen = steps(server, client)
    where = base / server / client
    direct, through = observe(client, target, proxied, chosen, where)

    verdicts: dict[str, Verdict] = {}
    for step in chosen:
        context = Context(server, client, step)
        verdicts[step.id] = compare.compare(context, direct[step.id], through[step.id])
    unexplained = [
        _explain(Context(server, client, s), verdicts[s.id])
        for s in chosen
        if not verdicts[s.id].explained
    ]
    assert not unexplained, "\n".join(unexplained)

    applicable = {d.id for v in verdicts.values() for d in v.applicable}
    needed = {d.id for v in verdicts.values() for d in v.needed or []}
    stale = sorted(applicable - needed)
    assert not stale, (
        f"listed differences that no longer occur on {server}/{client}: {stale}; delete them"
        " from tests/conformance/differences.py (or narrow where they apply)"
    )

    cells = {f: cell([verdicts[s.id] for s in chosen if s.feature == f]) for f in FEATURES}
    if os.environ.get(render.WRITE_VARIABLE):
        render.keep(server, client, cells)
        return
    kept = render.column(server, client)
    changed = {f: (kept.get(f), cells[f]) for f in FEATURES if kept.get(f) != cells[f]}
    assert not changed, (
        f"{server}/{client} now observes, by feature, (observed.json, now): {changed}; run"
        f" {render.COMMAND} and commit tests/conformance/observed.json and docs/compatibility.md"
    )
