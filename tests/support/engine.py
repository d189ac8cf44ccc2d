"""A real engine process in a private RAGDOLL_HOME, for end-to-end tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from engine.wire import IngestProgress


@dataclass(frozen=True, kw_only=True)
class RunningEngine:
    home: Path
    client: EngineClient
    pid: int

    def env(self) -> dict[str, str]:
        """The environment for a `ragdoll` subprocess that talks to this engine."""
        return {**os.environ, "RAGDOLL_HOME": str(self.home), "HF_HUB_OFFLINE": "1"}

    def ingest(self, *paths: Path) -> IngestProgress:
        job = self.client.add_paths(paths=[str(p) for p in paths])
        last = job
        for last in self.client.ingest_events(job_id=job.job_id):  # noqa: B007
            pass
        return last

    def ragdoll(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )


@contextmanager
def running_engine(*, home: Path) -> Iterator[RunningEngine]:
    previous = os.environ.get("RAGDOLL_HOME")
    os.environ["RAGDOLL_HOME"] = str(home)
    try:
        paths = resolve_paths()
        client = EngineClient.connect(paths=paths, start=True, wait_s=120)
        pid = client.status().pid
        try:
            yield RunningEngine(home=home, client=client, pid=pid)
        finally:
            _stop(client=client, pid=pid, endpoint_file=paths.endpoint_file)
    finally:
        if previous is None:
            os.environ.pop("RAGDOLL_HOME", None)
        else:
            os.environ["RAGDOLL_HOME"] = previous


def _stop(*, client: EngineClient, pid: int, endpoint_file: Path) -> None:
    with suppress(EngineUnavailableError, EngineRequestError):
        client.shutdown()
    client.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.1)
    if process_alive(pid):
        os.kill(pid, 9)
    try:
        if json.loads(endpoint_file.read_text()).get("pid") == pid:
            endpoint_file.unlink()
    except (FileNotFoundError, ValueError):
        pass


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
