from __future__ import annotations

import pytest

import app.main
from app.cli import main


def test_bare_ragdoll_and_ragdoll_gui_open_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[list[str]] = []

    def fake_run_gui(*, argv: list[str]) -> int:
        runs.append(argv)
        return 7

    monkeypatch.setattr(app.main, "run_gui", fake_run_gui)
    assert main(["gui"]) == 7
    assert main([]) == 7
    assert len(runs) == 2
