"""The tray app on a real X server, as a person meets it.

Xvfb, a private D-Bus session bus with a real notification daemon that draws action buttons
(xfce4-notifyd) and a real tray host (trayer). The app is the installed ``signoff`` with no
arguments; a request is a real proxy call through the mcp SDK's client (tests/proxy/rig.py).
Windows are found with xwininfo and clicked with xdotool, as a person's pointer would: nothing
inside the app is touched.

The bus is private (not the session bus ``make test`` provides) so that the daemon owning
``org.freedesktop.Notifications`` and the settings it reads exist for this test alone; the app
keeps its chain head in keyrings.alt's file backend inside the test's directory.

``scripts/screenshots.sh`` uses ``Desktop`` and ``demo_server`` to draw docs/screenshots/.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import anyio
import pytest

from tests.conftest import SIGNOFF, need
from tests.host import text
from tests.proxy.rig import NOTES_TOOLS, Rig
from tests.waiting import read_ready_line, wait_for

pytestmark = pytest.mark.slow

T = TypeVar("T")
# A window that went away while xwininfo walked the tree (X errors 3 and 9).
VANISHED = re.compile(r"X Error: (3: Bad Window|9: Bad Drawable)")
TREE_WALKS = 5  # walks of a tree that keeps changing before the last one's error stands
TOOLS = ("Xvfb", "xdotool", "xwininfo", "xprop", "import", "trayer", "dbus-daemon", "dbus-send")
NOTIFYD_GLOB = "/usr/lib/*/xfce4/notifyd/xfce4-notifyd"
XFCONFD_GLOB = "/usr/lib/*/xfce4/xfconf/xfconfd"
# at-spi2-core's accessibility bus (Debian 12 and later; older releases keep it in lib).
ATSPI_LAUNCHERS = ("/usr/libexec/at-spi-bus-launcher", "/usr/lib/at-spi2-core/at-spi-bus-launcher")
SCREEN = "1280x800x24"
NOTIFYD_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfce4-notifyd" version="1.0">
  <property name="expire-timeout" type="int" value="{expire}"/>
  <property name="do-fadeout" type="bool" value="false"/>
  <property name="do-slideout" type="bool" value="false"/>
</channel>
"""
PACKAGES = "scripts/system-packages.sh installs it"
WAIT = 20.0  # seconds: the most any one thing may take to appear


def _first(pattern: str) -> str | None:
    found = sorted(glob.glob(pattern))
    return found[0] if found else None


def notifyd_path() -> str | None:
    return _first(NOTIFYD_GLOB)


def _xcb_plugin_problem() -> str | None:
    """Qt's xcb platform plugin loads only with its X libraries (libxcb-cursor0 and others)."""
    import PySide6

    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    if not plugin.exists() or not shutil.which("ldd"):
        return None  # nothing to check here; starting the app will tell
    linked = subprocess.run(
        ["ldd", str(plugin)], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    missing = sorted({line.split()[0] for line in linked.splitlines() if "not found" in line})
    return f"Qt's xcb plugin misses {', '.join(missing)}" if missing else None


def require_desktop_tools() -> None:
    for tool in TOOLS:
        need(shutil.which(tool) is not None, f"{tool} is not installed ({PACKAGES})")
    need(notifyd_path() is not None, f"xfce4-notifyd is not installed ({PACKAGES})")
    problem = _xcb_plugin_problem()
    need(problem is None, f"{problem} ({PACKAGES})")


# --- windows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    id: str
    name: str
    instance: str
    cls: str
    width: int
    height: int
    x: int  # absolute
    y: int
    ancestors: tuple[str, ...]  # ids, nearest first, up to (not including) the root

    @property
    def centre(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2

    @property
    def box(self) -> tuple[int, int, int, int]:
        return self.x, self.y, self.width, self.height


TREE_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<id>0x[0-9a-f]+) (?P<name>.*): \((?P<cls>[^()]*)\)\s+"
    r"(?P<w>\d+)x(?P<h>\d+)\+-?\d+\+-?\d+\s+\+(?P<x>-?\d+)\+(?P<y>-?\d+)\s*$"
)


