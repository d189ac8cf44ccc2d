from __future__ import annotations

from app.batch.visible import visible


def test_controls_and_escapes_become_visible_text() -> None:
    assert visible("\x1b[2Jclear") == "\\x1b[2Jclear"
    assert visible("bell\x07 del\x7f c1\x9b") == "bell\\x07 del\\x7f c1\\x9b"
    assert visible("evil\u202etxt.exe") == "evil\\u202etxt.exe"  # a right-to-left override
    assert visible("two\nlines\tand tab", keep="\n\t") == "two\nlines\tand tab"
    assert visible("two\nlines") == "two\\x0alines"
    assert visible("Café, naïve, 東京 — fine") == "Café, naïve, 東京 — fine"
