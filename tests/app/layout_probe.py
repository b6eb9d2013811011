"""Every window, page and dialog of the app, opened at its default size over long, realistic
data, in a process of its own, for tests/app/test_layout.py.

    python -m tests.app.layout_probe [--no-tray]

The screen's size and scale belong to the process (the offscreen platform's ``configfile``,
``QT_SCALE_FACTOR``), so each screen is a process. ``SIGNOFF_HOME`` must name an empty private
folder. Prints one JSON object: ``problems``, each a line saying what is clipped, elided or
out of sight and where, and ``seen``, the names of the windows looked at.

What counts as a problem:

1. A label, button or check box whose text needs more room than it has: without word wrap,
   its size hint wider or taller than it is; with word wrap, more height for its width than
   it has. An empty line edit whose hint (placeholder) is cut.
2. A table column that must be read whole (``WHOLE``: time, state, class...) narrower than
   its header or its content needs on one line (unless the table wraps its cells and gave
   each row the height it needs), or lying past the table's right edge; any column's header
   cut.
3. A widget lying outside its parent (widgets scrolled inside a scroll area excepted), a
   scroll area of widgets scrolling sideways or with a widget reaching past its right edge
   (under its scroll bar), a window larger than the screen, a menu wider than the screen.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QDeadlineTimer
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QCheckBox,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QScrollArea,
    QTableView,
    QWidget,
)

# Columns read whole wherever a table has them: a state or a time cut short misleads.
WHOLE = {"Time", "Class", "Outcome", "Duration", "Tools", "Needs you", "Pin", "Offered to hosts",
         "What happens", "Rule", "Expires", "Until"}  # fmt: skip
FRAME = 40  # room left on the screen for a window manager's title bar

LONG_SERVER = "github-enterprise-mirror"
LONG_TOOL = "create_or_update_file_contents_in_repository_branch"
LONG_COMMAND = "/home/operator/.local/share/nvm/versions/node/v22.11.0/bin/npx"
LONG_ARGS = ["-y", "@modelcontextprotocol/server-github@2025.4.8", "--toolsets",
             "repos,issues,pull_requests,actions,code_security"]  # fmt: skip
LONG_ERROR = (
    "the server exited before it listed its tools: npm error 404 Not Found - GET"
    " https://registry.npmjs.org/@modelcontextprotocol%2fserver-githubb - Not found; the"
    " package '@modelcontextprotocol/server-githubb@*' is not in this registry"
)


def settle(until: Callable[[], bool] = lambda: True, ms: int = 20_000) -> None:
    """Process events until ``until()`` holds (and a few rounds more), or fail."""
    deadline = QDeadlineTimer(ms)
    while not until():
        if deadline.hasExpired():
            raise SystemExit(f"timed out waiting for {until}")
        QCoreApplication.processEvents()
    for _ in range(20):
        QCoreApplication.processEvents()


def _where(widget: QWidget, window: QWidget) -> str:
    names = []
    at: QWidget | None = widget
    while at is not None and at is not window:
        names.append(at.objectName() or type(at).__name__)
        at = at.parentWidget()
    return "/".join(reversed(names))


def _scrolled(widget: QWidget) -> bool:
    """Whether ``widget`` sits inside a scroll area's viewport (it may lie outside it)."""
    parent = widget.parentWidget()
    while parent is not None:
        outer = parent.parentWidget()
        if isinstance(outer, QAbstractScrollArea) and outer.viewport() is parent:
            return True
        parent = outer
    return False


def text_problems(window: QWidget, name: str) -> list[str]:
    found = []
    for widget in window.findChildren(QWidget):
        if not widget.isVisibleTo(window) or widget.width() <= 0:
            continue
        if isinstance(widget, QLabel) and widget.text() and not widget.pixmap():
            shown = widget.text().replace("\n", " ")[:60]
            if widget.wordWrap():
                need = widget.heightForWidth(widget.width())
                if need > widget.height():
                    found.append(f"{name}: label {shown!r} needs {need} px of height, has"
                                 f" {widget.height()} ({_where(widget, window)})")  # fmt: skip
                if widget.minimumSizeHint().width() > widget.width():
                    found.append(f"{name}: label {shown!r} has a word wider than its"
                                 f" {widget.width()} px ({_where(widget, window)})")  # fmt: skip
            else:
                hint = widget.sizeHint()
                if hint.width() > widget.width() or hint.height() > widget.height():
                    found.append(f"{name}: label {shown!r} needs {hint.width()}x{hint.height()},"
                                 f" has {widget.width()}x{widget.height()}"
                                 f" ({_where(widget, window)})")  # fmt: skip
        elif isinstance(widget, QLineEdit) and not widget.text() and widget.placeholderText():
            need = widget.fontMetrics().horizontalAdvance(widget.placeholderText())
            room = widget.width() - 12  # the frame and the text margins
            if need > room:
                found.append(f"{name}: the hint {widget.placeholderText()!r} needs {need} px,"
                             f" has {room} ({_where(widget, window)})")  # fmt: skip
        elif isinstance(widget, QPushButton | QCheckBox) and widget.text():
            hint = widget.sizeHint()
            if hint.width() > widget.width():
                found.append(f"{name}: button {widget.text()!r} needs {hint.width()} px, has"
                             f" {widget.width()} ({_where(widget, window)})")  # fmt: skip
    return found


