"""Running one of the engine's modules in a child process: work whose memory (NNCF's
quantization, a word table's lists) should leave with the process that used it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

_ERROR_TAIL = 600  # characters of the child's last stderr line kept (int8's `.failed`)


def run_module(*, module: str, args: Sequence[str], timeout_s: float, what: str) -> None:
    """`python -m module *args` with this process's import path; raises RuntimeError
    naming `what` with the child's last words when it fails, is killed or hangs. Its
    stdout is dropped (progress bars: a `--json` bench's stdout must stay JSON)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{what} took over {timeout_s:.0f} s") from e
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"]
        tail = lines[-1][-_ERROR_TAIL:]  # the error, or the last words of a crash
        raise RuntimeError(f"{what} process ended with {done.returncode}: {tail}")
