"""Find the user's engine, or start one: one engine per user, found through an
endpoint file in the runtime folder and guarded by a lock file. The token goes only
to an engine that proved who it is (docs/api.md, "How a client knows the engine")."""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal
from urllib.parse import urlsplit

import httpx

from engine.errors import EngineUnavailableError
from engine.json_file import write_json
from engine.paths import Paths
from engine.service.auth import IDENTITY_PATH, identity_proof
from engine.service.offline import engine_environment

log = logging.getLogger(__name__)
# psutil computes a start time from the boot time and the process's clock ticks: the
# same process reads the same to the tick; another one started later differs by more.
_START_TIME_SLACK_S = 0.05


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where a running engine listens, and the token it wants."""

    base_url: str
    token: str
    pid: int = 0  # the engine's process, and its start time (psutil's create_time)
    started: float = 0.0


@dataclass(frozen=True, kw_only=True)
class EngineHandle:
    endpoint: Endpoint
    started_here: bool


@dataclass(frozen=True, kw_only=True)
class ProcessRecord:
    """Which process holds the engine lock: its pid and its start time, which a
    pid reused by another program after the engine died does not share."""

    pid: int
    started: float


class EngineLock:
    """An exclusive lock on a file, released by the OS when the process dies,
    so a killed engine never blocks the next one. The holder writes its pid and
    start time in it (`ProcessRecord`)."""

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

    def record(self, *, process: ProcessRecord) -> None:
        """Say who holds the lock (after `acquire`)."""
        if self._handle is None:
            raise RuntimeError("the lock is not held")
        try:
            self._handle.seek(0)
            self._handle.truncate()
            self._handle.write(json.dumps({"pid": process.pid, "started": process.started}))
            self._handle.flush()
        except OSError as e:  # a full disk: the endpoint file still names the process
            log.warning("could not write the engine lock's record: %s", e)

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


def this_process() -> ProcessRecord:
    return process_record(pid=os.getpid())


def process_record(*, pid: int) -> ProcessRecord:
    """Process `pid` as it runs now (started 0.0: none runs, and none ever matches)."""
    return ProcessRecord(pid=pid, started=_start_time(pid) or 0.0)


def process_runs(*, process: ProcessRecord) -> bool:
    """Whether `process` still runs: its pid, started when it was (not a pid reused by a
    program started since)."""
    started = _start_time(process.pid)
    return process.started > 0 and started is not None and _same_time(started, process.started)


def write_endpoint(*, paths: Paths, url: str, process: ProcessRecord) -> None:
    data = {"url": url, "pid": process.pid, "started": process.started}
    write_json(file=paths.endpoint_file, data=data, indent=None)


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
        return Endpoint(
            base_url=str(data["url"]),
            token=token,
            pid=int(data.get("pid", 0)),
            started=float(data.get("started", 0.0)),
        )
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
        return None


def endpoint_process_alive(*, paths: Paths) -> bool:
    """Whether the process the endpoint file names still runs (it may be too busy to
    answer yet: a first start under load imports for seconds after it listens): the
    same pid and start time in the endpoint file, the lock file and the process table."""
    endpoint = read_endpoint(paths=paths)
    return endpoint is not None and _recorded_process_runs(paths=paths, endpoint=endpoint)


def _recorded_process_runs(*, paths: Paths, endpoint: Endpoint) -> bool:
    if endpoint.pid <= 0 or not endpoint.token:
        return False
    try:
        lock = json.loads(paths.engine_lock.read_text())
        holder = ProcessRecord(pid=int(lock["pid"]), started=float(lock["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if holder.pid != endpoint.pid or not _same_time(holder.started, endpoint.started):
        return False
    started = _start_time(endpoint.pid)
    return started is not None and _same_time(started, endpoint.started)


def _start_time(pid: int) -> float | None:
    """When process `pid` started (None: none runs, or a zombie)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.create_time()
    except (psutil.Error, OSError):
        return None


def _same_time(a: float, b: float) -> bool:
    return abs(a - b) < _START_TIME_SLACK_S


