"""Find the user's engine, or start one: one engine per user, found through an
endpoint file in the runtime folder and guarded by a lock file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from engine.errors import EngineUnavailableError
from engine.json_file import write_json
from engine.offline import engine_environment
from engine.paths import Paths


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where a running engine listens, and the token it wants."""

    base_url: str
    token: str


@dataclass(frozen=True, kw_only=True)
class EngineHandle:
    endpoint: Endpoint
    started_here: bool


class EngineLock:
    """An exclusive lock on a file, released by the OS when the process dies,
    so a killed engine never blocks the next one."""

    def __init__(self, *, file: Path) -> None:
        self.file = file
        self._handle: IO[str] | None = None

    def acquire(self) -> bool:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        handle = self.file.open("a+")
        try:
            _lock_file(handle)
        except OSError:
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _lock_file(handle: IO[str]) -> None:
    if os.name == "nt":
        import msvcrt

        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def write_endpoint(*, paths: Paths, url: str, pid: int) -> None:
    write_json(file=paths.endpoint_file, data={"url": url, "pid": pid}, indent=None)


def remove_endpoint(*, paths: Paths, pid: int) -> None:
    try:
        if json.loads(paths.endpoint_file.read_text()).get("pid") == pid:
            paths.endpoint_file.unlink()
    except (FileNotFoundError, ValueError):
        pass


def read_endpoint(*, paths: Paths) -> Endpoint | None:
    try:
        data = json.loads(paths.endpoint_file.read_text())
        token = paths.token_file.read_text().strip()
    except (FileNotFoundError, ValueError):
        return None
    if not token or "url" not in data:
        return None
    return Endpoint(base_url=data["url"], token=token)


def engine_alive(*, endpoint: Endpoint, timeout_s: float = 2.0) -> bool:
    try:
        r = httpx.get(
            f"{endpoint.base_url}/v1/status",
            timeout=timeout_s,
            trust_env=False,
            headers={"Authorization": f"Bearer {endpoint.token}"},
        )
    except httpx.HTTPError:
        return False
    return r.status_code == 200


def endpoint_process_alive(*, paths: Paths) -> bool:
    """Whether the process the endpoint file names still runs (it may be too busy to
    answer yet: a first start under load imports for seconds after it listens)."""
    import psutil

    try:
        pid = int(json.loads(paths.endpoint_file.read_text())["pid"])
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return False


def ensure_engine(*, paths: Paths, start: bool, wait_s: float = 60.0) -> EngineHandle:
    endpoint = read_endpoint(paths=paths)
    if endpoint is not None and engine_alive(endpoint=endpoint):
        return EngineHandle(endpoint=endpoint, started_here=False)
    if endpoint is not None and endpoint_process_alive(paths=paths):
        # Listening but slow to answer: wait for it rather than call it gone (which
        # made `ragdoll status` say "no engine is running" just after a start).
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and endpoint_process_alive(paths=paths):
            if engine_alive(endpoint=endpoint, timeout_s=5.0):
                return EngineHandle(endpoint=endpoint, started_here=False)
            time.sleep(0.2)
        if endpoint_process_alive(paths=paths):
            raise EngineUnavailableError(
                f"the engine is running but did not answer within {wait_s:.0f} s; "
                f"its log is {paths.engine_log}"
            )
    if not start:
        raise EngineUnavailableError("no engine is running (start one with `ragdoll engine`)")
    process = start_engine_process(paths=paths)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        endpoint = read_endpoint(paths=paths)
        if endpoint is not None and engine_alive(endpoint=endpoint, timeout_s=1.0):
            return EngineHandle(endpoint=endpoint, started_here=process.poll() is None)
        if process.poll() is not None and process.returncode != 3:
            raise EngineUnavailableError(
                f"the engine stopped while starting (exit code {process.returncode}); "
                f"its log is {paths.engine_log}"
            )
        time.sleep(0.1)
    raise EngineUnavailableError(
        f"the engine did not start within {wait_s:.0f} s; its log is {paths.engine_log}"
    )


def start_engine_process(*, paths: Paths) -> subprocess.Popen[bytes]:
    """A detached `python -m engine`: it outlives the window when asked to."""
    paths.ensure()
    fd = os.open(paths.engine_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = os.fdopen(fd, "ab")
    kwargs: dict[str, object] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    env = engine_environment(os.environ)  # engine/offline.py
    return subprocess.Popen(
        [sys.executable, "-m", "engine"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
        **kwargs,  # type: ignore[arg-type]
    )
