"""Python code run in a fresh interpreter whose home folder is empty: what a library
writes there (a client id, a consent file) shows, and pytest is not loaded (some
libraries switch their telemetry off under pytest by themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def run_with_empty_home(*, code: str, tmp_path: Path, unset: tuple[str, ...]) -> tuple[str, Path]:
    """`code`'s stdout and the home folder it ran with; `unset`: environment variables
    the child must not inherit (those that would switch telemetry off)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env |= {"HOME": str(home), "PYTHONPATH": str(_REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout, home
