"""GPUs through torch (CUDA, Apple MPS) and, where installed, NVML.

NVML (the optional `nvidia-ml-py` package, module `pynvml`) gives free memory without
creating a CUDA context and the PCIe link; torch alone still gives names, totals and
free memory. torch is imported inside the functions so that the CLI starts fast, and not
at all on a Linux machine without a GPU's device files: there it would cost an engine's
warm-up about 1.5 CPU-seconds and a few hundred MB to learn that there is no GPU.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# Big enough that launch overheads vanish, small enough for any GPU's free memory.
_TRANSFER_PROBE_BYTES = 256 * 2**20
_TRANSFER_REPEATS = 5


@dataclass(frozen=True, kw_only=True)
class GpuInfo:
    index: int
    name: str
    backend: Literal["cuda", "mps"]
    total_bytes: int
    free_bytes: int
    unified_memory: bool  # Apple: GPU and CPU share one pool of RAM
    pcie_generation: int | None = None  # from NVML, where present
    pcie_width: int | None = None
    h2d_bytes_per_s: float | None = None  # measured with pinned host memory
    d2h_bytes_per_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class _NvmlDevice:
    free_bytes: int
    pcie_generation: int | None
    pcie_width: int | None


# Where Linux shows a GPU torch can use: NVIDIA's driver (/dev/nvidia0, …), AMD's ROCm
# (/dev/kfd) and WSL's GPU bridge (/dev/dxg).
_LINUX_GPU_DEVICES = ("nvidia[0-9]*", "kfd", "dxg")


def linux_without_gpu_devices(
    *,
    dev: Path = Path("/dev"),
    nvidia_driver: Path = Path("/proc/driver/nvidia"),
    platform_name: str = sys.platform,
) -> bool:
    """True on Linux when no GPU device file exists and NVIDIA's driver is not loaded
    (CUDA may make the device files at its first call): torch would find no GPU."""
    if not platform_name.startswith("linux") or nvidia_driver.exists():
        return False
    return not any(any(dev.glob(pattern)) for pattern in _LINUX_GPU_DEVICES)


def detect_gpus(*, ram_total_bytes: int) -> tuple[GpuInfo, ...]:
    if "torch" not in sys.modules and linux_without_gpu_devices():
        return ()
    try:
        import torch
    except ImportError:
        return ()
    if torch.cuda.is_available():
        return _cuda_gpus(torch)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return (_mps_gpu(torch, ram_total_bytes=ram_total_bytes),)
    return ()


def measure_transfer(*, index: int, backend: str) -> dict[str, float | None]:
    """Host→device and device→host bytes per second; None where it cannot be measured."""
    try:
        import torch

        if backend == "cuda":
            return _measure_cuda(torch, index=index)
        if backend == "mps":
            return _measure_mps(torch)
    except (RuntimeError, MemoryError, ImportError, AssertionError):
        # Out of memory, a busy device, or a torch built without CUDA (which
        # asserts): an unmeasured link is not an error.
        pass
    return {"h2d_bytes_per_s": None, "d2h_bytes_per_s": None}


def _cuda_gpus(torch: Any) -> tuple[GpuInfo, ...]:
    count = torch.cuda.device_count()
    props = [torch.cuda.get_device_properties(i) for i in range(count)]
    nvml = _nvml_devices(props)
    found = []
    for i, p in enumerate(props):
        link = nvml.get(i)
        if link is not None:
            free = link.free_bytes
        else:
            free, _ = torch.cuda.mem_get_info(i)
        found.append(
            GpuInfo(
                index=i,
                name=str(p.name),
                backend="cuda",
                total_bytes=int(p.total_memory),
                free_bytes=int(free),
                unified_memory=False,
                pcie_generation=link.pcie_generation if link else None,
                pcie_width=link.pcie_width if link else None,
            )
        )
    return tuple(found)


def _mps_gpu(torch: Any, *, ram_total_bytes: int) -> GpuInfo:
    # Metal caps what the GPU may hold below physical RAM; that cap is the pool.
    recommended = ram_total_bytes
    with contextlib.suppress(AttributeError, RuntimeError):
        recommended = int(torch.mps.recommended_max_memory())
    allocated = 0
    with contextlib.suppress(AttributeError, RuntimeError):
        allocated = int(torch.mps.current_allocated_memory())
    return GpuInfo(
        index=0,
        name=f"Apple {platform.machine()} GPU (MPS)",
        backend="mps",
        total_bytes=recommended,
        free_bytes=max(0, recommended - allocated),
        unified_memory=True,
    )


def _nvml_devices(props: list[Any]) -> dict[int, _NvmlDevice]:
    """NVML facts keyed by torch device index; empty when NVML is absent or fails."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return {}
    try:
        by_bus: dict[tuple[int, int, int], Any] = {}
        handles = []
        for n in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(n)
            pci = pynvml.nvmlDeviceGetPciInfo(handle)
            by_bus[(int(pci.domain), int(pci.bus), int(pci.device))] = handle
            handles.append(handle)
        found: dict[int, _NvmlDevice] = {}
        for i, p in enumerate(props):
            handle = _match_handle(p, i, by_bus, handles)
            if handle is not None:
                found[i] = _nvml_device(pynvml, handle)
        return found
    except pynvml.NVMLError:
        return {}
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _match_handle(
    p: Any, index: int, by_bus: dict[tuple[int, int, int], Any], handles: list[Any]
) -> Any:
    # CUDA_VISIBLE_DEVICES and CUDA's own ordering renumber devices; the PCI address
    # is the one name torch and NVML share.
    key = (
        getattr(p, "pci_domain_id", None),
        getattr(p, "pci_bus_id", None),
        getattr(p, "pci_device_id", None),
    )
    if None not in key:
        return by_bus.get((int(key[0]), int(key[1]), int(key[2])))
    if "CUDA_VISIBLE_DEVICES" not in os.environ and index < len(handles):
        return handles[index]
    return None


