"""The memory cgroup's limit read as the machine's RAM: v1 and v2 layouts written in a
temporary folder (the real /sys/fs/cgroup is not touched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.runtime.hardware import profile as profile_module
from engine.runtime.hardware.cgroup import CgroupMemory, cgroup_memory

MIB = 2**20
UNLIMITED_V1 = 9223372036854771712


def _proc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proc-cgroup"
    path.write_text(text, encoding="utf-8")
    return path


def _v1(tmp_path: Path, *, rel: str, limit: int, usage: int, inactive: int) -> Path:
    folder = tmp_path / "root" / "memory" / rel
    folder.mkdir(parents=True)
    (folder / "memory.limit_in_bytes").write_text(f"{UNLIMITED_V1}\n")
    (folder / "memory.usage_in_bytes").write_text(f"{usage}\n")
    # The effective limit is the smallest on the path to the root: the stat says it.
    (folder / "memory.stat").write_text(
        f"cache 1\nhierarchical_memory_limit {limit}\ntotal_inactive_file {inactive}\n"
    )
    return tmp_path / "root"


def test_v1_limit_is_the_hierarchical_one_and_page_cache_is_not_used_memory(
    tmp_path: Path,
) -> None:
    root = _v1(tmp_path, rel="a/b", limit=700 * MIB, usage=400 * MIB, inactive=100 * MIB)
    proc = _proc(tmp_path, "5:cpu:/\n4:memory:/a/b\n0::/\n")
    got = cgroup_memory(proc_cgroup=proc, root=root)
    assert got == CgroupMemory(limit_bytes=700 * MIB, used_bytes=300 * MIB)
    assert got.available_bytes == 400 * MIB


def test_v1_without_a_limit_is_none(tmp_path: Path) -> None:
    root = _v1(tmp_path, rel="a", limit=UNLIMITED_V1, usage=1, inactive=0)
    assert cgroup_memory(proc_cgroup=_proc(tmp_path, "4:memory:/a\n"), root=root) is None


def test_v2_takes_the_smallest_limit_up_to_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "outer" / "inner").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "outer" / "memory.max").write_text(f"{512 * MIB}\n")
    inner = root / "outer" / "inner"
    (inner / "memory.max").write_text("max\n")
    (inner / "memory.current").write_text(f"{300 * MIB}\n")
    (inner / "memory.stat").write_text(f"anon 1\ninactive_file {50 * MIB}\n")
    got = cgroup_memory(proc_cgroup=_proc(tmp_path, "0::/outer/inner\n"), root=root)
    assert got == CgroupMemory(limit_bytes=512 * MIB, used_bytes=250 * MIB)
    (root / "outer" / "memory.max").write_text("max\n")
    assert cgroup_memory(proc_cgroup=_proc(tmp_path, "0::/outer/inner\n"), root=root) is None


def test_a_container_root_is_read_when_the_hosts_path_is_not_there(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "cgroup.controllers").write_text("memory\n")
    (root / "memory.max").write_text(f"{1024 * MIB}\n")
    (root / "memory.current").write_text(f"{100 * MIB}\n")
    got = cgroup_memory(proc_cgroup=_proc(tmp_path, "0::/system.slice/x.scope\n"), root=root)
    assert got is not None and got.limit_bytes == 1024 * MIB


def test_no_cgroup_file_or_a_damaged_one_plans_with_the_machine(tmp_path: Path) -> None:
    assert cgroup_memory(proc_cgroup=tmp_path / "absent", root=tmp_path) is None
    root = _v1(tmp_path, rel="a", limit=700 * MIB, usage=1, inactive=0)
    (root / "memory" / "a" / "memory.usage_in_bytes").write_text("garbage\n")
    assert cgroup_memory(proc_cgroup=_proc(tmp_path, "4:memory:/a\n"), root=root) is None


def test_the_profile_takes_the_limit_below_the_machines_ram(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = profile_module.snapshot(data_dir=tmp_path)
    limited = CgroupMemory(limit_bytes=700 * MIB, used_bytes=300 * MIB)
    monkeypatch.setattr(profile_module, "cgroup_memory", lambda: limited)
    got = profile_module.snapshot(data_dir=tmp_path)
    assert got.ram_total_bytes == 700 * MIB == got.ram_limit_bytes
    assert got.ram_available_bytes == min(400 * MIB, machine.ram_available_bytes)
    assert got.fingerprint != machine.fingerprint
    # A limit above the machine's RAM limits nothing.
    huge = CgroupMemory(limit_bytes=machine.ram_total_bytes * 2, used_bytes=0)
    monkeypatch.setattr(profile_module, "cgroup_memory", lambda: huge)
    got = profile_module.snapshot(data_dir=tmp_path)
    assert got.ram_total_bytes == machine.ram_total_bytes and got.ram_limit_bytes is None
