"""The tray under a StatusNotifierItem host: Xfce's panel, as a person's desktop runs it.

KDE Plasma, GNOME's AppIndicator extension and most current panels show tray icons by the
StatusNotifierItem protocol, not X11's XEmbed tray that tests/app/test_xvfb_desktop.py uses
(trayer). Here the host is Debian's xfce4-panel with only its status tray plugin, on Xvfb and
a private session bus: the panel owns ``org.kde.StatusNotifierWatcher``, the app registers its
item with it, the panel draws the icon and, on a right click, draws the menu it reads over
``com.canonical.dbusmenu`` (libdbusmenu-gtk) and sends the click back. The pointer and keys
are xdotool's; nothing inside the app is touched.

What the panel draws is not readable from outside: its menu lives in the plugin's own process
(``wrapper-2.0``), which shows no widgets on the accessibility bus. The labels are read as the
panel reads them, over the bus (tests/app/tray_host.py with ``watch=False``), and judged by the
dbusmenu spec (``dbusmenu_shows`` of tests/app/test_labels.py, checked against Qt there).
docs/decisions/0046-real-desktops-in-tests.md says what was tried.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.app.test_labels import dbusmenu_shows
from tests.app.test_xvfb_desktop import (
    PACKAGES,
    Call,
    Desktop,
    Window,
    app_env,
    no_traceback,
    require_desktop_tools,
    wait_for,
)
from tests.app.test_xvfb_desktop import host as host  # the fixtures, used here
from tests.app.test_xvfb_desktop import rig as rig
from tests.app.tray_host import WATCHER, MenuEntry, TrayHost
from tests.conftest import SIGNOFF, need
from tests.proxy.rig import Rig

pytestmark = pytest.mark.slow

# One panel at the bottom (xfce4-notifyd draws at the top right) with one plugin: the status
# tray, which hosts StatusNotifierItems (and XEmbed icons, none here).
PANEL_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfce4-panel" version="1.0">
  <property name="configver" type="int" value="2"/>
  <property name="panels" type="array">
    <value type="int" value="1"/>
    <property name="panel-1" type="empty">
      <property name="position" type="string" value="p=10;x=0;y=0"/>
      <property name="length" type="uint" value="100"/>
      <property name="position-locked" type="bool" value="true"/>
      <property name="size" type="uint" value="32"/>
      <property name="plugin-ids" type="array">
        <value type="int" value="1"/>
      </property>
    </property>
  </property>
  <property name="plugins" type="empty">
    <property name="plugin-1" type="string" value="systray"/>
  </property>
</channel>
"""


class Panel:
    """xfce4-panel on a desktop, and what it drew."""

    def __init__(self, desktop: Desktop) -> None:
        self.desktop = desktop
        settings = desktop.root / "config" / "xfce4" / "xfconf" / "xfce-perchannel-xml"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "xfce4-panel.xml").write_text(PANEL_SETTINGS)
        self.process = desktop.spawn("panel", ["xfce4-panel", "--disable-wm-check"])
        wait_for(lambda: desktop.name_has_owner(WATCHER), "xfce4-panel owning the watcher")

    def tray_area(self) -> Window | None:
        """The status tray plugin's window inside the panel."""
        windows = self.desktop.windows()
        panel = next((w for w in windows if w.cls == "Xfce4-panel" and w.height > 4), None)
        if panel is None:
            return None
        return next(
            (w for w in windows if w.cls == "Wrapper-2.0" and panel.id in w.ancestors), None
        )

    def drawn_icon(self) -> Window | None:
        """The tray area once something is drawn in it (more colours than its background)."""
        area = self.tray_area()
        if area is None or area.width < 8:
            return None
        image = self.desktop.image()
        colours = {
            image.at(x, y)
            for x in range(area.x, area.x + area.width)
            for y in range(area.y, area.y + area.height)
        }
        return area if len(colours) > 8 else None

    def menu(self) -> Window | None:
        """The menu the panel draws for an item: its own override-redirect popup."""
        found = [
            w
            for w in self.desktop.popups("Wrapper-2.0") + self.desktop.popups("Xfce4-panel")
            if w.height > 100
        ]
        return found[0] if found else None


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    require_desktop_tools()
    need(shutil.which("xfce4-panel") is not None, f"xfce4-panel is not installed ({PACKAGES})")
    with Desktop(tmp_path / "desktop") as d:
        d.start(tray=False)
        yield d


