"""Benchmarks behind `ragdoll bench KIND`: one module per kind, each exposing
`add_arguments(parser)` and `run(args) -> dict` (see app/commands/bench.py).

They live beside the product, not in it: the wheel ships `app`, `engine`, `native` and
`resources` only, and `ragdoll bench` finds this package in the checkout it was
installed from (an editable install)."""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def child_env() -> dict[str, str]:
    """The environment for a benchmark's child process run as `python -m bench.…`: the
    checkout first on its path, whatever directory the parent was started from."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH")]))
    return env


def peer_env() -> dict[str, str]:
    """`child_env()` for a peer's process (llama.cpp, Accelerate): OpenMP's wait policy
    as the person had it, not the engine's passive one (engine/__init__.py)."""
    from engine import USER_OPENMP_WAIT

    env = child_env()
    env.pop("OMP_WAIT_POLICY", None)
    if USER_OPENMP_WAIT is not None:
        env["OMP_WAIT_POLICY"] = USER_OPENMP_WAIT
    return env
