"""engine/__init__.py: a process that imports the engine before torch has OpenMP's threads
wait passively, unless the person chose a policy; benchmarks hand a peer the person's own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench import CHECKOUT

_PROBE = (
    "import os, engine, bench; "
    "print(os.environ.get('OMP_WAIT_POLICY'), bench.peer_env().get('OMP_WAIT_POLICY'))"
)


def _probe(policy: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=CHECKOUT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.split()


@pytest.mark.parametrize(
    ("chosen", "engine_has", "peer_has"),
    [(None, "PASSIVE", "None"), ("ACTIVE", "ACTIVE", "ACTIVE")],
)
def test_the_engine_waits_passively_unless_told_and_peers_keep_the_persons_policy(
    chosen: str | None, engine_has: str, peer_has: str
) -> None:
    assert _probe(chosen) == [engine_has, peer_has]