def _item_of(watched: list[str], bus: TrayHost, pid: int) -> str | None:
    """The bus name of the app's item among the watcher's (each "NAME" or "NAME/PATH")."""
    for entry in watched:
        name = entry.partition("/")[0]
        if bus.owner_pid(name) == pid:
            return name
    return None


def _keys_to(entries: list[MenuEntry], index: int) -> list[str]:
    """The keys that choose ``entries[index]`` in a GTK menu just opened: Down steps over the
    entries that cannot be chosen (disabled or hidden; separators are not in ``entries``)."""
    choosable = [e for e in entries if e.enabled and e.properties.get("visible", True)]
    assert entries[index] in choosable, entries[index]
    return ["Down"] * (choosable.index(entries[index]) + 1) + ["Return"]


def test_the_menu_drawn_by_a_status_notifier_panel_opens_the_request_and_the_history(
    desktop: Desktop, rig: Rig, host: Callable[..., Call], home: Path, tmp_path: Path
) -> None:
    assert "pending" in host({"text": "seen on the panel"}, hold=0.2).result(60)
    [waiting] = rig.pending()
    panel = Panel(desktop)
    wait_for(panel.tray_area, "the panel's status tray")
    with TrayHost(desktop.bus, watch=False) as bus:
        watcher_process = Path(f"/proc/{bus.owner_pid(WATCHER)}/cmdline").read_bytes()
        assert b"xfce4-panel" in watcher_process or b"libsystray" in watcher_process

        # This test's PYTHONPATH too: from a git worktree sharing another tree's venv, the
        # installed ``signoff`` would otherwise run the code the venv was installed from.
        env = app_env(desktop, home)
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        app = desktop.spawn("app", [str(SIGNOFF)], env=env)

        def registered() -> str | None:
            assert app.poll() is None, f"the app exited: {desktop.log('app')}"
            return _item_of(bus.watched_items(), bus, app.pid)

        item = wait_for(registered, "the app's item registered with the panel's watcher")
        icon = wait_for(panel.drawn_icon, "the panel drawing the app's icon")
        shot = desktop.screenshot(tmp_path / "panel.png")

        properties = bus.item_properties(item)
        assert properties["Title"].startswith("Signoff"), properties["Title"]
        assert properties["IconName"] or properties["IconPixmap"], properties
        _icon, _pixmaps, tip_title, tip_text = properties["ToolTip"]
        assert "Signoff" in f"{tip_title} {tip_text}", properties["ToolTip"]
        entries = bus.menu(item)
        shown = [dbusmenu_shows(entry.label) for entry in entries]
        title = f"{waiting['server']}/{waiting['tool']}"  # "notes/write_note": "_" kept
        request = [label for label in shown if label.startswith(f"{title} (")]
        assert len(request) == 1, shown
        assert shown.index(request[0]) < shown.index("History…") < shown.index("Settings…")
        assert shown[-1] == "Quit Signoff", shown

    # A right click on the icon: the panel draws the menu; the keys choose the request in it,
    # which opens its dialog.
    desktop.click(*icon.centre, button=3)
    menu = wait_for(panel.menu, f"the panel's menu for the app ({shot})")
    desktop.screenshot(tmp_path / "panel-menu.png")
    assert menu.width >= 200, menu
    desktop.keys(*_keys_to(entries, shown.index(request[0])))
    dialog_title = f"Signoff: {title} asks for approval"
    wait_for(lambda: desktop.window_named(dialog_title), f"the dialog {dialog_title!r}")
    wait_for(lambda: panel.menu() is None, "the panel's menu closing")

    # Then History. The pointer is still on the icon (xdotool's --sync move would wait for a
    # motion that never comes).
    desktop.run("xdotool", "click", "3")
    wait_for(panel.menu, "the panel's menu, again")
    desktop.keys(*_keys_to(entries, shown.index("History…")))
    wait_for(lambda: desktop.window_named("Signoff: history"), "the history window")
    assert rig.pending() == [waiting]  # opening windows decides nothing
    no_traceback(desktop, home)