def _nvml_device(pynvml: Any, handle: Any) -> _NvmlDevice:
    free = int(pynvml.nvmlDeviceGetMemoryInfo(handle).free)
    generation = width = None
    # The current link drops to a lower generation while idle; the maximum the
    # device and slot allow is what transfers will see under load.
    with contextlib.suppress(pynvml.NVMLError):
        generation = int(pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle))
    with contextlib.suppress(pynvml.NVMLError):
        width = int(pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle))
    return _NvmlDevice(free_bytes=free, pcie_generation=generation, pcie_width=width)


def _measure_cuda(torch: Any, *, index: int) -> dict[str, float | None]:
    device = torch.device("cuda", index)
    free, _ = torch.cuda.mem_get_info(index)
    size = min(_TRANSFER_PROBE_BYTES, max(free // 4, 2**20))
    buffers = {
        "host": torch.empty(size, dtype=torch.uint8, pin_memory=True),
        "dev": torch.empty(size, dtype=torch.uint8, device=device),
    }

    def h2d() -> None:
        buffers["dev"].copy_(buffers["host"], non_blocking=True)

    def d2h() -> None:
        buffers["host"].copy_(buffers["dev"], non_blocking=True)

    def sync() -> None:
        torch.cuda.synchronize(device)

    try:
        return {
            "h2d_bytes_per_s": _time_copies(h2d, sync, size),
            "d2h_bytes_per_s": _time_copies(d2h, sync, size),
        }
    finally:
        # The probe must not keep ~0.5 GiB of pinned and device memory alive.
        buffers.clear()
        torch.cuda.empty_cache()


def _measure_mps(torch: Any) -> dict[str, float | None]:
    size = _TRANSFER_PROBE_BYTES // 4
    host = torch.empty(size, dtype=torch.uint8)
    dev = torch.empty(size, dtype=torch.uint8, device="mps")

    def h2d() -> None:
        dev.copy_(host)

    def d2h() -> None:
        host.copy_(dev)

    return {
        "h2d_bytes_per_s": _time_copies(h2d, torch.mps.synchronize, size),
        "d2h_bytes_per_s": _time_copies(d2h, torch.mps.synchronize, size),
    }


def _time_copies(copy: Any, sync: Any, size: int) -> float:
    copy()  # the first copy pays for lazy initialisation; do not time it
    sync()
    start = time.perf_counter()
    for _ in range(_TRANSFER_REPEATS):
        copy()
    sync()
    return size * _TRANSFER_REPEATS / (time.perf_counter() - start)