def prove_identity(
    *, endpoint: Endpoint, timeout_s: float = 2.0
) -> Literal["proven", "silent", "impostor"]:
    """Ask what listens at the endpoint to prove it is the engine, without the token:
    "proven", "silent" (no answer yet: starting, or busy) or "impostor" (an answer,
    but not the engine's). Only after "proven" does the token go out."""
    challenge = secrets.token_hex(32)
    port = urlsplit(endpoint.base_url).port
    try:
        r = httpx.get(
            f"{endpoint.base_url}{IDENTITY_PATH}",
            params={"challenge": challenge},
            timeout=timeout_s,
            trust_env=False,
        )
    except httpx.HTTPError:
        return "silent"
    if r.status_code in (502, 503, 504):
        return "silent"
    try:
        body = r.json() if r.status_code == 200 else None
    except ValueError:  # an answer, but not JSON: not the engine
        body = None
    if not isinstance(body, dict) or port is None or body.get("pid") != endpoint.pid:
        return "impostor"
    expected = identity_proof(
        token=endpoint.token, challenge=challenge, pid=endpoint.pid, port=port
    )
    proof = body.get("proof")
    if not isinstance(proof, str) or not hmac.compare_digest(proof, expected):
        return "impostor"
    return "proven"


def engine_alive(*, endpoint: Endpoint, timeout_s: float = 2.0) -> bool:
    return prove_identity(endpoint=endpoint, timeout_s=timeout_s) == "proven"


def ensure_engine(
    *, paths: Paths, start: bool, wait_s: float = 60.0, stop_with_caller: bool = False
) -> EngineHandle:
    """Attach to the user's engine, or start one. The token is sent to no one before
    the endpoint's process is the lock's holder and it proved it holds the token: a
    dead engine's endpoint file leads to whatever took its port since.

    `stop_with_caller`: an engine started here stops when this process ends, however
    it ends, unless the person keeps the engine running (engine/service/owner.py)."""
    endpoint = read_endpoint(paths=paths)
    if endpoint is not None and _recorded_process_runs(paths=paths, endpoint=endpoint):
        # Listening but maybe slow to answer: wait for it rather than call it gone
        # (which made `ragdoll status` say "no engine is running" just after a start).
        deadline = time.monotonic() + wait_s
        verdict = prove_identity(endpoint=endpoint)
        while verdict == "silent" and time.monotonic() < deadline:
            if not _recorded_process_runs(paths=paths, endpoint=endpoint):
                break
            time.sleep(0.2)
            verdict = prove_identity(endpoint=endpoint, timeout_s=5.0)
        if verdict == "proven":
            return EngineHandle(endpoint=endpoint, started_here=False)
        if verdict == "impostor":
            raise EngineUnavailableError(
                f"what answers at {endpoint.base_url} is not the engine (it could not prove "
                "it holds the token, which was not sent); stop the engine "
                f"(pid {endpoint.pid}) and start it again"
            )
        if _recorded_process_runs(paths=paths, endpoint=endpoint):
            raise EngineUnavailableError(
                f"the engine is running but did not answer within {wait_s:.0f} s; "
                f"its log is {paths.engine_log}"
            )
    if not start:
        raise EngineUnavailableError("no engine is running (start one with `ragdoll engine`)")
    process = start_engine_process(paths=paths, owner=this_process() if stop_with_caller else None)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        endpoint = read_endpoint(paths=paths)
        if (
            endpoint is not None
            and _recorded_process_runs(paths=paths, endpoint=endpoint)
            and engine_alive(endpoint=endpoint, timeout_s=1.0)
        ):
            return EngineHandle(endpoint=endpoint, started_here=process.poll() is None)
        if process.poll() is not None and process.returncode != 3:
            raise EngineUnavailableError(
                f"the engine stopped while starting (exit code {process.returncode}); "
                f"its log is {paths.engine_log}"
            )
        time.sleep(0.1)
    if process.returncode == 3:
        raise EngineUnavailableError(
            "another engine holds the lock but did not prove who it is within "
            f"{wait_s:.0f} s (an older version?); stop it and try again"
        )
    raise EngineUnavailableError(
        f"the engine did not start within {wait_s:.0f} s; its log is {paths.engine_log}"
    )


def start_engine_process(
    *, paths: Paths, owner: ProcessRecord | None = None
) -> subprocess.Popen[bytes]:
    """A detached `python -m engine`: it outlives the window when asked to. With an
    `owner`, the engine stops when that process is gone (unless kept running)."""
    paths.ensure()
    fd = os.open(paths.engine_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = os.fdopen(fd, "ab")
    kwargs: dict[str, object] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    env = engine_environment(os.environ)  # engine/service/offline.py
    owned = ["--stop-with", str(owner.pid)] if owner is not None else []
    return subprocess.Popen(
        [sys.executable, "-m", "engine", *owned],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
        **kwargs,  # type: ignore[arg-type]
    )
