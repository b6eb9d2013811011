"""Renders the application icon (resources/icons/app.svg) for the bundles, with Qt's own SVG
renderer, so no other tool is needed:

    python packaging/render_icons.py hicolor DIR    DIR/hicolor/NxN/apps/APP_ID.png for each size,
                                                    and DIR/hicolor/scalable/apps/APP_ID.svg
    python packaging/render_icons.py iconset DIR    DIR/signoff.iconset/ for macOS's iconutil
    python packaging/render_icons.py ico FILE       a Windows .ico (PNG images, 16 to 256)

Run with QT_QPA_PLATFORM=offscreen where there is no display (the build scripts set it).
"""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "resources" / "icons" / "app.svg"
APP_ID = "dev.signoff.Signoff"  # app/autostart.py's APP_ID; a test checks they agree
HICOLOR_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# iconutil's names: icon_NxN.png and its double-density twin icon_NxN@2x.png.
ICONSET_SIZES = (16, 32, 128, 256, 512)


class RenderError(Exception):
    """The SVG could not be read or drawn."""


def render(svg: Path, size: int) -> QImage:
    """The SVG drawn on a transparent square of ``size`` pixels."""
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise RenderError(f"{svg} is not an SVG Qt can draw")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    return image


def _save(image: QImage, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(path), "PNG"):
        raise RenderError(f"cannot write {path}")


def hicolor(out: Path, svg: Path = SOURCE) -> list[Path]:
    """The icon theme tree under ``out``/hicolor; the files written."""
    written = []
    for size in HICOLOR_SIZES:
        path = out / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        _save(render(svg, size), path)
        written.append(path)
    scalable = out / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(svg, scalable)
    return [*written, scalable]


def iconset(out: Path, svg: Path = SOURCE) -> Path:
    """``out``/signoff.iconset, for ``iconutil -c icns``."""
    folder = out / "signoff.iconset"
    for size in ICONSET_SIZES:
        _save(render(svg, size), folder / f"icon_{size}x{size}.png")
        _save(render(svg, size * 2), folder / f"icon_{size}x{size}@2x.png")
    return folder


def ico(path: Path, svg: Path = SOURCE) -> Path:
    """A .ico holding one PNG per size (Windows Vista and later read PNG entries)."""
    images = []
    for size in ICO_SIZES:
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        render(svg, size).save(buffer, "PNG")
        buffer.close()
        images.append((size, bytes(data.data())))
    header = struct.pack("<HHH", 0, 1, len(images))
    offset = len(header) + 16 * len(images)
    entries, blobs = b"", b""
    for size, png in images:
        side = 0 if size >= 256 else size  # 0 means 256 in an ICO directory entry
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(png), offset)
        blobs += png
        offset += len(png)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + entries + blobs)
    return path


def main(argv: list[str]) -> int:
    kinds = {"hicolor": hicolor, "iconset": iconset, "ico": ico}
    if len(argv) != 2 or argv[0] not in kinds:
        print(__doc__, file=sys.stderr)
        return 2
    app = QGuiApplication.instance() or QGuiApplication([])
    kinds[argv[0]](Path(argv[1]))
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
