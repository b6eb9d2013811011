"""One app per database: a second start hands over and exits. Start at login, on Linux."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app import autostart
from core import wake
from tests.conftest import ROOT, SIGNOFF, need
from tests.core.test_store import _umask
from tests.waiting import read_ready_line, wait_for


def test_a_second_start_hands_over_to_the_running_app_and_exits(home: Path) -> None:
    """With the umask many desktops use (002: the socket is made group-writable unless the
    app says otherwise), a second start still hands over instead of starting a second app."""
    with _umask(0o002):
        first = subprocess.Popen([str(SIGNOFF)], env=_app_env(home), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:

        def up() -> bool:  # the app listens
            assert first.poll() is None, first.communicate()
            return wake.socket_path().exists()

        wait_for(up, "the first app listening on its wake-up socket", 60)
        with _umask(0o002):
            second = subprocess.run([str(SIGNOFF)], env=_app_env(home), capture_output=True,
                                    text=True, timeout=60, check=False)  # fmt: skip
        assert second.returncode == 0, second.stderr
        assert "already running" in second.stdout
        assert first.poll() is None  # the first one goes on
    finally:
        first.terminate()
        first.communicate(timeout=30)


def test_two_apps_started_at_once_leave_one_running(home: Path) -> None:
    """Both find no app to hand over to; only one may listen (the second used to remove the
    first one's socket and listen in its place: two icons, every request notified twice)."""
    apps = [
        subprocess.Popen(
            [str(SIGNOFF)],
            env=_app_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        wait_for(lambda: sum(a.poll() is not None for a in apps) == 1, "one of the two to leave")
        [gone] = [a for a in apps if a.poll() is not None]
        out, err = gone.communicate(timeout=30)
        assert gone.returncode == 0, err
        assert "already" in out
        wait_for(_instance_socket().is_socket, "the one left listening")
    finally:
        for a in apps:
            a.terminate()
            a.communicate(timeout=30)


def _instance_socket() -> Path:
    """The app's single-instance socket, for the home ``SIGNOFF_HOME`` names here."""
    return wake.runtime_dir() / "app.sock"


def _app_env(home: Path) -> dict[str, str]:
    return {**os.environ, "SIGNOFF_HOME": str(home), "QT_QPA_PLATFORM": "offscreen",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}  # fmt: skip


@pytest.mark.guarantee("G-FILES-1")
def test_the_instance_socket_is_the_users_own_and_a_planted_file_there_is_not_trusted(
    home: Path,
) -> None:
    """The app listened at ``$TMPDIR/signoff-<hash of the database path>``: a name another
    account could take first (the operator then got "already running" and no tray), and a
    file left there made ``listen`` fail silently (two apps). It now listens in the 0700 run
    folder; a file in its place that is not the user's own socket is never spoken to."""
    run = wake.make_runtime_dir()
    planted = run / "app.sock"
    planted.write_text("not a socket")
    os.chown(planted, 65534, 65534)  # another account's (the tests run as root in CI)
    app = subprocess.Popen([str(SIGNOFF)], env=_app_env(home), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: planted.is_socket() or app.poll() is not None, "the app listening")
        assert app.poll() is None, app.communicate()
        st = planted.lstat()
        assert stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid()
        assert stat.S_IMODE(run.stat().st_mode) == 0o700
        second = subprocess.run([str(SIGNOFF)], env=_app_env(home), capture_output=True,
                                text=True, timeout=60, check=False)  # fmt: skip
        assert second.returncode == 0 and "already running" in second.stdout
    finally:
        app.terminate()
        app.communicate(timeout=30)


@pytest.mark.guarantee("G-FILES-1")
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o707], ids=oct)  # all, the group, others
def test_a_run_folder_its_group_or_others_can_write_stops_the_app_with_the_reason(
    home: Path, mode: int
) -> None:
    run = wake.make_runtime_dir()
    run.chmod(mode)
    done = subprocess.run([str(SIGNOFF)], env=_app_env(home), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    assert f"the folder {run} can be written by group or others" in done.stderr


@pytest.mark.guarantee("G-FILES-3")
def test_an_app_on_a_home_too_deep_for_a_socket_starts_hands_over_and_is_woken(
    deep_home: Path,
) -> None:
    """With a home of 150 characters and more, the app stopped at its first socket ("AF_UNIX
    path too long"). Now it listens where the path fits: a second start finds it and hands
    over, and a proxy's wake (another process computing the folder alone) reaches it."""
    home = deep_home
    app = subprocess.Popen([str(SIGNOFF)], env=_app_env(home), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: _instance_socket().is_socket() or app.poll() is not None,
                 "the app listening", timeout=60)  # fmt: skip
        assert app.poll() is None, app.communicate()
        wait_for(wake.socket_path().is_socket, "the app's wake socket")
        second = subprocess.run([str(SIGNOFF)], env=_app_env(home), capture_output=True,
                                text=True, timeout=60, check=False)  # fmt: skip
        assert second.returncode == 0 and "already running" in second.stdout, second.stderr
        # As a proxy a host starts: its own few variables, no XDG_RUNTIME_DIR (decision 0069).
        few = {k: v for k, v in _app_env(home).items() if k != "XDG_RUNTIME_DIR"}
        woken = subprocess.run(
            [sys.executable, "-c", "from core import wake; print(wake.wake('asked'))"],
            env={**few, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
            check=True,
        )  # fmt: skip
        assert woken.stdout.strip() == "True"  # the app's socket took the proxy's datagram
        assert app.poll() is None
    finally:
        app.terminate()
        app.communicate(timeout=30)


def test_start_at_login_writes_and_removes_an_xdg_autostart_entry(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert not autostart.enabled()
    autostart.set_enabled(True)
    entry = tmp_path / "autostart" / "signoff.desktop"
    assert autostart.enabled()
    text = entry.read_text()
    assert text.startswith("[Desktop Entry]\n") and "\nExec=" in text and "Type=Application" in text
    autostart.set_enabled(False)
    assert not entry.exists() and not autostart.enabled()


def _entry_value(text: str, key: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(f"{key}=")]
    return line.removeprefix(f"{key}=")


def _exec_argv(value: str) -> list[str]:
    """An Exec value's arguments, unquoted as the Desktop Entry Specification says: the
    string's own escape of the backslash first, then the arguments, each plain or in double
    quotes (where a backslash escapes a quote, a backtick, a dollar or a backslash), then
    the doubled percent sign."""
    text = value.replace("\\\\", "\\")
    pattern = r'"((?:[^"\\]|\\["`$\\])*)"|([^\s"]+)'
    found = [(quoted, plain) for quoted, plain in re.findall(pattern, text)]
    arguments = [re.sub(r'\\(["`$\\])', r"\1", q) if q else p for q, p in found]
    return [a.replace("%%", "%") for a in arguments]


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """XDG folders of this test's own: no icon theme installs Signoff's icon there."""
    for name, folder in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                         ("XDG_DATA_DIRS", "system")):  # fmt: skip
        (tmp_path / folder).mkdir()
        monkeypatch.setenv(name, str(tmp_path / folder))
    return tmp_path


def _entry(xdg: Path) -> str:
    return (xdg / "config" / "autostart" / "signoff.desktop").read_text()


def test_start_at_login_runs_the_app_on_the_home_this_app_runs_on(
    xdg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without it the login's app watched another database: no notification came."""
    home = xdg / "a home, with spaces & $signs"
    monkeypatch.setenv("SIGNOFF_HOME", str(home))
    autostart.set_enabled(True)
    argv = _exec_argv(_entry_value(_entry(xdg), "Exec"))
    assert argv == ["env", f"SIGNOFF_HOME={home.resolve()}", *_exec_argv(autostart.command())]
    monkeypatch.delenv("SIGNOFF_HOME")
    autostart.set_enabled(True)
    assert _exec_argv(_entry_value(_entry(xdg), "Exec")) == _exec_argv(autostart.command())


def test_start_at_logins_icon_is_the_apps_own_file_where_no_icon_theme_has_it(xdg: Path) -> None:
    autostart.set_enabled(True)
    icon = Path(_entry_value(_entry(xdg), "Icon"))
    assert icon.is_absolute() and icon.is_file() and icon.suffix == ".svg"


def test_start_at_logins_icon_is_the_themes_name_where_the_theme_has_it(xdg: Path) -> None:
    """As the bundle's installer leaves it: the icon in the user's hicolor theme."""
    apps = xdg / "data" / "icons" / "hicolor" / "scalable" / "apps"
    apps.mkdir(parents=True)
    shutil.copy(autostart.APP_ICON, apps / f"{autostart.APP_ID}.svg")
    autostart.set_enabled(True)
    assert _entry_value(_entry(xdg), "Icon") == autostart.APP_ID


def test_the_app_starts_without_qts_warnings_about_a_missing_desktop_portal(home: Path) -> None:
    """Qt's GNOME theme asks the desktop portal over D-Bus and, where none answers, printed
    ``qt.qpa.theme.gnome: dbus reply error`` three times at every start, and Qt's services a
    line of their own about the same portal (decision 0040). On X (Xvfb), a desktop that says
    it is GNOME, and a private bus with no portal."""
    need(bool(shutil.which("xvfb-run") and shutil.which("dbus-run-session")),
         "xvfb-run and dbus-run-session (scripts/system-packages.sh installs them)")  # fmt: skip
    env = {**_app_env(home), "QT_QPA_PLATFORM": "xcb", "XDG_CURRENT_DESKTOP": "GNOME"}
    env.pop("QT_LOGGING_RULES", None)
    app = subprocess.Popen(["dbus-run-session", "--", "xvfb-run", "-a", str(SIGNOFF)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: _instance_socket().is_socket() or app.poll() is not None,
                 "the app listening", timeout=60)  # fmt: skip
        assert app.poll() is None, app.communicate()
        # A second start hands over: the first app's event loop has run, D-Bus replies too.
        second = subprocess.run([str(SIGNOFF)], env=_app_env(home), capture_output=True,
                                text=True, timeout=60, check=False)  # fmt: skip
        assert "already running" in second.stdout, second.stderr
    finally:
        os.killpg(app.pid, signal.SIGTERM)
        _, err = app.communicate(timeout=30)
    assert "qt.qpa.theme.gnome" not in err, err
    assert "qt.qpa.services" not in err, err  # its registration with the portal


def test_the_first_start_welcomes_with_the_demo_and_a_command_that_works_here(
    home: Path, tmp_path: Path
) -> None:
    """From a source checkout, with ``signoff`` not on PATH, the terminal's line names the
    command by its absolute path ("signoff demo" was "command not found"); the welcome itself
    (tests/app/test_demo.py) starts the demo from the app."""
    env = {**_app_env(home), "PYTHONUNBUFFERED": "1", "PATH": str(tmp_path)}
    app = subprocess.Popen([str(SIGNOFF)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert app.stdout is not None
        line = read_ready_line(app.stdout.fileno(), "the app's welcome", timeout=60)
    finally:
        app.terminate()
        app.communicate(timeout=30)
    assert line.startswith("Welcome to Signoff! "), line
    said = re.search(r"\(From a terminal: (.+)\)$", line)
    assert said is not None, line
    argv = shlex.split(said.group(1))
    assert argv[1:] == ["demo"] and Path(argv[0]).is_absolute() and Path(argv[0]).samefile(SIGNOFF)
    assert (home / "demo-offered").is_file()
