"""The memory limit of the cgroup this process runs in (systemd units, containers, the
offload benchmark's children): RAM the planner may count on is the smaller of the
machine's and the limit's.

cgroup v1: the memory controller's `memory.stat` `hierarchical_memory_limit` (the
smallest limit on the path to the root) and `memory.usage_in_bytes`; v2: the smallest
`memory.max` from this process's cgroup up to the root, and its `memory.current`. Used
memory counts what the kernel cannot simply drop: usage less the inactive file pages
(`total_inactive_file` on v1, `inactive_file` on v2), the "working set" container
runtimes report, since page cache within the limit is reclaimed on demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# v1 reports "no limit" as the largest page-aligned 63-bit number, not as a word.
_V1_UNLIMITED = 2**62


@dataclass(frozen=True, kw_only=True)
class CgroupMemory:
    limit_bytes: int
    used_bytes: int  # usage less inactive file pages

    @property
    def available_bytes(self) -> int:
        return max(0, self.limit_bytes - self.used_bytes)


@dataclass(frozen=True, kw_only=True)
class CgroupPaths:
    """Where /proc/self/cgroup puts this process: its path under v1's memory
    controller and under the v2 (unified) hierarchy; None where it has none."""

    v1: str | None
    v2: str | None


def cgroup_paths(proc_cgroup: Path = PROC_CGROUP) -> CgroupPaths | None:
    """This process's memory cgroup paths (the first line of each kind), or None when
    /proc/self/cgroup cannot be read. A malformed line raises ValueError."""
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    v1: str | None = None
    v2: str | None = None
    for line in lines:
        hierarchy, controllers, rel = line.split(":", 2)
        if v1 is None and "memory" in controllers.split(","):
            v1 = rel
        elif v2 is None and hierarchy == "0" and controllers == "":
            v2 = rel
    return CgroupPaths(v1=v1, v2=v2)


def cgroup_memory(
    *, proc_cgroup: Path = PROC_CGROUP, root: Path = CGROUP_ROOT
) -> CgroupMemory | None:
    """This process's cgroup memory limit and use; None when no limit is set (or no
    memory cgroup can be read: a machine without cgroups, another OS)."""
    try:
        paths = cgroup_paths(proc_cgroup)
        if paths is None:
            return None
        if paths.v1 is not None:
            return _v1(_own_dir(root / "memory", paths.v1))
        if paths.v2 is not None:
            for mount in (root, root / "unified"):
                if (mount / "cgroup.controllers").is_file():
                    return _v2(_own_dir(mount, paths.v2), top=mount)
    except (OSError, ValueError):
        # An unreadable or odd controller file: plan with the machine's RAM.
        return None
    return None


def _own_dir(mount: Path, rel: str) -> Path:
    """The cgroup's folder; a container that mounts its own cgroup as the root shows
    the host's path in /proc/self/cgroup, which does not exist inside it."""
    own = mount / rel.lstrip("/")
    return own if own.is_dir() else mount


def _v1(folder: Path) -> CgroupMemory | None:
    stat = _stat(folder / "memory.stat")
    limit = stat.get("hierarchical_memory_limit")
    if limit is None:
        limit = int((folder / "memory.limit_in_bytes").read_text(encoding="utf-8"))
    if limit >= _V1_UNLIMITED:
        return None
    usage = int((folder / "memory.usage_in_bytes").read_text(encoding="utf-8"))
    used = usage - stat.get("total_inactive_file", stat.get("inactive_file", 0))
    return CgroupMemory(limit_bytes=limit, used_bytes=max(0, used))


def _v2(folder: Path, *, top: Path) -> CgroupMemory | None:
    limit: int | None = None
    here = folder
    while True:
        max_file = here / "memory.max"
        if max_file.is_file():
            text = max_file.read_text(encoding="utf-8").strip()
            if text != "max":
                limit = int(text) if limit is None else min(limit, int(text))
        if here == top or here.parent == here:
            break
        here = here.parent
    if limit is None:
        return None
    current = folder / "memory.current"
    usage = int(current.read_text(encoding="utf-8")) if current.is_file() else 0
    inactive = _stat(folder / "memory.stat").get("inactive_file", 0) if usage else 0
    return CgroupMemory(limit_bytes=limit, used_bytes=max(0, usage - inactive))


def _stat(path: Path) -> dict[str, int]:
    if not path.is_file():
        return {}
    out: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out
