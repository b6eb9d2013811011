"""The settings window's rules page, over a real config.toml with rules added as `signoff rule
add` adds them and a real store: each rule said in words, an expired one shown as such, a rule
removed and the change recorded, a removal that fails said in words with nothing lost, and a
grant in force listed and ended."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.settings import SettingsWindow
from core import grants, operator_key, paths
from core.approvals import approve
from core.policy import rules
from core.policy.rules import ArgumentRule, Effect
from core.proxy import config as configuration
from core.proxy import manage
from core.store import Store
from core.tools import SideEffect
from tests.app.pending import HOST, make_pending
from tests.core.hostkit import listing, set_up

NOW = datetime.now(UTC).replace(microsecond=0)


def mail_rules(home: Path) -> dict[str, ArgumentRule]:
    """A mail server with a pinned, classified tool and three rules on it, one expiring in an
    hour."""
    path = paths.config_path()
    set_up(path, "mail", ["true"], listing(["send"]), {"send": SideEffect.REMOTE_MUTATION})
    made = {
        "team": ArgumentRule.make("mail", "send", Effect.ALLOW,
                                  rules.on_arguments([("to", rules.one_of(["a@x", "b@y"]))]),
                                  note="the team"),
        "boss": ArgumentRule.make("mail", "send", Effect.REJECT,
                                  rules.on_arguments([("to", rules.equals("boss@x"))])),
        "soon": ArgumentRule.make("mail", "send", Effect.ALLOW,
                                  rules.on_arguments([("size", rules.at_most(50))]),
                                  expires=NOW + timedelta(hours=1)),
    }  # fmt: skip
    for rule in made.values():
        manage.add_rule(path, rule)
    return made


def open_rules(qtbot, store: Store | None, later: timedelta = timedelta()) -> SettingsWindow:
    window = SettingsWindow(paths.config_path(), store)
    window.rules.clock = lambda: datetime.now(UTC) + later
    qtbot.addWidget(window)
    window.show()
    window.tabs.setCurrentWidget(window.rules)
    return window


def rows(window: SettingsWindow) -> dict[str, list[str]]:
    """Each rule's row as shown, by its id."""
    table = window.rules.rules_table
    found = {}
    for row in range(table.rowCount()):
        cells = [table.item(row, c) for c in range(table.columnCount())]
        found[cells[0].data(Qt.ItemDataRole.UserRole)] = [c.text() for c in cells]
    return found


def changes(store: Store) -> int:
    (count,) = store._conn.execute(
        "SELECT COUNT(*) FROM events WHERE kind = 'policy.changed'"
    ).fetchone()
    return int(count)


def ids_in_file() -> set[str]:
    return {r.id for r in configuration.load(paths.config_path()).rules()}


def test_each_rule_is_listed_in_words_with_its_id_and_condition_in_the_tooltip(
    home: Path, store: Store, qtbot
) -> None:
    made = mail_rules(home)
    window = open_rules(qtbot, store)
    shown = rows(window)
    assert shown[made["team"].id] == [
        "mail", "send", "Always allow", "to is one of a@x, b@y", "never", "the team",
    ]  # fmt: skip
    assert shown[made["boss"].id][2:5] == ["Always reject", "to is boss@x", "never"]
    assert shown[made["soon"].id][3] == "size is at most 50"
    assert shown[made["soon"].id][4].startswith("until ")
    window.rules.select_rule(made["team"].id)
    tip = window.rules.rules_table.selectedItems()[0].toolTip()
    assert made["team"].id in tip and '"enum":["a@x","b@y"]' in tip
    assert window.rules.no_rules.isHidden() and window.rules.remove_button.isEnabled()


def test_an_expired_rule_is_shown_as_expired_and_greyed(home: Path, store: Store, qtbot) -> None:
    made = mail_rules(home)
    window = open_rules(qtbot, store, later=timedelta(hours=2))
    shown = rows(window)
    assert shown[made["soon"].id][4] == "expired"
    assert shown[made["team"].id][4] == "never"
    table = window.rules.rules_table
    colours = {
        table.item(r, 0).data(Qt.ItemDataRole.UserRole): table.item(r, 3).foreground().color()
        for r in range(table.rowCount())
    }
    assert colours[made["soon"].id] != colours[made["team"].id]


