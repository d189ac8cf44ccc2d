#!/usr/bin/env python3
"""Install RAGDoll from this bundle for the current user (no root needed).

    ./install.sh            (or: python3 install.py [options])

Creates a private environment under the data folder (Linux: ~/.local/share/
ragdoll-desktop, or --prefix), installs into it the PyTorch build for this machine
(CUDA where an NVIDIA driver is present, the CPU build otherwise; see
torch_choice.py), then the app from its wheel with the pinned versions of
constraints.txt, using the pure-Python wheels in wheels/ and pip's own
configuration (index, find-links) for the rest. Then the desktop integration: menu
entry, icons, "Ask RAGDoll about this folder", the `ragdoll` command.

Standard library only: it runs with the system Python, 3.11 or newer. Installing
again upgrades in place and keeps the index; a failed upgrade restores the old copy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from torch_choice import TorchChoice, choose_torch, probe_machine  # noqa: E402

MIN_PYTHON = (3, 11)
INFO = "install-info.json"


def default_prefix() -> Path:
    system = platform.system()
    home = Path.home()
    if system == "Darwin":
        return home / "Library" / "Application Support" / "ragdoll-desktop"
    if system == "Windows":
        return Path(os.environ.get("LOCALAPPDATA", home)) / "RAGDoll" / "app"
    data = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data) if os.path.isabs(data) else home / ".local" / "share"
    return base / "ragdoll-desktop"


def bundle_version() -> str:
    return json.loads((HERE / "bundle.json").read_text(encoding="utf-8"))["version"]


def app_wheel() -> Path:
    wheels = sorted(HERE.glob("ragdoll_desktop-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"install: expected one ragdoll_desktop wheel in {HERE}, found {wheels}")
    return wheels[0]


def venv_python(venv: Path) -> Path:
    if platform.system() == "Windows":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def plan(
    *, prefix: Path, offline: bool, torch_override: str | None, integrate: bool
) -> tuple[TorchChoice, list[list[str]]]:
    """The commands an install runs, in order, and the torch choice behind them."""
    env = dict(os.environ)
    if torch_override:
        env["RAGDOLL_TORCH"] = torch_override
    choice = choose_torch(facts=probe_machine(env=env))
    venv = prefix / "venv"
    py = str(venv_python(venv))
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    local = ["-c", str(HERE / "constraints.txt"), "--find-links", str(HERE / "wheels")]
    vendored = sorted(str(w) for w in (HERE / "wheels").glob("*.whl"))
    commands = [[sys.executable, "-m", "venv", str(venv)]]
    if vendored:
        # First, and from the bundle only: pip would otherwise fetch the same
        # versions again from an index it finds before the find-links.
        commands.append([*pip, "--no-index", "--no-deps", *vendored])
    commands += [
        [*pip, *local, *choice.pip_args(offline=offline)],
        [*pip, *local, str(app_wheel())],
    ]
    if integrate:
        commands.append([py, "-m", "native.linux", "integrate", "--app-dir", str(prefix)])
    return choice, commands


def installed_version(prefix: Path) -> str | None:
    try:
        return json.loads((prefix / INFO).read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def run_install(*, prefix: Path, choice: TorchChoice, commands: list[list[str]]) -> None:
    venv = prefix / "venv"
    old = prefix / "venv.old"
    prefix.mkdir(parents=True, exist_ok=True)
    if old.exists():
        shutil.rmtree(old)
    if venv.exists():
        venv.rename(old)  # kept until the new one works: a failed upgrade loses nothing
    try:
        for argv in commands:
            print("+ " + " ".join(argv), flush=True)
            subprocess.run(argv, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        shutil.rmtree(venv, ignore_errors=True)
        if old.exists():
            old.rename(venv)
            print("install: failed; the previous installation is back in place", file=sys.stderr)
        raise SystemExit(f"install: {e}") from e
    shutil.rmtree(old, ignore_errors=True)
    info = {
        "version": bundle_version(),
        "torch": choice.requirement,
        "torch_reason": choice.reason,
        "python": sys.version.split()[0],
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (prefix / INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install RAGDoll for this user.")
    parser.add_argument("--prefix", type=Path, default=None, help="where the app goes")
    parser.add_argument(
        "--torch", default=None, help="cpu, cuda, or a CUDA build such as cu128 (default: detect)"
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="add no PyTorch index; pip's own configuration and wheels/ must have everything",
    )
    parser.add_argument("--no-integrate", action="store_true", help="no menu entry, icons, etc.")
    parser.add_argument("--if-needed", action="store_true", help="do nothing when up to date")
    parser.add_argument("--dry-run", action="store_true", help="print the plan as JSON and stop")
    args = parser.parse_args(argv)
    if sys.version_info < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        raise SystemExit(f"install: RAGDoll needs Python {need} or newer, this is {sys.version}")
    prefix = (args.prefix or default_prefix()).expanduser().resolve()
    if args.if_needed and installed_version(prefix) == bundle_version():
        return 0
    integrate = not args.no_integrate and platform.system() == "Linux"
    try:
        choice, commands = plan(
            prefix=prefix, offline=args.offline, torch_override=args.torch, integrate=integrate
        )
    except ValueError as e:
        raise SystemExit(f"install: {e}") from e
    if args.dry_run:
        body = {
            "prefix": str(prefix),
            "version": bundle_version(),
            "torch": {
                "variant": choice.variant,
                "requirement": choice.requirement,
                "index_url": choice.index_url,
                "reason": choice.reason,
            },
            "commands": commands,
        }
        print(json.dumps(body, indent=2))
        return 0
    print(f"Installing RAGDoll {bundle_version()} into {prefix}")
    print(f"PyTorch: {choice.requirement} ({choice.reason})", flush=True)
    run_install(prefix=prefix, choice=choice, commands=commands)
    launcher = prefix / "venv" / ("Scripts" if platform.system() == "Windows" else "bin")
    print(
        f"RAGDoll is installed. Start it from the applications menu, or run {launcher / 'ragdoll'}."
    )
    if integrate:
        print(f"To remove it: {prefix / 'uninstall.sh'} (your documents are never touched).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
