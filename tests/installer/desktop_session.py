"""Helpers of the installed-app test: a private X server, the Exec line of a
.desktop entry, a screenshot, and the environment of a temporary HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def home_env(*, home: Path) -> dict[str, str]:
    """The environment of a person whose HOME is `home` (XDG folders inside it)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XDG_", "RAGDOLL_", "QT_", "VIRTUAL_ENV", "PYTHONPATH"))
        and k != "DISPLAY"
    }
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        PATH=f"{home / '.local' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def exec_argv(*, entry: Path, files: list[str] | None = None) -> list[str]:
    """The command a launcher runs for this entry's Exec line, with %F expanded
    to `files` (Desktop Entry spec: unescape, split, quotes, field codes)."""
    line = next(line for line in entry.read_text().splitlines() if line.startswith("Exec="))[
        len("Exec=") :
    ]
    line = line.replace("\\\\", "\\")
    args: list[str] = []
    current: str | None = None
    quoted = escaped = False
    for ch in line:
        if escaped:
            current, escaped = (current or "") + ch, False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted, current = not quoted, current or ""
        elif ch == " " and not quoted:
            if current is not None:
                args.append(current)
            current = None
        else:
            current = (current or "") + ch
    if current is not None:
        args.append(current)
    out: list[str] = []
    for arg in args:
        if arg in ("%F", "%f", "%U", "%u"):
            out += files or []
        elif arg.startswith("%") and arg != "%%":
            continue
        else:
            out.append(arg.replace("%%", "%"))
    return out


@contextmanager
def xvfb(*, size: str = "1280x800x24") -> Iterator[str]:
    """A private X server; yields its DISPLAY value."""
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", "1", "-screen", "0", size, "-nolisten", "tcp"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        number = server.stdout.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not report a display")
        yield f":{number}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def wait_for_window(*, display: str, name: str, timeout_s: float) -> str:
    """The X window id of a visible window titled `name`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--name", f"^{name}$"],
            capture_output=True,
            text=True,
            env={**os.environ, "DISPLAY": display},
        ).stdout.split()
        if found:
            return found[0]
        time.sleep(0.5)
    raise TimeoutError(f"no window named {name!r} on {display} after {timeout_s:.0f} s")


def screenshot(*, display: str, out: Path) -> Path:
    subprocess.run(
        ["import", "-display", display, "-window", "root", str(out)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out


def missing_tools() -> list[str]:
    return [t for t in ("Xvfb", "xdotool", "import") if shutil.which(t) is None]
