"""The app icon: the SVG source and the hicolor PNG sizes rendered from it.

`python -m native.icons` renders resources/icons/hicolor/NxN/apps/ragdoll.png with
Qt's SVG renderer; the PNGs are committed so that installing needs no Qt at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The sizes the freedesktop icon theme spec and common docks ask for.
SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def icons_dir() -> Path:
    import resources

    return Path(resources.__file__).parent / "icons"


def hicolor_png(*, icons: Path, size: int, name: str = "ragdoll") -> Path:
    return icons / "hicolor" / f"{size}x{size}" / "apps" / f"{name}.png"


def render_pngs(*, svg: Path, icons: Path, sizes: tuple[int, ...] = SIZES) -> list[Path]:
    """Render `svg` at each size into icons/hicolor; returns the files written."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(["render-icons"])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg}: not a valid SVG")
    written = []
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        out = hicolor_png(icons=icons, size=size, name=svg.stem)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not image.save(str(out), "PNG"):
            raise OSError(f"could not write {out}")
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="render the hicolor PNGs from the SVG icon")
    parser.add_argument("--icons", type=Path, default=None, help="icon folder (resources/icons)")
    args = parser.parse_args(argv)
    icons = args.icons or icons_dir()
    for path in render_pngs(svg=icons / "ragdoll.svg", icons=icons):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
