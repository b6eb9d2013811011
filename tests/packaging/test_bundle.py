"""The Linux bundle as a person gets it: unpacked from the tarball packaging/build-linux.sh
writes (built once per test run, tests/packaging/conftest.py), nothing of the development
environment used.

On a real X server (Xvfb) with a private D-Bus session bus, a notification daemon, a tray host
and a Secret Service (gnome-keyring), the bundled ``signoff`` starts the tray app; the bundled
commands set up the demo notes server (the bundle itself, ``signoff _demo-server``); an mcp SDK
client of the bundled ``signoff proxy`` makes a write that waits, the app notifies it, the
bundled ``signoff approve`` approves it, the re-call performs it once, and the bundled
``signoff verify`` finds the chain intact and anchored in the keyring the app wrote. So every
part PyInstaller's analysis cannot see is exercised: keyring's backends (entry points),
its freedesktop client (app/freedesktop.py), the Qt plugins, the hidden command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from app import autostart
from core.demo.run import PENDING
from tests.app.test_xvfb_desktop import Desktop, no_traceback, require_desktop_tools, wait_for
from tests.conftest import need
from tests.host import text
from tests.packaging.conftest import Bundle, budget

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bundle")]  # built once, on one worker

MIB = 1024 * 1024
CLASSES = {"list_notes": "read_only", "read_note": "read_only",
           "write_note": "local_mutation", "delete_note": "destructive"}  # fmt: skip
WRITE = {"name": "from-the-agent.md", "text": "written once, after the operator approved\n"}


def tree_size(folder: Path) -> int:
    """Bytes of the files (and symbolic links, as links) under ``folder``."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_symlink() or p.is_file())


class Commands:
    """The bundled terminal commands, run as a person runs them."""

    def __init__(self, exe: Path, env: dict[str, str]) -> None:
        self.exe, self.env = exe, env

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.exe), *args], capture_output=True, text=True,
                              env=self.env, timeout=120, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"signoff {' '.join(args)} failed: {done.stderr}")
        return done


def start_secret_service(desktop: Desktop) -> None:
    """gnome-keyring's Secret Service on the desktop's private bus, its keyring unlocked, kept
    in the desktop's XDG_DATA_HOME."""
    need(shutil.which("gnome-keyring-daemon") is not None,
         "gnome-keyring-daemon is missing (scripts/system-packages.sh installs it)")  # fmt: skip
    password = desktop.root / "keyring-password"
    password.write_text("signoff-bundle-test")
    script = 'exec gnome-keyring-daemon --foreground --unlock --components=secrets <"$0"'
    desktop.spawn("keyring", ["sh", "-c", script, str(password)])
    wait_for(lambda: desktop.name_has_owner("org.freedesktop.secrets"), "the Secret Service")


def qt_loaded_by(exe: Path, *args: str) -> list[set[str]]:
    """For each running ``exe ARGS...`` process, the Qt libraries mapped into it."""
    loaded = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")[:-1]
            if [a.decode(errors="replace") for a in argv[: 1 + len(args)]] != [str(exe), *args]:
                continue
            maps = (proc / "maps").read_text()
        except (OSError, ValueError):
            continue  # not ours, or gone
        loaded.append({line.split()[-1] for line in maps.splitlines() if "libQt6" in line})
    return loaded


async def play_the_agent(bundle: Bundle, env: dict[str, str], desktop: Desktop,
                         signoff: Commands, notes: Path) -> None:  # fmt: skip
    params = StdioServerParameters(
        command=str(bundle.exe), args=["proxy", "notes", "--hold", "0.3"], env=env
    )
    with (
        anyio.fail_after(120),
        (desktop.logs / "host-stderr.log").open("a") as errlog,
    ):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            assert set(CLASSES) <= {t.name for t in listed.tools}
            assert text(await session.call_tool("read_note", {"name": "hello.md"})) == "hello\n"
            # A host's `signoff proxy` loads no Qt, in the bundle as from a venv.
            assert qt_loaded_by(bundle.exe, "proxy", "notes") == [set()]

            held = text(await session.call_tool("write_note", WRITE))
            pending = PENDING.search(held)
            assert pending is not None, held
            assert not (notes / WRITE["name"]).exists()
            # The app, frozen, notified it through its freedesktop client (app/freedesktop.py).
            await anyio.to_thread.run_sync(
                lambda: wait_for(desktop.notifications, "the app's notification of the write")
            )
            await anyio.to_thread.run_sync(signoff, "approve", pending.group(1))

            done = text(await session.call_tool("write_note", WRITE))
            assert done.startswith(f"wrote {WRITE['name']}"), done
    assert (notes / WRITE["name"]).read_text() == WRITE["text"]


