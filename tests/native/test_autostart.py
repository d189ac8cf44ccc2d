from __future__ import annotations

import plistlib
import sys
from pathlib import Path

import pytest

from native import autostart
from native.xdg import xdg_dirs

LAUNCHER = Path("/home/ann/.local/share/ragdoll-desktop/venv/bin/ragdoll")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG autostart is Linux")
def test_linux_autostart_is_written_to_the_xdg_config_home_and_removed(tmp_path: Path) -> None:
    dirs = xdg_dirs(env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert not autostart.is_enabled(launcher=LAUNCHER, dirs=dirs)
    path = autostart.enable(launcher=LAUNCHER, dirs=dirs)
    assert path == tmp_path / "cfg" / "autostart" / "ragdoll-engine.desktop"
    text = path.read_text()
    assert f"Exec={LAUNCHER} engine\n" in text and "NoDisplay=true" in text
    assert autostart.is_enabled(launcher=LAUNCHER, dirs=dirs)
    assert autostart.disable(launcher=LAUNCHER, dirs=dirs) == path
    assert autostart.disable(launcher=LAUNCHER, dirs=dirs) is None
    assert not path.exists()


def test_the_launch_agent_runs_the_engine_at_load_without_keep_alive() -> None:
    agent = autostart.launch_agent(launcher=LAUNCHER, home=Path("/Users/ann"))
    assert agent.path == Path("/Users/ann/Library/LaunchAgents/org.ragdoll.RAGDoll.engine.plist")
    plist = plistlib.loads(agent.text.encode())
    assert plist["Label"] == "org.ragdoll.RAGDoll.engine"
    assert plist["ProgramArguments"] == [str(LAUNCHER), "engine"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is False


def test_the_windows_run_value_and_reg_file_quote_the_path() -> None:
    exe = r"C:\Users\Ann Lee\AppData\Local\Programs\RAGDoll\app\venv\Scripts\pythonw.exe"
    name, command = autostart.windows_run_value(launcher=exe)
    assert name == "RAGDoll engine" and command == f'"{exe}" engine'
    reg = autostart.windows_reg_file(launcher=exe)
    assert reg.startswith("Windows Registry Editor Version 5.00\r\n")
    assert r"[HKEY_CURRENT_USER\Software\Microsoft\Windows\CurrentVersion\Run]" in reg
    assert r'"RAGDoll engine"="\"C:\\Users\\Ann Lee\\' in reg
