"""The profile on this (CPU-only) machine: counts, cached measurements, bounded disk probe."""

import json
import sys
import time
from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.runtime.hardware import bandwidth, gpus
from engine.runtime.hardware.profile import (
    CACHE_FILE_NAME,
    hypothetical_profile,
    load_profile,
    profile_from_dict,
    snapshot,
)
from tests.support.stalls import Stopwatch

PROBE = 64 * 2**20


def test_profile_runs_and_is_cached(ragdoll_home: Path) -> None:
    paths = resolve_paths()
    first = load_profile(paths=paths, disk_probe_bytes=PROBE, disk_time_budget_s=2.0)
    assert str(paths.data).startswith(str(ragdoll_home))
    if not first.gpus:  # this machine has none; say so without error
        assert first.memory_model == "cpu_only" and first.gpu is None
    assert first.ram_total_bytes >= first.ram_available_bytes > 0
    assert first.cpu_cores_logical >= 1
    assert first.disk.free_bytes > 0 and first.disk.read_bytes_per_s
    assert first.measured_at > 0
    cache = paths.data / CACHE_FILE_NAME
    assert cache.is_file()
    assert json.loads(cache.read_text())["profile"]["fingerprint"] == first.fingerprint

    with Stopwatch() as reuse:
        again = load_profile(paths=paths, disk_probe_bytes=PROBE)
    assert reuse.took.own_s < 1.0, reuse.took  # the disk is not timed again (2 s budget)
    assert again.measured_at == first.measured_at  # reused, not re-measured
    assert again.disk.read_bytes_per_s == first.disk.read_bytes_per_s

    refreshed = load_profile(paths=paths, refresh=True, disk_probe_bytes=PROBE)
    assert refreshed.measured_at > first.measured_at


def test_ram_read_is_measured_and_added_to_an_older_cache(ragdoll_home: Path) -> None:
    """RAM read bandwidth is what a decode step from RAM can go at (the Recommended
    models' speed estimate); a profile cached before it was measured gets it alone, the
    disk figure kept."""
    paths = resolve_paths()
    first = load_profile(paths=paths, disk_probe_bytes=PROBE)
    assert first.ram_read_bytes_per_s and first.ram_read_bytes_per_s > 1e8
    cache = paths.data / CACHE_FILE_NAME
    data = json.loads(cache.read_text())
    del data["profile"]["ram_read_bytes_per_s"]  # as an older engine wrote it
    cache.write_text(json.dumps(data))
    assert load_profile(paths=paths, measure=False).ram_read_bytes_per_s is None
    upgraded = load_profile(paths=paths, disk_probe_bytes=PROBE)
    assert upgraded.ram_read_bytes_per_s and upgraded.measured_at == first.measured_at
    assert upgraded.disk.read_bytes_per_s == first.disk.read_bytes_per_s
    saved = json.loads(cache.read_text())["profile"]
    assert saved["ram_read_bytes_per_s"] == upgraded.ram_read_bytes_per_s


def test_changed_hardware_is_measured_again(ragdoll_home: Path) -> None:
    paths = resolve_paths()
    first = load_profile(paths=paths, disk_probe_bytes=PROBE)
    cache = paths.data / CACHE_FILE_NAME
    data = json.loads(cache.read_text())
    data["profile"]["fingerprint"] = "another-machine"
    cache.write_text(json.dumps(data))
    second = load_profile(paths=paths, disk_probe_bytes=PROBE)
    assert second.measured_at > first.measured_at
    cache.write_text("{not json")
    assert load_profile(paths=paths, disk_probe_bytes=PROBE).measured_at > second.measured_at


def test_without_measuring_nothing_is_written(ragdoll_home: Path) -> None:
    paths = resolve_paths()
    profile = load_profile(paths=paths, measure=False)
    assert profile.measured_at == 0.0 and profile.disk.read_bytes_per_s is None
    assert not (paths.data / CACHE_FILE_NAME).exists()


def test_fingerprint_ignores_free_memory(tmp_path: Path) -> None:
    a = snapshot(data_dir=tmp_path)
    b = snapshot(data_dir=tmp_path)
    assert a.fingerprint == b.fingerprint
    round_trip = profile_from_dict(json.loads(json.dumps(a.as_dict())))
    assert round_trip == a


def test_disk_probe_is_bounded_and_cleaned_up(tmp_path: Path) -> None:
    start = time.perf_counter()
    result = bandwidth.measure_disk_read(folder=tmp_path, probe_bytes=PROBE, time_budget_s=2.0)
    assert time.perf_counter() - start < 10.0
    assert result.bytes_per_s and result.bytes_per_s > 0
    assert 0 < result.bytes_read <= PROBE
    if sys.platform.startswith("linux"):
        assert result.cold
    assert list(tmp_path.iterdir()) == []


def test_disk_probe_stops_at_its_time_budget(tmp_path: Path) -> None:
    # 8 GiB could never be written in 0.2 s: the probe must stop early and still measure.
    start = time.perf_counter()
    result = bandwidth.measure_disk_read(folder=tmp_path, probe_bytes=8 * 2**30, time_budget_s=0.2)
    assert time.perf_counter() - start < 5.0
    assert result.bytes_per_s and result.bytes_read < 8 * 2**30


def test_nvml_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    assert gpus._nvml_devices([object()]) == {}


def test_no_gpu_is_reported_without_error() -> None:
    import torch

    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("this machine has a GPU")
    assert gpus.detect_gpus(ram_total_bytes=2**30) == ()
    unmeasured = {"h2d_bytes_per_s": None, "d2h_bytes_per_s": None}
    assert gpus.measure_transfer(index=0, backend="cuda") == unmeasured


def test_hypothetical_machine(tmp_path: Path) -> None:
    base = snapshot(data_dir=tmp_path)
    with_gpu = hypothetical_profile(base=base, gpu_bytes=24 * 2**30, ram_bytes=64 * 2**30)
    assert with_gpu.hypothetical and with_gpu.memory_model == "discrete"
    assert with_gpu.gpu is not None and with_gpu.gpu.free_bytes == 24 * 2**30
    assert with_gpu.ram_available_bytes == 64 * 2**30
    assert with_gpu.fingerprint != base.fingerprint
    none = hypothetical_profile(base=with_gpu, gpu_bytes=0)
    assert none.memory_model == "cpu_only"
    apple = hypothetical_profile(base=base, gpu_bytes=16 * 2**30, unified=True)
    assert apple.memory_model == "unified"
    assert hypothetical_profile(base=base) is base


def test_a_linux_machine_without_gpu_device_files_is_known_without_torch(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidiactl").touch()  # the control file alone is no GPU
    driver = tmp_path / "proc-driver-nvidia"

    def without(platform_name: str = "linux") -> bool:
        return gpus.linux_without_gpu_devices(
            dev=dev, nvidia_driver=driver, platform_name=platform_name
        )

    assert without()
    assert not without("darwin")  # MPS: torch is asked
    assert not without("win32")
    for name in ("nvidia0", "kfd", "dxg"):
        (dev / name).touch()
        assert not without(), name
        (dev / name).unlink()
    driver.mkdir()  # NVIDIA's module loaded, its device files not made yet
    assert not without()
