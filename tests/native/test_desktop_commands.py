"""`ragdoll uninstall`, `ragdoll autostart` and `ragdoll open` (app/commands/desktop.py)
against an installed layout in a temporary HOME; no engine, no window."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.cli import main
from native.linux import InstallLayout, integrate
from native.xdg import xdg_dirs


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "home"
    env = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "RAGDOLL_HOME": str(home / "ragdoll"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    dirs = xdg_dirs()
    layout = InstallLayout.default(dirs=dirs)
    (layout.venv / "bin").mkdir(parents=True)
    (layout.app_dir / "install-info.json").write_text(json.dumps({"version": "0.1.0"}))
    integrate(layout=layout, dirs=dirs)
    index = home / "ragdoll" / "data" / "index"
    index.mkdir(parents=True)
    (index / "chunks.lance").write_text("index")
    docs = home / "Documents"
    docs.mkdir()
    (docs / "a.pdf").write_text("mine")
    return {
        "home": home,
        "app": layout.app_dir,
        "index": index,
        "docs": docs,
        "entry": dirs.applications / "ragdoll.desktop",
    }


def test_uninstall_without_a_choice_and_without_a_terminal_removes_nothing(
    installed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["uninstall", "--yes"]) == 1
    assert "--keep-index or --remove-index" in capsys.readouterr().err
    assert installed["app"].is_dir() and installed["entry"].is_file()


def test_uninstall_keep_index(installed: dict[str, Path]) -> None:
    assert main(["uninstall", "--keep-index", "--yes"]) == 0
    assert not installed["app"].exists() and not installed["entry"].exists()
    assert (installed["index"] / "chunks.lance").read_text() == "index"
    assert (installed["docs"] / "a.pdf").read_text() == "mine"


def test_uninstall_remove_index(installed: dict[str, Path]) -> None:
    assert main(["uninstall", "--remove-index", "--yes"]) == 0
    assert not installed["app"].exists() and not installed["index"].exists()
    assert (installed["docs"] / "a.pdf").read_text() == "mine"


def test_autostart_on_status_off(
    installed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    entry = installed["home"] / "config" / "autostart" / "ragdoll-engine.desktop"
    assert main(["autostart", "on"]) == 0
    assert str(installed["app"] / "venv" / "bin" / "ragdoll") in entry.read_text()
    main(["autostart", "status"])
    assert capsys.readouterr().out.strip().endswith("on")
    assert main(["autostart", "off"]) == 0 and not entry.exists()
    # Uninstalling also turns login start off.
    main(["autostart", "on"])
    assert main(["uninstall", "--keep-index", "--yes"]) == 0 and not entry.exists()


def test_open_with_only_missing_paths_fails_before_any_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask-folder", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert "not found, not added" in err and "nothing to open" in err


def test_open_adds_the_paths_once_the_window_is_connected_and_only_once(
    qtbot: QtBot, tmp_path: Path
) -> None:
    from app.commands.desktop import add_on_connect
    from app.main_window import MainWindow
    from tests.app.fake_client import FakeClient

    client = FakeClient()
    chosen = str(tmp_path / "chosen")
    window = MainWindow(client_factory=lambda: client, choose_folder=lambda _parent: chosen)
    qtbot.addWidget(window)
    add_on_connect(window=window, paths=["/docs/a"], choose_folder=True, samples=True)
    window.show()
    qtbot.waitUntil(lambda: len(client.called("ingest")) == 3, timeout=10_000)
    added = [call["paths"] for call in client.called("ingest")]
    assert ["/docs/a"] in added and [chosen] in added
    assert any(p[0].endswith("samples") for p in added)
    window.bridge.connect_engine()  # a reconnect
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=5000)
    qtbot.wait(300)
    assert len(client.called("ingest")) == 3


def test_uninstall_of_a_package_managed_install_points_to_apt(
    installed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    info = installed["app"] / "install-info.json"
    info.write_text(json.dumps({"version": "0.1.0", "managed_by": "deb"}))
    assert main(["uninstall", "--keep-index", "--yes"]) == 1
    assert "sudo apt remove ragdoll" in capsys.readouterr().err
    assert installed["app"].is_dir() and installed["entry"].is_file()


def test_uninstall_without_a_terminal_says_what_it_did_in_a_notification(
    installed: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Double-clicked uninstall.sh, or the menu's Uninstall: the outcome goes to
    notify-send (here a stand-in that records its arguments)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "notified"
    sender = bin_dir / "notify-send"
    sender.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {log}\necho >> {log}\n')
    sender.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert main(["uninstall", "--gui", "--keep-index"]) == 0
    assert not installed["app"].exists()
    assert "RAGDoll is uninstalled|" in log.read_text()
    assert "The index stays in" in log.read_text()
    # Nothing to uninstall any more: why it stopped, in a notification too.
    assert main(["uninstall", "--gui", "--keep-index"]) == 1
    assert "RAGDoll was not uninstalled|" in log.read_text().splitlines()[-1]


@pytest.mark.parametrize(
    ("label", "answer"),
    [
        ("Uninstall, keep the index", "keep"),
        ("Uninstall and remove the index", "remove"),
        ("Cancel", None),
    ],
)
def test_the_uninstall_dialog_asks_keep_remove_or_cancel(
    qtbot: QtBot, label: str, answer: str | None
) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.commands.uninstall import ask_in_dialog

    def click() -> None:
        box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox))
        assert "documents are never touched" in box.text()
        next(b for b in box.buttons() if b.text().replace("&", "") == label).click()

    QTimer.singleShot(200, click)
    assert ask_in_dialog() == answer
