"""A memory cgroup per benchmark run: every system of `ragdoll bench offload --peers` runs
in a child process placed in a fresh memory cgroup, so that one memory limit holds for all
of them, page cache included (the kernel charges a process's file pages to its cgroup and
reclaims them at the limit: llama.cpp's mmap and the executor's reads alike).

cgroup v1 (`memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes` when swap
accounting is on) and v2 (`memory.max`, `memory.swap.max`) are both supported. The new
cgroup is made under the cgroup this process is in (where a container lets it create
children), never elsewhere in the hierarchy, and removed after the run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import child_env, peer_env
from engine.errors import RagdollError
from engine.runtime.hardware.cgroup import cgroup_paths

_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, kw_only=True)
class Cgroup:
    path: Path
    version: int  # 1 or 2
    limit_bytes: int | None  # None: no limit (accounting only)

    def peak_bytes(self) -> int:
        """The most memory (RSS + page cache) the cgroup held."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return _read_int(self.path / name)

    def oom_killed(self) -> bool:
        if self.version == 2:
            events = (self.path / "memory.events").read_text(encoding="utf-8")
            return any(
                line.split()[0] == "oom_kill" and int(line.split()[1]) > 0
                for line in events.splitlines()
            )
        control = (self.path / "memory.oom_control").read_text(encoding="utf-8")
        return any(
            line.split()[0] == "oom_kill" and int(line.split()[1]) > 0
            for line in control.splitlines()
        )


@dataclass(frozen=True, kw_only=True)
class ChildResult:
    returncode: int
    stdout: str
    stderr: str
    peak_bytes: int
    oom_killed: bool
    seconds: float


def memory_root() -> tuple[Path, int] | None:
    """(the memory cgroup this process is in, its version), or None when neither v1's
    memory controller nor v2 is mounted where this process can create a child."""
    paths = cgroup_paths()
    if paths is None:
        return None
    if paths.v1 is not None:
        # A container may mount its own cgroup as the root of the hierarchy.
        for base in (_ROOT / "memory" / paths.v1.lstrip("/"), _ROOT / "memory"):
            if (base / "memory.limit_in_bytes").is_file() and os.access(base, os.W_OK):
                return base, 1
    if paths.v2 is not None:
        for mount in (_ROOT, _ROOT / "unified"):
            own = mount / paths.v2.lstrip("/")
            controllers_file = own / "cgroup.controllers"
            if (
                controllers_file.is_file()
                and os.access(own, os.W_OK)
                and "memory" in controllers_file.read_text(encoding="utf-8").split()
            ):
                return own, 2
    return None


def unavailable_reason() -> str | None:
    """Why no memory cgroup can be made here (None: one can)."""
    if memory_root() is None:
        return (
            "no writable memory cgroup (cgroup v1 memory controller or v2 with memory "
            "delegated) under this process's cgroup; run as root on a host or container "
            "that allows creating child cgroups"
        )
    return None


@contextlib.contextmanager
def memory_cgroup(*, name: str, limit_bytes: int | None) -> Iterator[Cgroup]:
    """A fresh memory cgroup `name` under this process's own, limited to `limit_bytes`
    (memory + page cache, and swap where it is accounted), removed on exit."""
    found = memory_root()
    if found is None:
        raise RagdollError(unavailable_reason() or "no memory cgroup")
    parent, version = found
    path = parent / f"{name}-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir()
    try:
        if limit_bytes is not None:
            if version == 1:
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                memsw = path / "memory.memsw.limit_in_bytes"
                if memsw.exists():
                    memsw.write_text(str(limit_bytes))
            else:
                (path / "memory.max").write_text(str(limit_bytes))
                swap = path / "memory.swap.max"
                if swap.exists():
                    swap.write_text("0")
        yield Cgroup(path=path, version=version, limit_bytes=limit_bytes)
    finally:
        _remove(path)


def run_in_cgroup(
    *, cgroup: Cgroup, argv: list[str], timeout_s: float, peer: bool = False
) -> ChildResult:
    """Run `argv` as a child that joins `cgroup` before it execs, so that everything it
    allocates and every file page it reads is charged to the cgroup from the start.
    `peer`: another runtime, run in the environment its users have (`peer_env`)."""
    procs = cgroup.path / "cgroup.procs"

    def join() -> None:
        procs.write_text(str(os.getpid()))

    start = time.perf_counter()
    try:
        done = subprocess.run(
            argv,
            # Joining before exec: the child's first allocation is charged to the cgroup.
            preexec_fn=join,
            env=peer_env() if peer else child_env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        returncode = -9
        stdout = _text(e.stdout)
        stderr = _text(e.stderr) + f"\n(timed out after {timeout_s:.0f} s)"
    return ChildResult(
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        peak_bytes=cgroup.peak_bytes(),
        oom_killed=cgroup.oom_killed(),
        seconds=time.perf_counter() - start,
    )


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _remove(path: Path) -> None:
    # A cgroup can be removed once its processes are gone; the kernel may take a moment to
    # notice a killed child's exit.
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return 0
