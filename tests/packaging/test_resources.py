"""The desktop entry, the icons, the application id and the commands a bundle starts, checked
without building one."""

from __future__ import annotations

import configparser
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app import autostart
from core import cli, hosts
from core.demo import run as demo
from tests.conftest import ROOT, need
from tests.packaging.conftest import budget, load

ENTRY = ROOT / "resources" / f"{autostart.APP_ID}.desktop"


def entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(path.read_text())
    return dict(parser["Desktop Entry"])


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    need(shutil.which("desktop-file-validate") is not None,
         "desktop-file-validate is missing (scripts/system-packages.sh installs it)")  # fmt: skip
    return subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip


def test_desktop_file_validate_accepts_the_desktop_entry() -> None:
    done = validate(ENTRY)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_the_desktop_entry_icons_and_app_agree_on_the_application_id() -> None:
    keys = entry(ENTRY)
    assert keys["Icon"] == autostart.APP_ID
    assert keys["StartupWMClass"] == autostart.WM_CLASS
    assert keys["X-GNOME-UsesNotifications"] == "true"
    assert load("render_icons").APP_ID == autostart.APP_ID
    assert load("bundle").APP_ID == autostart.APP_ID
    # The app sets it as its desktop file name (Wayland's app id).
    assert "setDesktopFileName(autostart.APP_ID)" in (ROOT / "app" / "main.py").read_text()


def test_the_autostart_entry_says_what_the_desktop_entry_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr("sys.frozen", True, raising=False)
    monkeypatch.setattr("sys.executable", "/home/me/My Apps/signoff/signoff")
    # The icon where the bundle's installer puts it (without it, the entry names the file).
    icons = tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps"
    icons.mkdir(parents=True)
    (icons / f"{autostart.APP_ID}.svg").write_bytes(autostart.APP_ICON.read_bytes())
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("SIGNOFF_HOME", raising=False)
    autostart.set_enabled(True)
    path = tmp_path / "autostart" / autostart.ENTRY
    written, app = entry(path), entry(ENTRY)
    for key in ("Name", "Comment", "Icon", "StartupWMClass", "Terminal", "Type"):
        assert written[key] == app[key], key
    # Frozen, it starts the bundle's executable, quoted as the specification asks.
    assert written["Exec"] == '"/home/me/My Apps/signoff/signoff"'
    done = validate(path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argument", "quoted"),
    [
        ("/opt/signoff/signoff", "/opt/signoff/signoff"),
        ("/a b/signoff", '"/a b/signoff"'),
        ('/a"b$c`d', '"/a\\\\"b\\\\$c\\\\`d"'),
        ("/100%/signoff", '"/100%%/signoff"'),
    ],
)
def test_an_exec_argument_is_quoted_when_it_must_be(argument: str, quoted: str) -> None:
    assert autostart._quoted(argument) == quoted


def test_the_hicolor_icons_render_at_every_size(qapp: object, tmp_path: Path) -> None:
    icons = load("render_icons")
    written = icons.hicolor(tmp_path)
    for size in icons.HICOLOR_SIZES:
        image = QImage(
            str(tmp_path / "hicolor" / f"{size}x{size}" / "apps" / f"{icons.APP_ID}.png")
        )
        assert (image.width(), image.height()) == (size, size)
        assert image.pixelColor(size // 2, size // 2).alpha() == 255  # the shield
        assert image.pixelColor(0, 0).alpha() == 0  # the tile's rounded corner
    scalable = tmp_path / "hicolor" / "scalable" / "apps" / f"{icons.APP_ID}.svg"
    assert scalable.read_bytes() == (ROOT / "resources" / "icons" / "app.svg").read_bytes()
    assert len(written) == len(icons.HICOLOR_SIZES) + 1


def test_the_windows_icon_holds_one_png_per_size(qapp: object, tmp_path: Path) -> None:
    icons = load("render_icons")
    data = icons.ico(tmp_path / "signoff.ico").read_bytes()
    reserved, kind, count = struct.unpack_from("<HHH", data)
    assert (reserved, kind, count) == (0, 1, len(icons.ICO_SIZES))
    for i, size in enumerate(icons.ICO_SIZES):
        side, _, _, _, _, _, length, offset = struct.unpack_from("<BBBBHHII", data, 6 + 16 * i)
        assert side == size % 256
        assert data[offset : offset + 8] == b"\x89PNG\r\n\x1a\n" and length > 0


def test_the_macos_iconset_has_the_names_iconutil_reads(qapp: object, tmp_path: Path) -> None:
    icons = load("render_icons")
    folder = icons.iconset(tmp_path)
    names = {p.name for p in folder.iterdir()}
    assert {"icon_16x16.png", "icon_16x16@2x.png", "icon_512x512@2x.png"} <= names
    assert QImage(str(folder / "icon_512x512@2x.png")).width() == 1024


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("PySide6/Qt/plugins/platforms/libqxcb.so", True),
        ("PySide6/Qt/plugins/platforms/libqwayland.so", True),
        ("PySide6/Qt/plugins/iconengines/libqsvgicon.so", True),
        ("PySide6/Qt/plugins/imageformats/libqsvg.so", True),
        ("PySide6/Qt/plugins/imageformats/libqjpeg.so", False),
        ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", False),
        ("PySide6/Qt/plugins/sqldrivers/libqsqlite.so", False),
        ("PySide6/Qt/translations/qtbase_de.qm", False),
        ("PySide6/Qt/lib/libQt6Qml.so.6", False),
        ("PySide6/Qt/lib/libQt6Widgets.so.6", True),
        ("cryptography/hazmat/bindings/_rust.abi3.so", True),
    ],
)
def test_the_bundle_keeps_only_the_qt_files_the_app_uses(path: str, kept: bool) -> None:
    if sys.platform != "linux":
        pytest.skip("the plugin lists checked here are Linux's")
    assert load("bundle").keep(path) is kept


def test_the_demo_server_is_a_hidden_command(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert not any(name.startswith("_") for name in commands)
    assert cli.main(["_demo-server"]) == 2  # no folder: the server's own usage
    assert "usage" in capsys.readouterr().err


def test_frozen_the_commands_signoff_starts_are_the_bundle_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    exe = tmp_path / "bundle" / "signoff"
    monkeypatch.setattr("sys.frozen", True, raising=False)
    monkeypatch.setattr("sys.executable", str(exe))
    assert demo.demo_server_command() == [str(exe), "_demo-server"]
    assert demo.signoff_command("app") == demo.signoff_command("proxy") == [str(exe)]
    assert hosts.signoff_command() == [str(exe)]
    from app.connection import signoff_command

    assert signoff_command() == [str(exe)]


def test_benchmarks_md_states_a_budget_for_the_bundle() -> None:
    unpacked, packed = budget()
    assert 0 < packed < unpacked