def parse_tree(output: str) -> list[Window]:
    """``xwininfo -root -tree`` as windows, each with its chain of parents."""
    windows: list[Window] = []
    stack: list[tuple[int, str]] = []  # (indent, id) of the open parents
    for line in output.splitlines():
        m = TREE_LINE.match(line)
        if m is None:
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        names = re.findall(r'"(.*?)"', m["cls"])
        name = m["name"][1:-1] if m["name"].startswith('"') else ""
        windows.append(
            Window(
                id=m["id"],
                name=name,
                instance=names[0] if names else "",
                cls=names[1] if len(names) > 1 else "",
                width=int(m["w"]),
                height=int(m["h"]),
                x=int(m["x"]),
                y=int(m["y"]),
                ancestors=tuple(i for _, i in reversed(stack)),
            )
        )
        stack.append((indent, m["id"]))
    return windows


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    pixels: bytes  # RGB, row after row

    def at(self, x: int, y: int) -> tuple[int, int, int]:
        i = (y * self.width + x) * 3
        return self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]


def parse_ppm(data: bytes) -> Image:
    m = re.match(rb"P6\s+(\d+)\s+(\d+)\s+255\s", data)
    assert m is not None, f"not a binary PPM: {data[:20]!r}"
    width, height = int(m[1]), int(m[2])
    pixels = data[m.end() : m.end() + width * height * 3]
    assert len(pixels) == width * height * 3, "a truncated screenshot"
    return Image(width, height, pixels)


