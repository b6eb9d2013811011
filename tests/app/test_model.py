"""The app's model, without Qt."""

from __future__ import annotations

from pathlib import Path

from app.model import AppModel
from core.store import Store
from tests.app.pending import make_pending


def test_pending_approvals_carry_what_the_notification_shows(store: Store, home: Path) -> None:
    approval = make_pending(store, tool="write", arguments={"path": "/tmp/x", "n": 3})
    model = AppModel(store, home / "notified.json")
    [fresh] = model.refresh()
    assert (fresh.id, fresh.server, fresh.tool, fresh.side_effect) == (
        approval.id, "srv", "write", "local_mutation",
    )  # fmt: skip
    assert fresh.arguments == '{"n":3,"path":"/tmp/x"}'
    assert fresh.fingerprint.replace(" ", "") == approval.request_hash[:16]
    assert model.refresh() == []
    assert model.state == "pending"


def test_kinds_that_need_the_dialog(store: Store, home: Path) -> None:
    make_pending(store, tool="delete")
    [p] = AppModel(store, home / "notified.json").refresh()
    assert p.needs_dialog
