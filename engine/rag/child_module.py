"""Running one of the engine's modules in a child process: work whose memory (NNCF's
quantization, a word table's lists) should leave with the process that used it.

The child is started through this module (`python -m engine.rag.child_module --parent=PID
MODULE ARGS...`), which ties its life to the engine's before it runs the module: an
engine killed while a child worked left it running for minutes, with its memory."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from collections.abc import Sequence

_ERROR_TAIL = 600  # characters of the child's last stderr line kept (int8's `.failed`)


def run_module(*, module: str, args: Sequence[str], timeout_s: float, what: str) -> None:
    """`python -m module *args` with this process's import path; raises RuntimeError
    naming `what` with the child's last words when it fails, is killed or hangs. Its
    stdout is dropped (progress bars: a `--json` bench's stdout must stay JSON). The
    child goes when this process does."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    command = [sys.executable, "-m", __name__, f"--parent={os.getpid()}", module, *args]
    try:
        done = subprocess.run(
            command,
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


def die_with_parent(parent: int) -> None:
    """This process goes when `parent` does: on Linux the kernel kills it
    (PR_SET_PDEATHSIG); elsewhere it only ends at once when the parent is gone
    already."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)


def main(argv: Sequence[str] | None = None) -> None:
    """`--parent=PID MODULE ARGS...`: run MODULE as `python -m` would, tied to PID."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or not args[0].startswith("--parent="):
        raise SystemExit("usage: python -m engine.rag.child_module --parent=PID MODULE [ARGS...]")
    die_with_parent(int(args[0].removeprefix("--parent=")))
    module, rest = args[1], args[2:]
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