def find_buttons(image: Image, window: Window) -> list[tuple[int, int]]:
    """The centres of the push buttons on the bottom row of a notification, left to right.

    A button is a horizontal run of pixels unlike the window's background (its fill, border
    and label); the lowest band of rows holding two or more such runs, each wider than a
    letter and narrower than half the window, is the row of buttons."""
    x0, y0, w, h = window.box
    sample = [image.at(x, y) for y in range(y0, y0 + h, 2) for x in range(x0, x0 + w, 2)]
    background = Counter(sample).most_common(1)[0][0]

    def runs(y: int) -> list[tuple[int, int]]:
        found, start = [], None
        for x in range(x0 + 2, x0 + w - 2):
            px = image.at(x, y)
            differs = max(abs(a - b) for a, b in zip(px, background, strict=True)) > 8
            if differs and start is None:
                start = x
            elif not differs and start is not None:
                found.append((start, x))
                start = None
        if start is not None:
            found.append((start, x0 + w - 2))
        return [(a, b) for a, b in found if 24 <= b - a <= w // 2]

    band: list[tuple[int, list[tuple[int, int]]]] = []
    for y in range(y0 + h - 3, y0 + 2, -1):
        row = runs(y)
        if len(row) >= 2:
            band.append((y, row))
        elif band:
            break  # the band of buttons ended
    if len(band) < 8:  # a button is taller than a few rows of text strokes
        return []
    # The rows crossing a label may split a button in two; the rows of plain fill do not.
    fewest = min(len(row) for _, row in band)
    middle = band[len(band) // 2][0]
    _, row = min(((y, r) for y, r in band if len(r) == fewest), key=lambda b: abs(b[0] - middle))
    return [((a + b) // 2, middle) for a, b in row]


# --- the desktop ------------------------------------------------------------------------


class Desktop:
    """Xvfb, a private D-Bus session bus, xfce4-notifyd, trayer, and optionally openbox; every
    process in its own process group, all ended on ``close``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.env: dict[str, str] = {}
        self.bus = ""
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._files: list[IO[Any]] = []

    # lifecycle

    def __enter__(self) -> Desktop:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(
        self,
        *,
        window_manager: bool = False,
        tray: bool = True,
        expire: int = 60,
        accessible: bool = False,
    ) -> Desktop:
        """``expire``: the seconds a notification stays on the screen. ``accessible``: an
        accessibility bus (AT-SPI) on which xfce4-notifyd shows its windows' widgets, so that a
        test can read the text it drew (tests/app/read_notifications.py)."""
        for sub in ("logs", "home", "config", "data", "cache", "runtime"):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        display = self._start_display()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.root / "home"),
            "DISPLAY": display,
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "data"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "XDG_RUNTIME_DIR": str(self.root / "runtime"),
            "NO_AT_BRIDGE": "1",  # GTK: no accessibility bus of its own
        }
        self._start_bus()
        if accessible:
            self._start_accessibility()
        self._start_notifyd(expire, accessible)
        if tray:
            self._start_tray()
        if window_manager:
            self._start_window_manager()
        return self

    def close(self) -> None:
        for _, process in reversed(self._processes):
            self.end(process)
        self._processes.clear()
        for f in self._files:
            f.close()
        self._files.clear()

    def spawn(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        """Start a process in its own process group, its output in logs/NAME.log."""
        log = (self.logs / f"{name}.log").open("ab")
        self._files.append(log)
        kwargs.setdefault("stdout", log)
        process = subprocess.Popen(
            argv,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            **kwargs,
        )
        self._processes.append((name, process))
        return process

    @staticmethod
    def end(process: subprocess.Popen[bytes]) -> None:
        """End a process started by ``spawn`` and whatever it started in its group."""
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                continue
            with contextlib.suppress(ProcessLookupError):  # what it left in its group
                os.killpg(process.pid, signal.SIGKILL)
            break
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # the parts

    def _start_display(self) -> str:
        read, write = os.pipe()
        try:
            argv = ["Xvfb", "-displayfd", str(write), "-screen", "0", SCREEN]
            argv += ["-nolisten", "tcp", "-noreset"]
            self.spawn("xvfb", argv, env=dict(os.environ), pass_fds=(write,))
            os.close(write)
            write = -1
            number = read_ready_line(read, "Xvfb announcing its display")
        finally:
            os.close(read)
            if write != -1:
                os.close(write)
        return f":{number}"

    def _start_bus(self) -> None:
        bus = self.spawn(
            "dbus",
            ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
        )
        assert bus.stdout is not None
        self.bus = read_ready_line(bus.stdout.fileno(), "dbus-daemon announcing its address")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self.bus

    def name_has_owner(self, name: str) -> bool:
        done = self.run(
            "dbus-send",
            f"--bus={self.bus}",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.NameHasOwner",
            f"string:{name}",
            check=False,
        )
        return "boolean true" in done

    def _start_accessibility(self) -> None:
        # Started here rather than activated by the bus, as xfconfd is: this desktop's child.
        launcher = next((p for p in ATSPI_LAUNCHERS if os.path.exists(p)), None)
        assert launcher is not None, f"no at-spi-bus-launcher in {ATSPI_LAUNCHERS}"
        self.spawn("at-spi", [launcher, "--launch-immediately"])
        wait_for(lambda: self.name_has_owner("org.a11y.Bus"), "the accessibility bus")
        # The launcher also names its bus on the root window (AT_SPI_BUS); Qt, run as root,
        # joins the bus named there, and the app under test would answer every reading. GTK
        # and readers find the bus through the session bus all the same.
        wait_for(lambda: "AT_SPI_BUS(" in self.run("xprop", "-root", "AT_SPI_BUS"), "AT_SPI_BUS")
        self.run("xprop", "-root", "-remove", "AT_SPI_BUS")

    def _start_notifyd(self, expire: int, accessible: bool = False) -> None:
        settings = self.root / "config" / "xfce4" / "xfconf" / "xfce-perchannel-xml"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "xfce4-notifyd.xml").write_text(NOTIFYD_SETTINGS.format(expire=expire))
        # xfconfd serves those settings; started here rather than activated by the bus, so that
        # it is this desktop's child and ends with it.
        xfconfd = _first(XFCONFD_GLOB)
        if xfconfd is not None:
            self.spawn("xfconfd", [xfconfd])
            wait_for(lambda: self.name_has_owner("org.xfce.Xfconf"), "xfconfd on the bus")
        path = notifyd_path()
        assert path is not None
        # GTK joins the accessibility bus unless NO_AT_BRIDGE is set.
        env = {k: v for k, v in self.env.items() if k != "NO_AT_BRIDGE"} if accessible else None
        self.spawn("notifyd", [path], env=env)
        wait_for(
            lambda: self.name_has_owner("org.freedesktop.Notifications"),
            "xfce4-notifyd owning org.freedesktop.Notifications",
        )

    def _start_tray(self) -> None:
        # At the bottom: xfce4-notifyd draws its notifications at the top right.
        argv = "trayer --edge bottom --align right --widthtype pixel --width 160"
        argv += " --heighttype pixel --height 32 --SetDockType true --transparent false"
        self.spawn("trayer", argv.split())
        wait_for(self.tray_panel, "trayer's panel on the screen")

    def _start_window_manager(self) -> None:
        self.spawn("openbox", ["openbox", "--sm-disable"])
        wait_for(
            lambda: "_NET_SUPPORTING_WM_CHECK(WINDOW)" in self.run("xprop", "-root"),
            "openbox managing the screen",
        )

    # looking and acting

    def run(self, *argv: str, check: bool = True, timeout: float = 15) -> str:
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def windows(self) -> list[Window]:
        """The window tree as it stands. ``xwininfo -tree`` walks it one request at a time, so a
        window closed during the walk (a menu, a notification) makes it fail with BadWindow or
        BadDrawable: the tree changed under it, and the next walk sees the new one."""
        for _ in range(TREE_WALKS - 1):
            done = subprocess.run(
                ["xwininfo", "-root", "-tree"], env=self.env, capture_output=True, text=True,
                timeout=15, check=False,
            )  # fmt: skip
            if done.returncode == 0:
                return parse_tree(done.stdout)
            if not VANISHED.search(done.stderr):
                raise AssertionError(f"xwininfo -root -tree failed: {done.stderr}")
        return parse_tree(self.run("xwininfo", "-root", "-tree"))

    def attributes(self, window: str) -> str:
        return self.run("xwininfo", "-id", window, check=False)

    def viewable(self, window: str) -> bool:
        return "Map State: IsViewable" in self.attributes(window)

    def override_redirect(self, window: str) -> bool:
        return "Override Redirect State: yes" in self.attributes(window)

    def tray_panel(self) -> Window | None:
        return next(
            (
                w
                for w in self.windows()
                if (w.instance, w.cls) == ("panel", "trayer") and self.viewable(w.id)
            ),
            None,
        )

    def tray_icon(self, cls: str = "Signoff") -> Window | None:
        """The app's icon window, reparented into the tray host's panel (XEmbed)."""
        panel = self.tray_panel()
        if panel is None:
            return None
        return next(
            (
                w
                for w in self.windows()
                if w.cls == cls and panel.id in w.ancestors and w.width > 4 and self.viewable(w.id)
            ),
            None,
        )

    def notifications(self) -> list[Window]:
        return [
            w
            for w in self.windows()
            if w.cls == "Xfce4-notifyd" and not w.ancestors and w.width > 50 and self.viewable(w.id)
        ]

    def popups(self, cls: str = "Signoff") -> list[Window]:
        """Top-level override-redirect windows of the app on the screen (its menus)."""
        return [
            w
            for w in self.windows()
            if w.cls == cls
            and not w.ancestors
            and w.width > 4
            and self.viewable(w.id)
            and self.override_redirect(w.id)
        ]

    def toplevel(self, window: Window) -> Window:
        """The window itself, or the window manager's frame around it."""
        if not window.ancestors:
            return window
        return next(w for w in self.windows() if w.id == window.ancestors[-1])

    def window_named(self, name: str) -> Window | None:
        return next((w for w in self.windows() if w.name == name and self.viewable(w.id)), None)

    def screenshot(self, path: Path, box: tuple[int, int, int, int] | None = None) -> Path:
        argv = ["import", "-window", "root"]
        if box is not None:
            x, y, w, h = box
            argv += ["-crop", f"{w}x{h}+{x}+{y}", "+repage"]
        self.run(*argv, str(path), timeout=30)
        return path

    def image(self) -> Image:
        done = subprocess.run(
            ["import", "-window", "root", "-depth", "8", "ppm:-"],
            env=self.env,
            capture_output=True,
            timeout=30,
            check=True,
        )
        return parse_ppm(done.stdout)

    def click(self, x: int, y: int, button: int = 1) -> None:
        self.run("xdotool", "mousemove", "--sync", str(x), str(y))
        self.run("xdotool", "click", str(button))

    def keys(self, *keys: str) -> None:
        self.run("xdotool", "key", *keys)


# --- the app and its demo state ----------------------------------------------------------


def demo_server(rig: Rig, notes: Path) -> None:
    """The fake notes server, pinned, ``write_note`` classified as a local mutation."""
    rig.add_fake("notes", NOTES_TOOLS, notes=str(notes))
    rig.pin("notes")
    rig.classify("notes", read_note="read_only", write_note="local_mutation")


def keyring_env(desktop: Desktop) -> dict[str, str]:
    """The keyring of this desktop's app: keyrings.alt's file backend in its data directory.
    Its proxies use the same one, as a host's proxies use the user's keyring."""
    return {"PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
            "XDG_DATA_HOME": desktop.env["XDG_DATA_HOME"]}  # fmt: skip


def app_env(desktop: Desktop, home: Path) -> dict[str, str]:
    return {**desktop.env, "SIGNOFF_HOME": str(home), "QT_QPA_PLATFORM": "xcb",
            **keyring_env(desktop)}  # fmt: skip


def start_app(desktop: Desktop, home: Path, name: str = "app") -> subprocess.Popen[bytes]:
    """``signoff`` with no arguments; returns once its icon sits in the tray host."""
    app = desktop.spawn(name, [str(SIGNOFF)], env=app_env(desktop, home))

    def embedded() -> Window | None:
        assert app.poll() is None, f"the app exited ({app.returncode}): {desktop.log(name)}"
        return desktop.tray_icon()

    wait_for(embedded, "the app's icon embedded in trayer")
    return app


def no_traceback(desktop: Desktop, home: Path, name: str = "app") -> None:
    for where, logged in (
        ("stderr", desktop.log(name)),
        ("logs/app.log", _read(home / "logs" / "app.log")),
    ):
        assert "Traceback" not in logged, f"the app's {where}:\n{logged}"


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


class Call:
    """``write_note`` through ``signoff proxy`` (the mcp SDK's client) on a thread of its own,
    as a host whose model waits on the call. ``close`` cancels it and ends the proxy."""

    def __init__(self, rig: Rig, arguments: dict[str, Any], hold: float) -> None:
        self._rig, self._arguments, self._hold = rig, arguments, hold
        self._text = ""
        self._error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._body, name="mcp-host", daemon=True)
        self._thread.start()

    async def _scenario(self) -> None:
        async with (
            self._rig.client("notes", hold=self._hold) as host,
            anyio.create_task_group() as group,
        ):

            async def cancel_on_close() -> None:
                while not self._stop.is_set():
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()

            group.start_soon(cancel_on_close)
            self._text = text(await host.call_tool("write_note", self._arguments))
            group.cancel_scope.cancel()

    def _body(self) -> None:
        try:
            anyio.run(self._scenario)
        except BaseException as e:  # reported by the test, not lost on the thread
            self._error = repr(e)

    def result(self, timeout: float) -> str:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the call did not return within {timeout:.0f} s"
        assert not self._error, self._error
        return self._text

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


# --- the tests -------------------------------------------------------------------------


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    require_desktop_tools()
    with Desktop(tmp_path / "desktop") as d:
        d.start()
        yield d


@pytest.fixture
def host(rig: Rig, desktop: Desktop) -> Iterator[Callable[..., Call]]:
    """Starts calls through the proxy (with the app's keyring); each is cancelled (its proxy
    ended) at teardown."""
    rig.env.update(keyring_env(desktop))
    calls: list[Call] = []

    def call(arguments: dict[str, Any], hold: float) -> Call:
        calls.append(Call(rig, arguments, hold))
        return calls[-1]

    yield call
    for c in calls:
        c.close()


@pytest.fixture
def rig(home: Path, tmp_path: Path, desktop: Desktop) -> Rig:
    """Set up with the desktop's keyring: the configuration is recorded with the operator key
    the app and the proxies use (as one user's commands, app and hosts share one keyring)."""
    rig = Rig(home)
    rig.env.update(keyring_env(desktop))
    demo_server(rig, tmp_path / "notes.txt")
    return rig


def test_approve_on_a_real_notification_runs_the_held_call(
    desktop: Desktop, rig: Rig, host: Callable[..., Call], home: Path, tmp_path: Path
) -> None:
    start_app(desktop, home)
    assert desktop.notifications() == []
    call = host({"text": "approved on the desktop"}, hold=30)

    def drawn() -> tuple[Window, list[tuple[int, int]]] | None:
        shown = desktop.notifications()
        buttons = find_buttons(desktop.image(), shown[0]) if len(shown) == 1 else []
        return (shown[0], buttons) if buttons else None

    shot = tmp_path / "notification.png"
    try:
        shown, buttons = wait_for(drawn, "xfce4-notifyd drawing the approval and its buttons")
    except AssertionError as e:
        raise AssertionError(f"{e}; the screen: {desktop.screenshot(shot)}") from None
    desktop.screenshot(shot)
    assert len(buttons) == 2, f"expected Approve and Reject, found {buttons} ({shown}, {shot})"
    approve = buttons[0]  # the actions in the order the app sent them: Approve, Reject
    desktop.click(*approve)

    result = call.result(40)
    assert result == "wrote 'approved on the desktop'", result
    assert (tmp_path / "notes.txt").read_text() == "approved on the desktop\n"
    assert rig.pending() == []
    wait_for(lambda: not desktop.notifications(), "the notification closing after its button")
    no_traceback(desktop, home)


def test_the_tray_icon_opens_its_menu_with_the_pending_request(
    desktop: Desktop, rig: Rig, host: Callable[..., Call], home: Path, tmp_path: Path
) -> None:
    assert "pending" in host({"text": "seen in the menu"}, hold=0.2).result(60)
    [waiting] = rig.pending()

    start_app(desktop, home)
    icon = desktop.tray_icon()
    assert icon is not None and icon.width <= 64 and icon.height <= 64, icon
    assert desktop.popups() == []

    desktop.click(*icon.centre, button=3)
    [menu] = wait_for(desktop.popups, "the tray icon's context menu")
    shot = desktop.screenshot(tmp_path / "tray-menu.png")
    types = desktop.run("xprop", "-id", menu.id, "_NET_WM_WINDOW_TYPE")
    assert "_NET_WM_WINDOW_TYPE_POPUP_MENU" in types, types
    # The menu opens where the icon was clicked, tall enough for its eleven entries.
    assert menu.height >= 150 and menu.width >= 200, (menu, shot)
    x, y = icon.centre
    dx = max(menu.x - x, 0, x - (menu.x + menu.width))
    dy = max(menu.y - y, 0, y - (menu.y + menu.height))
    assert dx + dy < 40, (menu, icon, shot)

    # The first entry that can be chosen is the pending request: choosing it opens its dialog.
    desktop.keys("Down", "Return")
    title = f"Signoff: {waiting['server']}/{waiting['tool']} asks for approval"
    dialog = wait_for(lambda: desktop.window_named(title), f"the dialog {title!r} ({shot})")
    assert dialog.width >= 560, dialog
    wait_for(lambda: not desktop.popups(), "the menu closing")
    assert rig.pending() == [waiting]  # opening the dialog decides nothing
    no_traceback(desktop, home)
