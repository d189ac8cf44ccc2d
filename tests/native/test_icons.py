from __future__ import annotations

from pathlib import Path

import pytest

from native.icons import icons_dir, render_pngs


def test_the_svg_renders_to_drawn_pngs_of_each_size(tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    written = render_pngs(svg=icons_dir() / "ragdoll.svg", icons=tmp_path, sizes=(16, 64))
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "hicolor/16x16/apps/ragdoll.png",
        "hicolor/64x64/apps/ragdoll.png",
    ]
    image = QImage(str(written[1]))
    assert (image.width(), image.height()) == (64, 64)
    # The blue tile is drawn in the middle; the corners outside its rounding stay clear.
    assert image.pixelColor(32, 8).blue() > 150 and image.pixelColor(32, 8).alpha() == 255
    assert image.pixelColor(0, 0).alpha() == 0


def test_a_broken_svg_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.svg"
    bad.write_text("<svg")
    with pytest.raises(ValueError, match="not a valid SVG"):
        render_pngs(svg=bad, icons=tmp_path, sizes=(16,))
