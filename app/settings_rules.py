"""The rules page: the rules on tools' arguments in config.toml (core/policy/rules.py), each said in
words and removable, and the standing grants in force (core/grants.py), each revocable and
each naming the host whose identical calls it covers (core/grants.py rule 8).

A rule is removed as ``signoff rule remove`` removes it (``manage.remove_rule`` through
``SettingsState``, so the change is recorded as ``policy.changed``); a grant is ended as
``signoff grants revoke`` ends it (``grants.revoke``). Neither asks "are you sure?": removing
a rule or ending a grant only takes away, and the next such request asks again.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.settings import SettingsState, say, say_not_saved
from app.widgets import message_label, row_table
from app.words import said
from core import canonical, grants, present
from core.errors import SignoffError
from core.grants import Grant
from core.policy import rules
from core.policy.rules import ArgumentRule
from core.proxy import manage
from core.store import utc_now

RULE_COLUMNS = ("Server", "Tool", "Rule", "When", "Expires", "Note")
GRANT_COLUMNS = ("Server", "Tool", "Arguments", "Fingerprint", "From", "Approved by", "Until")
ARGUMENTS_SHOWN = 80  # characters of a grant's arguments in its cell; the tooltip has them all
NO_RULES = (
    "No rules yet. When a request waits for your approval, the approval dialog offers"
    ' "Always allow…" and "Always reject…": a rule made there is listed here.'
)
NO_GRANTS = (
    "Nothing is approved for a while. When you approve a request, the approval dialog can"
    " approve that exact request for 15 minutes, an hour or until Signoff quits; it is"
    " listed here until then."
)
NO_STORE = "The history's database is not open in this window, so grants cannot be shown."
EXPIRED_COLOUR = Qt.GlobalColor.gray


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def _local_text(text: str) -> str:
    try:
        return _local(datetime.fromisoformat(text))
    except ValueError:
        return text


class RulesPage(QWidget):
    def __init__(self, state: SettingsState, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__()
        self.state = state
        self.clock = clock or (lambda: datetime.now(UTC))
        self.shown_rules: list[ArgumentRule] = []
        self.shown_grants: list[Grant] = []
        layout = QVBoxLayout(self)

        box = QGroupBox("Rules")
        inner = QVBoxLayout(box)
        about = QLabel(
            "Each rule always allows or always rejects a tool's requests whose arguments match"
            " its condition. A request no rule matches asks you as before."
        )
        about.setWordWrap(True)
        inner.addWidget(about)
        self.rules_table = self._table(RULE_COLUMNS, stretch=(3, 5))
        self.rules_table.itemSelectionChanged.connect(self._selected)
        inner.addWidget(self.rules_table, 1)
        self.no_rules = QLabel(NO_RULES)
        self.no_rules.setWordWrap(True)
        inner.addWidget(self.no_rules)
        row = QHBoxLayout()
        self.remove_button = QPushButton("Remove rule")
        self.remove_button.setToolTip("Remove the selected rule; its requests ask you again")
        self.remove_button.clicked.connect(self.remove_selected)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        inner.addLayout(row)
        self.rules_message = message_label()
        inner.addWidget(self.rules_message)
        layout.addWidget(box, 3)

        box = QGroupBox("Approved for a while")
        inner = QVBoxLayout(box)
        about = QLabel(
            "Each exact request you approved for a while runs without asking until then. End"
            " one now and the next such request asks you again."
        )
        about.setWordWrap(True)
        inner.addWidget(about)
        self.grants_table = self._table(GRANT_COLUMNS, stretch=(2,))
        self.grants_table.itemSelectionChanged.connect(self._selected)
        inner.addWidget(self.grants_table, 1)
        self.no_grants = QLabel(NO_GRANTS if state.store is not None else NO_STORE)
        self.no_grants.setWordWrap(True)
        inner.addWidget(self.no_grants)
        row = QHBoxLayout()
        self.revoke_button = QPushButton("End now")
        self.revoke_button.setToolTip(
            "End the selected approval now: the next identical request asks you again"
        )
        self.revoke_button.clicked.connect(self.revoke_selected)
        row.addWidget(self.revoke_button)
        row.addStretch(1)
        inner.addLayout(row)
        self.grants_message = message_label()
        inner.addWidget(self.grants_message)
        layout.addWidget(box, 2)

        state.changed.connect(self.refresh)
        self.refresh()

    @staticmethod
    def _table(columns: tuple[str, ...], stretch: tuple[int, ...]) -> QTableWidget:
        """Each column as wide as its text, but those of ``stretch`` (free text, cut to the
        room left: the tooltip has it whole)."""
        table = row_table(columns)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        for column in stretch:
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        return table

    def showEvent(self, event: Any) -> None:
        """Shown again: the file and the grants as they are now (the terminal may have changed
        them, and grants end by themselves)."""
        self.state.reload()
        self.refresh()
        super().showEvent(event)

    # --- showing ------------------------------------------------------------------------

    def refresh(self) -> None:
        self._show_rules()
        self._show_grants()
        self._selected()

    def _show_rules(self) -> None:
        now = self.clock()
        chosen = self.selected_rule()
        found = sorted(self.state.config.rules(), key=lambda r: (r.server, r.tool, r.id))
        self.shown_rules = found
        table = self.rules_table
        table.setRowCount(len(found))
        for i, rule in enumerate(found):
            expired = rule.expired(now)
            tip = (
                f"rule {rule.id}; its condition (a JSON Schema over the arguments):"
                f" {canonical.dumps_text(rule.when)}"
            )
            cells = (
                rule.server,
                rule.tool,
                rules.EFFECT_WORDS[rule.effect],
                rules.words(rule),
                rules.expiry_words(rule, now, _local),
                rule.note,
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                if expired:
                    item.setForeground(EXPIRED_COLOUR)
                    item.setToolTip(f"{tip}\nExpired: it decides nothing any more.")
                item.setData(Qt.ItemDataRole.UserRole, rule.id)
                table.setItem(i, column, item)
        self.rules_table.setVisible(bool(found))
        self.no_rules.setVisible(not found)
        if chosen is not None and chosen.id in [r.id for r in found]:
            table.selectRow([r.id for r in found].index(chosen.id))

    def _show_grants(self) -> None:
        store = self.state.store
        if store is None:
            self.shown_grants = []
            self.grants_table.setVisible(False)
            self.no_grants.setVisible(True)
            return
        with store.snapshot() as conn:
            found = grants.listed(conn, now=utc_now())
            # What was approved: the call's arguments, and the request hash whose fingerprint
            # the dialog and the notification showed (the call hash is for the tooltip).
            approved = {
                g.id: conn.execute(
                    "SELECT s.arguments, a.request_hash FROM steps s JOIN approvals a"
                    " ON a.id = ? WHERE s.run_id = ? AND s.idx = ?",
                    (g.approval_id, g.run_id, g.step),
                ).fetchone()
                for g in found
            }
        self.shown_grants = found
        table = self.grants_table
        table.setRowCount(len(found))
        for i, grant in enumerate(found):
            row = approved.get(grant.id)
            text = str(row[0]) if row and row[0] is not None else "?"
            request_hash = str(row[1]) if row and row[1] else ""
            cut = text if len(text) <= ARGUMENTS_SHOWN else text[: ARGUMENTS_SHOWN - 1] + "…"
            scope = grants.SCOPE_WORDS.get(grant.scope, grant.scope)
            tip = (
                f"grant {grant.id}, approved {scope} at {grant.at} for the calls of"
                f" {grant.host_label or 'no host'}; arguments: {text};"
                f" request hash {request_hash or '?'}; call hash {grant.call_hash}"
            )
            cells = (
                grant.server or "(library)",
                grant.tool,
                cut,
                present.fingerprint(request_hash) if request_hash else "?",
                grant.host_label or "(no host)",
                grant.by,
                _local_text(grant.until),
            )
            for column, cell in enumerate(cells):
                item = QTableWidgetItem(cell)
                item.setToolTip(tip)
                table.setItem(i, column, item)
        table.setVisible(bool(found))
        self.no_grants.setVisible(not found)

    def _selected(self) -> None:
        self.remove_button.setEnabled(self.selected_rule() is not None)
        self.revoke_button.setEnabled(self.selected_grant() is not None)

    def selected_rule(self) -> ArgumentRule | None:
        rows = self.rules_table.selectionModel().selectedRows()
        if not rows or not 0 <= rows[0].row() < len(self.shown_rules):
            return None
        return self.shown_rules[rows[0].row()]

    def selected_grant(self) -> Grant | None:
        rows = self.grants_table.selectionModel().selectedRows()
        if not rows or not 0 <= rows[0].row() < len(self.shown_grants):
            return None
        return self.shown_grants[rows[0].row()]

    def select_rule(self, rule_id: str) -> None:
        self.rules_table.selectRow([r.id for r in self.shown_rules].index(rule_id))

    def select_grant(self, grant_id: str) -> None:
        self.grants_table.selectRow([g.id for g in self.shown_grants].index(grant_id))

    # --- changing -----------------------------------------------------------------------

    def remove_selected(self) -> str:
        """Remove the selected rule, recorded as a change of the rules; "" when removed, else
        what refused it (and nothing changed)."""
        rule = self.selected_rule()
        if rule is None:
            return ""
        problem = self.state.save(lambda p: manage.remove_rule(p, rule.id))
        if problem is not None and not problem.saved:
            self.state.reload()  # as the file is now: another change may have removed it
            self.refresh()
            say_not_saved(self.rules_message, problem)
            self.rules_message.setText(
                f"Rule {rule.id} ({rule.server}/{rule.tool}) was not removed: {problem.words}."
            )
            return problem.words
        if problem is not None:
            say_not_saved(self.rules_message, problem)
            return ""
        say(
            self.rules_message,
            f"Removed rule {rule.id} ({rule.server}/{rule.tool}); the change is recorded in"
            " the history.",
        )
        return ""

    def revoke_selected(self) -> str:
        """End the selected grant now; "" when ended, else why not."""
        grant = self.selected_grant()
        store = self.state.store
        if grant is None or store is None:
            return ""
        try:
            grants.revoke(store, grant.id, by=f"operator:{getpass.getuser()}")
        except SignoffError as e:
            words = said(e)
            self.refresh()
            self.grants_message.setText(f"Not ended: {words}.")
            self.grants_message.setToolTip(f"{words} ({type(e).__name__})")
            self.grants_message.setStyleSheet("color: #b00020;")
            return words
        self.refresh()
        say(
            self.grants_message,
            f"Ended: {grant.server}/{grant.tool} with those arguments asks you again.",
        )
        return ""
