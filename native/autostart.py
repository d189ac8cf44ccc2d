"""Start the engine at login, for background folder watching, when the person asks.

Linux: an XDG autostart entry (written and removed here). macOS: a LaunchAgent
plist; Windows: a value under HKCU\\...\\Run. Those two are generated here as text
(unit-tested) and written by the platform's installer or by `enable` on that OS.
"""

from __future__ import annotations

import platform
import plistlib
from dataclasses import dataclass
from pathlib import Path

from native.desktop_entry import autostart_entry
from native.identity import IDENTITY, AppIdentity
from native.xdg import XdgDirs, xdg_dirs

WINDOWS_RUN_KEY = r"HKEY_CURRENT_USER\Software\Microsoft\Windows\CurrentVersion\Run"


@dataclass(frozen=True, kw_only=True)
class AutostartFile:
    path: Path
    text: str


def linux_autostart(
    *, launcher: Path, dirs: XdgDirs, identity: AppIdentity = IDENTITY
) -> AutostartFile:
    return AutostartFile(
        path=dirs.autostart / f"{identity.app_id}-engine.desktop",
        text=autostart_entry(launcher=launcher, identity=identity),
    )


def launch_agent(*, launcher: Path, home: Path, identity: AppIdentity = IDENTITY) -> AutostartFile:
    """~/Library/LaunchAgents/<label>.plist: run the engine at login, not kept alive
    (a person who quits it means it)."""
    label = f"{identity.reverse_dns}.engine"
    plist = {
        "Label": label,
        "ProgramArguments": [str(launcher), "engine"],
        "RunAtLoad": True,
        "KeepAlive": False,
        "ProcessType": "Background",
        "StandardErrorPath": str(home / "Library" / "Logs" / identity.name / "engine-login.log"),
    }
    return AutostartFile(
        path=home / "Library" / "LaunchAgents" / f"{label}.plist",
        text=plistlib.dumps(plist, sort_keys=False).decode("utf-8"),
    )


def windows_run_value(*, launcher: str, identity: AppIdentity = IDENTITY) -> tuple[str, str]:
    """(value name, command line) for the HKCU Run key."""
    return f"{identity.name} engine", f'"{launcher}" engine'


def windows_reg_file(*, launcher: str, identity: AppIdentity = IDENTITY) -> str:
    """A .reg file adding the Run value (regedit's format: backslashes and quotes escaped)."""
    name, command = windows_run_value(launcher=launcher, identity=identity)
    data = command.replace("\\", "\\\\").replace('"', '\\"')
    return (
        f'Windows Registry Editor Version 5.00\r\n\r\n[{WINDOWS_RUN_KEY}]\r\n"{name}"="{data}"\r\n'
    )


def enable(*, launcher: Path, dirs: XdgDirs | None = None) -> Path:
    """Turn login start on for this user; returns the file written."""
    entry = _native_file(launcher=launcher, dirs=dirs)
    entry.path.parent.mkdir(parents=True, exist_ok=True)
    entry.path.write_text(entry.text, encoding="utf-8")
    return entry.path


def disable(*, launcher: Path, dirs: XdgDirs | None = None) -> Path | None:
    """Turn login start off; returns the file removed, or None when it was off."""
    entry = _native_file(launcher=launcher, dirs=dirs)
    try:
        entry.path.unlink()
    except FileNotFoundError:
        return None
    return entry.path


def is_enabled(*, launcher: Path, dirs: XdgDirs | None = None) -> bool:
    return _native_file(launcher=launcher, dirs=dirs).path.exists()


def _native_file(*, launcher: Path, dirs: XdgDirs | None) -> AutostartFile:
    dirs = dirs or xdg_dirs()
    system = platform.system()
    if system == "Darwin":
        return launch_agent(launcher=launcher, home=dirs.home)
    if system == "Windows":
        raise NotImplementedError(
            "on Windows the installer writes the Run value (installer/windows); "
            "see native.autostart.windows_run_value"
        )
    return linux_autostart(launcher=launcher, dirs=dirs)