def _wrapped_whole(table: QTableView) -> bool:
    """Whether a table that wraps its cells gave every row the height its wrapped text needs
    (then a cell narrower than its text on one line is still read whole)."""
    rows = table.model().rowCount()
    return table.wordWrap() and all(
        table.rowHeight(r) >= table.sizeHintForRow(r) for r in range(rows)
    )


def table_problems(window: QWidget, name: str) -> list[str]:
    found = []
    for table in window.findChildren(QTableView):
        if not table.isVisibleTo(window) or table.model() is None:
            continue
        header = table.horizontalHeader()
        room = table.viewport().width()
        for column in range(table.model().columnCount()):
            if table.isColumnHidden(column):
                continue
            title = str(table.model().headerData(column, header.orientation()))
            width = table.columnWidth(column)
            if header.sectionSizeHint(column) > width:
                found.append(f"{name}: column {title!r} header needs"
                             f" {header.sectionSizeHint(column)} px, has {width}")  # fmt: skip
            if title not in WHOLE:
                continue
            content = table.sizeHintForColumn(column)
            if content > width and not _wrapped_whole(table):
                found.append(f"{name}: column {title!r} is elided: its content needs {content}"
                             f" px, it has {width}")  # fmt: skip
            right = table.columnViewportPosition(column) + width
            if right > room:
                found.append(f"{name}: column {title!r} ends at {right} px, past the table's"
                             f" {room} px")  # fmt: skip
    return found


def placement_problems(window: QWidget, name: str) -> list[str]:
    found = []
    screen = window.screen().availableGeometry()
    if window.width() > screen.width() or window.height() + FRAME > screen.height():
        found.append(f"{name}: the window is {window.width()}x{window.height()}, the screen"
                     f" {screen.width()}x{screen.height()}")  # fmt: skip
    for widget in window.findChildren(QWidget):
        parent = widget.parentWidget()
        if parent is None or widget.isWindow() or not widget.isVisibleTo(window):
            continue
        if _scrolled(widget) or isinstance(widget, QMenu):
            continue
        if not parent.rect().contains(widget.geometry()):
            g = widget.geometry()
            found.append(f"{name}: {_where(widget, window)} lies at {g.x()},{g.y()}"
                         f" {g.width()}x{g.height()}, outside its parent's"
                         f" {parent.width()}x{parent.height()}")  # fmt: skip
    for area in window.findChildren(QScrollArea):
        inner = area.widget()
        if not area.isVisibleTo(window) or inner is None:
            continue
        if area.horizontalScrollBar().isVisible() or inner.width() > area.viewport().width():
            found.append(f"{name}: {_where(area, window)} is {inner.width()} px wide, shown in"
                         f" {area.viewport().width()}: it runs off sideways")  # fmt: skip
        found += _past_the_right_edge(area, window, name)
    return found


def _past_the_right_edge(area: QScrollArea, window: QWidget, name: str) -> list[str]:
    """Widgets in a scroll area reaching past its right edge (under its scroll bar, or out of
    sight), each said once: where its parent still ends in sight."""
    viewport = area.viewport()
    room = viewport.width()

    def right(widget: QWidget) -> int:
        return widget.mapTo(viewport, widget.rect().topRight()).x() + 1

    found = []
    inner = area.widget()
    for widget in inner.findChildren(QWidget):
        if widget.isWindow() or not widget.isVisibleTo(window):
            continue
        parent = widget.parentWidget()
        if right(widget) > room and (parent is inner or right(parent) <= room):
            found.append(f"{name}: {_where(widget, window)} ends at {right(widget)} px, past"
                         f" the {room} px its scroll area shows: it runs off sideways")  # fmt: skip
    return found


def _catalog() -> list[tuple[str, Any]]:
    """Prompts and a template as a server would list them, for Settings → Prompts."""
    from core.proxy import catalog

    prompts = [{"name": "summarise_the_pull_requests_of_a_repository_since_a_date",
                "description": CHANGED_DESCRIPTION, "arguments": [{"name": "since"}]},
               {"name": "review"}]  # fmt: skip
    templates = [{"uriTemplate": "github://{owner}/{repository}/blob/{branch}/{path}",
                  "name": "file"}]  # fmt: skip
    found: list[tuple[str, Any]] = []
    for table, kind, member, items in (("prompt_pins", catalog.PROMPTS, "prompts", prompts),
                                       ("template_pins", catalog.TEMPLATES,
                                        "resourceTemplates", templates)):  # fmt: skip
        page = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {member: items}}).encode()
        found += [(table, item) for item in catalog.read([page], kind).items]
    return found