def test_no_rule_says_where_rules_are_made_without_a_command(
    home: Path, store: Store, qtbot
) -> None:
    set_up(paths.config_path(), "mail", ["true"], listing(["send"]))
    window = open_rules(qtbot, store)
    page = window.rules
    assert page.rules_table.isHidden() and not page.no_rules.isHidden()
    assert "approval dialog" in page.no_rules.text() and "signoff" not in page.no_rules.text()
    assert not page.remove_button.isEnabled()
    assert not page.no_grants.isHidden() and "signoff" not in page.no_grants.text()


@pytest.mark.guarantee("G-CONFIG-1")
def test_removing_a_rule_takes_it_out_of_the_file_and_records_the_change(
    home: Path, store: Store, qtbot
) -> None:
    made = mail_rules(home)
    window = open_rules(qtbot, store)
    recorded = changes(store)
    window.rules.select_rule(made["boss"].id)
    qtbot.mouseClick(window.rules.remove_button, Qt.MouseButton.LeftButton)
    assert ids_in_file() == {made["team"].id, made["soon"].id}
    assert changes(store) == recorded + 1
    assert set(rows(window)) == {made["team"].id, made["soon"].id}
    assert window.rules.rules_message.text().startswith(f"Removed rule {made['boss'].id}")


@pytest.mark.guarantee("G-CONFIG-1")
def test_a_rule_removed_elsewhere_meanwhile_is_said_in_words_and_nothing_is_lost(
    home: Path, store: Store, qtbot
) -> None:
    made = mail_rules(home)
    window = open_rules(qtbot, store)
    window.rules.select_rule(made["boss"].id)
    manage.remove_rule(paths.config_path(), made["boss"].id)  # as `signoff rule remove` does
    before, recorded = paths.config_path().read_bytes(), changes(store)
    qtbot.mouseClick(window.rules.remove_button, Qt.MouseButton.LeftButton)
    said = window.rules.rules_message.text()
    assert said.startswith(f"Rule {made['boss'].id} (mail/send) was not removed: no rule")
    assert "UnknownRule" not in said and "UnknownRule" in window.rules.rules_message.toolTip()
    assert paths.config_path().read_bytes() == before and changes(store) == recorded
    assert set(rows(window)) == ids_in_file() == {made["team"].id, made["soon"].id}


async def live(store: Store, call: str) -> grants.Grant | None:
    """The grant the identical call of the host that asked runs under now."""
    return (await grants.live(store, operator_key.default(), call, host=HOST[0]))[0]


def test_a_grant_in_force_is_listed_and_ending_it_ends_it(home: Path, store: Store, qtbot) -> None:
    approval = make_pending(store, arguments={"to": "a@x", "n": 7})
    approve(store, approval.run_id, approval.id, "operator:me", "fine for now", scope="1h")
    with store.snapshot() as conn:
        [grant] = grants.listed(conn)
    assert asyncio.run(live(store, grant.call_hash)) == grant
    window = open_rules(qtbot, store)
    page = window.rules
    table = page.grants_table
    assert table.rowCount() == 1 and page.no_grants.isHidden()
    cells = [table.item(0, c).text() for c in range(table.columnCount())]
    shown = approval.request_hash  # the fingerprint the dialog showed when it was approved
    assert cells[:6] == ["srv", "push", '{"n":7,"to":"a@x"}',
                         f"{shown[:4]} {shown[4:8]} {shown[8:12]} {shown[12:16]}",
                         HOST[1], "operator:me"]  # fmt: skip
    assert HOST[1] in table.item(0, 0).toolTip()  # the host whose calls it covers
    assert grant.id in table.item(0, 0).toolTip()
    page.select_grant(grant.id)
    qtbot.mouseClick(page.revoke_button, Qt.MouseButton.LeftButton)
    assert asyncio.run(live(store, grant.call_hash)) is None
    assert table.isHidden() and not page.no_grants.isHidden()
    assert page.grants_message.text().startswith("Ended: srv/push")


def test_the_page_shows_a_rule_added_elsewhere_when_shown_again(
    home: Path, store: Store, qtbot
) -> None:
    made = mail_rules(home)
    window = open_rules(qtbot, store)
    window.tabs.setCurrentWidget(window.policy)
    added = ArgumentRule.make("mail", "send", Effect.REJECT, {})  # as `signoff rule add` adds it
    manage.add_rule(paths.config_path(), added)
    window.tabs.setCurrentWidget(window.rules)
    assert set(rows(window)) == {*(r.id for r in made.values()), added.id}
    assert rows(window)[added.id][3] == "any arguments"