def test_the_bundle_runs_the_app_the_proxy_and_the_commands(bundle: Bundle, tmp_path: Path) -> None:
    require_desktop_tools()
    with Desktop(tmp_path / "desktop") as desktop:
        desktop.start()
        start_secret_service(desktop)
        home = tmp_path / "home"
        home.mkdir(mode=0o700)
        notes = tmp_path / "notes"
        notes.mkdir()
        (notes / "hello.md").write_text("hello\n")
        env = {**desktop.env, "SIGNOFF_HOME": str(home), "QT_QPA_PLATFORM": "xcb"}
        signoff = Commands(bundle.exe, env)
        signoff("servers", "add", "notes", "--", str(bundle.exe), "_demo-server", str(notes))
        signoff("pin", "notes", "--accept")
        for tool, side_effect in CLASSES.items():
            signoff("classify", "notes", tool, side_effect)

        app = desktop.spawn("app", [str(bundle.exe)], env=env)

        def embedded() -> Any:
            assert app.poll() is None, f"the app exited ({app.returncode}): {desktop.log('app')}"
            return desktop.tray_icon()

        icon = wait_for(embedded, "the bundled app's icon in the tray")
        # The desktop entry's StartupWMClass names the class the app's windows carry.
        assert f'"{autostart.WM_CLASS}"' in desktop.run("xprop", "-id", icon.id, "WM_CLASS")

        anyio.run(play_the_agent, bundle, env, desktop, signoff, notes)

        runs = [json.loads(line) for line in signoff("runs", "--json").stdout.splitlines()]
        writes = [r for r in runs if r["tool"] == "write_note"]
        assert [r["status"] for r in writes] == ["COMPLETED"], runs

        def anchored() -> dict[str, Any] | None:
            report = json.loads(signoff("verify", "--json").stdout)
            whole = report["anchor"] == "anchored" and report["witnessed_seq"] == report["events"]
            return report if whole else None

        # The app, frozen, kept the head in the Secret Service; the bundled verify read it.
        wait_for(anchored, "the chain anchored in the keyring up to its last event")
        no_traceback(desktop, home)


def test_the_bundled_demo_starts_its_notes_server_from_the_bundle(
    bundle: Bundle, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("SIGNOFF_HOME", "PYTHONPATH")}
    done = subprocess.run(
        [str(bundle.exe), "demo", "--no-app", "--auto-approve", "--home", str(tmp_path / "demo")],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "intact:" in done.stdout
    config = (tmp_path / "demo" / "config.toml").read_text()
    assert str(bundle.exe) in config and "_demo-server" in config


def test_the_bundle_holds_only_the_qt_it_uses(bundle: Bundle) -> None:
    qt = bundle.folder / "_internal" / "PySide6" / "Qt"
    plugins = {str(p.relative_to(qt / "plugins")) for p in (qt / "plugins").rglob("*.so")}
    wanted = {"platforms/libqxcb.so", "platforms/libqwayland.so", "platforms/libqoffscreen.so",
              "iconengines/libqsvgicon.so", "imageformats/libqsvg.so",
              "platformthemes/libqxdgdesktopportal.so"}  # fmt: skip
    assert wanted <= plugins
    assert not any(p.startswith(("sqldrivers/", "qmltooling/", "printsupport/")) for p in plugins)
    assert "platformthemes/libqgtk3.so" not in plugins
    assert not (qt / "translations").exists()
    libraries = {p.name for p in (bundle.folder / "_internal").rglob("*.so*")}
    for unused in ("libQt6Qml", "libQt6Quick", "libQt6Pdf", "libQt6Sql", "libgtk-3"):
        assert not any(name.startswith(unused) for name in libraries), unused


def test_the_bundle_fits_the_budget_docs_benchmarks_states(bundle: Bundle) -> None:
    unpacked, packed = tree_size(bundle.folder) / MIB, bundle.tarball.stat().st_size / MIB
    limit_unpacked, limit_packed = budget()
    assert unpacked <= limit_unpacked, f"{unpacked:.1f} MiB unpacked, over {limit_unpacked}"
    assert packed <= limit_packed, f"{packed:.1f} MiB as a tarball, over {limit_packed}"


@pytest.mark.parametrize("own_home", [False, True], ids=["default home", "a SIGNOFF_HOME"])
def test_install_sh_installs_for_one_user_and_uninstalls_what_it_installed(
    bundle: Bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_home: bool
) -> None:
    need(shutil.which("desktop-file-validate") is not None,
         "desktop-file-validate is missing (scripts/system-packages.sh installs it)")  # fmt: skip
    home = tmp_path / "a home"  # a space, so that Exec must be quoted
    home.mkdir()
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
    done = subprocess.run([str(bundle.folder / "install.sh")], capture_output=True, text=True,
                          env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr

    opt, link = home / ".local" / "opt" / "signoff", home / ".local" / "bin" / "signoff"
    assert link.is_symlink() and link.resolve() == (opt / "signoff").resolve()
    run = subprocess.run([str(link), "--help"], capture_output=True, text=True, env=env,
                         timeout=60, check=False)  # fmt: skip
    assert run.returncode == 0 and "usage: signoff" in run.stdout, run.stderr
    share = home / ".local" / "share"
    entry = share / "applications" / f"{autostart.APP_ID}.desktop"
    checked = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True,
                             text=True, timeout=30, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f'\nExec="{opt}/signoff"\n' in entry.read_text()
    icons = sorted(p.relative_to(share) for p in (share / "icons").rglob(f"{autostart.APP_ID}.*"))
    assert [i.suffix for i in icons].count(".png") == 9 and len(icons) == 10, icons

    # "Start at login", turned on in the installed app, is removed with it.
    monkeypatch.setattr("sys.frozen", True, raising=False)
    monkeypatch.setattr("sys.executable", str(opt / "signoff"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    if own_home:  # the entry then runs the bundle through env, with that home
        monkeypatch.setenv("SIGNOFF_HOME", str(home / "signoff data"))
    else:
        monkeypatch.delenv("SIGNOFF_HOME", raising=False)
    autostart.set_enabled(True)
    assert ("\nExec=env " in (home / ".config/autostart" / autostart.ENTRY).read_text()) is own_home
    kept = home / ".config" / "signoff" / "config.toml"
    kept.parent.mkdir(parents=True)
    kept.write_text("# the operator's\n")

    done = subprocess.run([str(opt / "install.sh"), "--uninstall"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not opt.exists() and not link.is_symlink() and not entry.exists()
    assert not list(share.rglob(f"{autostart.APP_ID}.*"))
    assert not autostart.enabled()
    assert kept.read_text() == "# the operator's\n"