def check(window: QWidget, name: str) -> list[str]:
    settle()
    return (text_problems(window, name) + table_problems(window, name)
            + placement_problems(window, name))  # fmt: skip


def menu_problems(menu: QMenu, name: str) -> list[str]:
    screen = menu.screen().availableGeometry()
    hint = menu.sizeHint()
    if hint.width() > screen.width():
        return [f"{name}: the menu is {hint.width()} px wide, the screen {screen.width()}"]
    return []


# --- the data --------------------------------------------------------------------------------


def _listing(tools: Iterable[dict[str, Any]]) -> Any:
    from core.proxy.pins import read_listing

    page = {"jsonrpc": "2.0", "id": 2, "result": {"tools": list(tools)}}
    return read_listing([json.dumps(page).encode()])


TOOLS = [
    {"name": LONG_TOOL, "description": "Creates or updates a single file in a repository"
     " branch, committing it with the message given.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"},
                                                      "content": {"type": "string"}}}},
    {"name": "search_repositories_by_topic_and_language", "description": "Searches.",
     "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}},
    {"name": "delete_branch_and_close_its_pull_requests", "description": "Deletes a branch"
     " and closes every pull request opened from it; see https://docs.github.com/en/rest/git/"
     "refs?apiVersion=2022-11-28#delete-a-reference for what the server is allowed to remove.",
     "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"destructiveHint": True}},
    {"name": "list_issues", "description": "Lists issues.",
     "inputSchema": {"type": "object", "properties": {}}},
]  # fmt: skip
# The first tool as it was pinned: listed now with a longer description, it is "changed".
PINNED_BEFORE = [{**TOOLS[0], "description": "Creates or updates a file."}, *TOOLS[1:]]
CHANGED_DESCRIPTION = (
    "Creates or updates a single file in a repository branch, committing it with the message"
    " given; when the branch does not exist it is created from the default branch first, and"
    " every file under .github/workflows/ is also re-read so that the repository's automation"
    " sees the new contents: https://docs.github.com/en/rest/repos/contents?apiVersion=2022-11-"
    "28#create-or-update-file-contents-with-a-very-long-anchor-that-never-breaks"
)


def record_history(store: Any) -> None:
    """Runs as a proxy records them: long names, every class, and a request waiting."""
    from core.decisions import Decision
    from core.tools import SideEffect, Tool
    from core.transitions import CallLabel
    from tests.app.pending import make_pending
    from tests.core.gatekit import make_gate

    tools = [Tool(LONG_TOOL, "Creates or updates a file.", {"type": "object"},
                  SideEffect.READ_ONLY, lambda args: "done")]  # fmt: skip
    gate = make_gate(store, tools)
    for n in range(3):
        label = CallLabel(LONG_SERVER, LONG_TOOL, "r" * 64, "h" * 64, "claude-desktop 0.9.3")
        session = gate.begin(f"run-{n}", "goal", call=label)
        step = session.step()
        assert step is not None
        step.propose(Decision.tool_call(LONG_TOOL, {"path": "docs/a-long-file-name.md"}))
        asyncio.run(step.execute())
        session.close()
    make_pending(store, tool="push", arguments={"branch": "release/2026-12-maintenance",
                                                "force": False})  # fmt: skip


def write_host_file(folder: Path) -> Path:
    path = folder / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    servers = {
        LONG_SERVER: {"command": LONG_COMMAND, "args": LONG_ARGS,
                      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "<your token>"}},
        "remote-knowledge-base": {"url": "https://mcp.example.com/knowledge-base/v1/mcp"},
    }  # fmt: skip
    path.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
    return path


def add_rules(config: Path) -> None:
    """Rules on the long tool: a long folder, a long note, an expiry."""
    from datetime import UTC, datetime, timedelta

    from core.policy import rules
    from core.proxy import manage

    folder = "/home/operator/src/github.com/example-organisation/a-repository-with-a-long-name"
    made = [
        rules.ArgumentRule.make(
            LONG_SERVER, LONG_TOOL, rules.Effect.ALLOW,
            rules.on_arguments([("path", rules.under_folder(folder)),
                                ("content", rules.pattern("^[^\\x00]{0,4000}$"))]),
            expires=datetime.now(UTC).replace(microsecond=0) + timedelta(days=7),
            note="the documentation folder of the mirror, while the migration to the new"
                 " organisation lasts",
        ),
        rules.ArgumentRule.make(LONG_SERVER, LONG_TOOL, rules.Effect.REJECT,
                                {"type": "object", "required": ["force"]}),
    ]  # fmt: skip
    for rule in made:
        manage.add_rule(config, rule)


