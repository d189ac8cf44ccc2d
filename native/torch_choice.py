"""Which PyTorch build this machine should get, decided at install time.

Standard library only: the installer runs this with the system Python before the
app's environment exists. The decision is a pure function of a few facts about the
machine (`MachineFacts`), so it is tested without a GPU; `probe_machine` gathers the
facts. Peers ship the CUDA runtime (gigabytes) to every machine; this picks the CUDA
build only where an NVIDIA driver that can run it is present.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

TORCH_VERSION = "2.13.0"
TORCH_INDEX = "https://download.pytorch.org/whl"
OVERRIDE_ENV = "RAGDOLL_TORCH"

NVML_REQUIREMENT = "nvidia-ml-py>=12"  # free GPU memory and the PCIe link
# CUDA builds of PyTorch, newest first, with the oldest Linux/Windows driver that
# runs each (NVIDIA's CUDA toolkit release notes, table 3). A driver older than
# every entry gets the CPU build rather than a build that fails at first use.
CUDA_BUILDS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("cu130", (580, 65)),
    ("cu128", (570, 26)),
    ("cu126", (560, 28)),
)


@dataclass(frozen=True, kw_only=True)
class MachineFacts:
    system: str  # platform.system(): "Linux", "Darwin", "Windows"
    machine: str  # platform.machine(): "x86_64", "arm64", "AMD64", "aarch64"
    nvidia_driver: tuple[int, ...] | None  # the driver version, None without one
    override: str | None = None  # RAGDOLL_TORCH: "cpu", "cuda", or a build such as "cu128"


@dataclass(frozen=True, kw_only=True)
class TorchChoice:
    variant: str  # "cpu", "cu128", …, or "default" (PyPI's own wheel: macOS, MPS)
    requirement: str  # what pip installs, e.g. "torch==2.13.0+cpu"
    index_url: str | None  # the extra index that carries it; None: PyPI
    reason: str  # one sentence a person can read in the install log

    def pip_args(self, *, offline: bool) -> list[str]:
        """pip arguments after `pip install`; offline leaves pip's own configuration alone.
        A CUDA build brings NVML's bindings, which the hardware profile uses for free
        GPU memory and the PCIe link (engine/runtime/hardware/gpus.py)."""
        args = [self.requirement]
        if self.variant.startswith("cu"):
            args.append(NVML_REQUIREMENT)
        if self.index_url and not offline:
            args += ["--extra-index-url", self.index_url]
        return args


def parse_driver_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def choose_torch(*, facts: MachineFacts, version: str = TORCH_VERSION) -> TorchChoice:
    """The build for these facts; an override wins when it can run here."""
    override = (facts.override or "").strip().lower() or None
    if facts.system == "Darwin":
        # PyPI's macOS wheels are CPU builds that include MPS on Apple silicon.
        gpu = "with MPS (Apple GPU)" if facts.machine == "arm64" else "CPU only (Intel Mac)"
        return TorchChoice(
            variant="default",
            requirement=f"torch=={version}",
            index_url=None,
            reason=f"macOS: PyPI's wheel, {gpu}",
        )
    if override == "cpu":
        return _cpu(version=version, reason=f"{OVERRIDE_ENV}=cpu asked for the CPU build")
    if facts.machine.lower() in ("aarch64", "arm64") and facts.system == "Linux":
        # PyPI's Linux aarch64 wheel is the CPU build; no local-version suffix exists.
        return TorchChoice(
            variant="default",
            requirement=f"torch=={version}",
            index_url=None,
            reason="Linux on ARM: PyPI's CPU wheel",
        )
    if override and override not in ("cuda", "cpu"):
        known = [name for name, _ in CUDA_BUILDS]
        if override not in known:
            raise ValueError(f"{OVERRIDE_ENV}={override}: expected cpu, cuda or one of {known}")
        return _cuda(variant=override, version=version, reason=f"{OVERRIDE_ENV}={override}")
    if facts.nvidia_driver is None:
        reason = "no NVIDIA GPU found (nvidia-smi absent or silent): the CPU build"
        if override == "cuda":
            reason = f"{OVERRIDE_ENV}=cuda but {reason}"
        return _cpu(version=version, reason=reason)
    driver = ".".join(str(p) for p in facts.nvidia_driver)
    for variant, minimum in CUDA_BUILDS:
        if facts.nvidia_driver >= minimum:
            return _cuda(
                variant=variant,
                version=version,
                reason=f"NVIDIA driver {driver} found: the {variant} build",
            )
    oldest = ".".join(str(p) for p in CUDA_BUILDS[-1][1])
    return _cpu(
        version=version,
        reason=f"NVIDIA driver {driver} is older than {oldest}, which the oldest "
        "CUDA build needs: the CPU build (update the driver and reinstall for the GPU)",
    )


def _cpu(*, version: str, reason: str) -> TorchChoice:
    return TorchChoice(
        variant="cpu",
        requirement=f"torch=={version}+cpu",
        index_url=f"{TORCH_INDEX}/cpu",
        reason=reason,
    )


def _cuda(*, variant: str, version: str, reason: str) -> TorchChoice:
    return TorchChoice(
        variant=variant,
        requirement=f"torch=={version}+{variant}",
        index_url=f"{TORCH_INDEX}/{variant}",
        reason=reason,
    )


def probe_nvidia_driver(
    *, which: object = shutil.which, module_file: Path = Path("/proc/driver/nvidia/version")
) -> tuple[int, ...] | None:
    """The NVIDIA driver version from nvidia-smi, or the kernel module; None without one."""
    smi = which("nvidia-smi")  # type: ignore[operator]
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        version = parse_driver_version(out)
        if version:
            return version
    try:
        # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  …"
        return parse_driver_version(module_file.read_text().split("Module", 1)[-1])
    except (OSError, IndexError):
        return None


def probe_machine(*, env: dict[str, str] | None = None) -> MachineFacts:
    environ = os.environ if env is None else env
    system = platform.system()
    return MachineFacts(
        system=system,
        machine=platform.machine(),
        nvidia_driver=None if system == "Darwin" else probe_nvidia_driver(),
        override=environ.get(OVERRIDE_ENV) or None,
    )
