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


def cgroup_memory(
    *, proc_cgroup: Path = PROC_CGROUP, root: Path = CGROUP_ROOT
) -> CgroupMemory | None:
    """This process's cgroup memory limit and use; None when no limit is set (or no
    memory cgroup can be read: a machine without cgroups, another OS)."""
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    try:
        for line in lines:
            _, controllers, rel = line.split(":", 2)
            if "memory" in controllers.split(","):
                return _v1(_own_dir(root / "memory", rel))
        for line in lines:
            hierarchy, controllers, rel = line.split(":", 2)
            if hierarchy == "0" and controllers == "":
                for mount in (root, root / "unified"):
                    if (mount / "cgroup.controllers").is_file():
                        return _v2(_own_dir(mount, rel), top=mount)
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