# --- the windows ----------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    app = QApplication(["layout-probe"])
    from app.dialog import ApprovalDialog
    from app.history import HistoryWindow
    from app.model import read_pending
    from app.settings import SettingsWindow
    from core import paths
    from core.heads import MemoryHeadStore
    from core.proxy import manage
    from core.store import Store

    home = Path(os.environ["SIGNOFF_HOME"])
    config = paths.config_path()
    problems: list[str] = []
    seen: list[str] = []

    def look(window: QWidget, name: str) -> None:
        seen.append(name)
        problems.extend(check(window, name))

    manage.add_server(config, LONG_SERVER, LONG_COMMAND, LONG_ARGS,
                      ["GITHUB_PERSONAL_ACCESS_TOKEN"])  # fmt: skip
    manage.add_server(config, "notes", sys.executable, ["-m", "core.demo.server", "notes.txt"])
    manage.set_tool(config, LONG_SERVER, "search_repositories_by_topic_and_language",
                    side_effect="read_only")  # fmt: skip
    manage.set_tool(config, LONG_SERVER, "delete_branch_and_close_its_pull_requests",
                    side_effect="read_only")  # a conflict with its destructiveHint  # fmt: skip
    # Pinned as listed before: the first tool is changed since, the destructive one classed
    # "read only" shows its conflict.
    manage.pin(config, LONG_SERVER, _listing(PINNED_BEFORE).tools)
    add_rules(config)

    with Store.open(paths.database_path()) as store:
        record_history(store)

        history = HistoryWindow(store, MemoryHeadStore(), config)
        history.show()
        settle(lambda: not history.verifying)
        history.table.selectRow(0)
        look(history, "History")

        [pending] = read_pending(store)
        dialog = ApprovalDialog(pending, config_path=config, store=store)  # with "Always…"
        dialog.show()
        look(dialog, "Approval dialog")
        rules = dialog.open_rule_editor()
        rules.choose("branch", "pattern")  # type: ignore[attr-defined]  # its widest row
        rules.details_button.setChecked(True)  # type: ignore[attr-defined]
        look(rules, "Rule editor")
        rules.close()
        dialog.close()

        settings = SettingsWindow(config, store)
        now = [{**TOOLS[0], "description": CHANGED_DESCRIPTION}, *TOOLS[1:]]
        settings.state.listings[LONG_SERVER] = _listing(now)
        settings.state.errors["notes"] = LONG_ERROR
        settings.state.changed.emit()
        settings.show()
        pages = ((settings.servers, "Servers"), (settings.tools, "Tools"),
                 (settings.catalog, "Prompts"), (settings.policy, "Policy"),
                 (settings.rules, "Rules"), (settings.hosts, "MCP hosts"))  # fmt: skip
        for page, title in pages:
            settings.tabs.setCurrentWidget(page)
            if page is settings.tools:
                settings.tools.select_server(LONG_SERVER)
                settings.tools.select_tool(LONG_TOOL)  # changed, with a long description
                problems.extend(check(settings, "Settings, Tools"))
                settings.tools.select_tool("delete_branch_and_close_its_pull_requests")
            if page is settings.catalog:  # a long prompt's name, a template, one of each state
                settings.catalog.items[LONG_SERVER] = _catalog()
                settings.catalog.select_server(LONG_SERVER)
                settings.catalog.select(settings.catalog.items[LONG_SERVER][0][1].key)
            if page is settings.hosts:
                settings.hosts.file_edit.setText(str(write_host_file(home)))
                settings.hosts.read()
            look(settings, f"Settings, {title}")

        settings.hosts.wire_selected()
        if settings.hosts.dialog is not None:
            look(settings.hosts.dialog, "Wiring preview")
            settings.hosts.dialog.reject()

        settings.tabs.setCurrentWidget(settings.servers)
        editor = settings.servers.add()
        editor.name.setText(LONG_SERVER)
        editor.command.setText(LONG_COMMAND)
        editor.args.setText(" ".join(LONG_ARGS))
        editor.say(f"Could not connect: {LONG_ERROR}")
        look(editor, "Add-server dialog")
        editor.reject()
        settings.close()

        if "--no-tray" not in argv:
            from app.tray import TrayApp

            tray = TrayApp(store, MemoryHeadStore(), home, native=False)
            tray.start()
            settle(lambda: tray.model.state == "pending")
            seen.append("Tray menu")
            problems.extend(menu_problems(tray.menu, "Tray menu"))
            tray.stop()
    print(json.dumps({"problems": problems, "seen": seen}))
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
