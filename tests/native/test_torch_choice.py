from __future__ import annotations

from pathlib import Path

import pytest

from native.torch_choice import (
    CUDA_BUILDS,
    MachineFacts,
    choose_torch,
    parse_driver_version,
    probe_nvidia_driver,
)


def facts(**kw: object) -> MachineFacts:
    base: dict[str, object] = {"system": "Linux", "machine": "x86_64", "nvidia_driver": None}
    return MachineFacts(**{**base, **kw})  # type: ignore[arg-type]


def test_no_gpu_gets_the_cpu_build_from_the_cpu_index() -> None:
    choice = choose_torch(facts=facts(), version="2.13.0")
    assert choice.variant == "cpu"
    assert choice.requirement == "torch==2.13.0+cpu"
    assert choice.index_url is not None and choice.index_url.endswith("/cpu")
    assert choice.pip_args(offline=False) == [
        "torch==2.13.0+cpu",
        "--extra-index-url",
        choice.index_url,
    ]
    # Offline: only pip's own configuration (here, the find-links with the CPU wheel).
    assert choice.pip_args(offline=True) == ["torch==2.13.0+cpu"]


@pytest.mark.parametrize(
    ("driver", "variant"),
    [((590, 1), "cu130"), ((580, 65, 6), "cu130"), ((575, 0), "cu128"), ((560, 28), "cu126")],
)
def test_an_nvidia_driver_gets_the_newest_cuda_build_it_can_run(
    driver: tuple[int, ...], variant: str
) -> None:
    choice = choose_torch(facts=facts(nvidia_driver=driver), version="2.13.0")
    assert choice.variant == variant
    assert choice.requirement == f"torch==2.13.0+{variant}"
    assert choice.index_url is not None and choice.index_url.endswith(f"/{variant}")
    assert "nvidia-ml-py>=12" in choice.pip_args(offline=True)


def test_a_driver_too_old_for_every_cuda_build_gets_the_cpu_build_and_says_why() -> None:
    choice = choose_torch(facts=facts(nvidia_driver=(470, 82)))
    assert choice.variant == "cpu"
    assert "470.82" in choice.reason and "older" in choice.reason


def test_windows_follows_the_same_rules() -> None:
    assert choose_torch(facts=facts(system="Windows", machine="AMD64")).variant == "cpu"
    gpu = choose_torch(facts=facts(system="Windows", machine="AMD64", nvidia_driver=(581, 15)))
    assert gpu.variant == CUDA_BUILDS[0][0]


@pytest.mark.parametrize("machine", ["arm64", "x86_64"])
def test_macos_gets_pypis_wheel_which_carries_mps(machine: str) -> None:
    choice = choose_torch(facts=facts(system="Darwin", machine=machine, override="cuda"))
    assert choice.variant == "default"
    assert choice.requirement == "torch==2.13.0"
    assert choice.index_url is None
    assert ("MPS" in choice.reason) == (machine == "arm64")


def test_linux_arm_gets_pypis_cpu_wheel() -> None:
    choice = choose_torch(facts=facts(machine="aarch64"))
    assert choice.requirement == "torch==2.13.0" and choice.index_url is None


def test_override_cpu_wins_over_a_gpu_and_a_named_build_is_taken() -> None:
    assert choose_torch(facts=facts(nvidia_driver=(590, 1), override="cpu")).variant == "cpu"
    assert choose_torch(facts=facts(override="cu126")).variant == "cu126"


def test_override_cuda_without_a_gpu_still_gets_cpu_and_says_so() -> None:
    choice = choose_torch(facts=facts(override="cuda"))
    assert choice.variant == "cpu" and "RAGDOLL_TORCH=cuda" in choice.reason


def test_an_unknown_override_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="cu999"):
        choose_torch(facts=facts(override="cu999"))


def test_driver_versions_parse_from_nvidia_smi_and_the_kernel_module() -> None:
    assert parse_driver_version("570.86.15\n") == (570, 86, 15)
    assert parse_driver_version("  550.54  ") == (550, 54)
    assert parse_driver_version("No devices were found") is None


def test_probe_reads_the_kernel_module_when_nvidia_smi_is_absent(tmp_path: Path) -> None:
    module = tmp_path / "version"
    assert probe_nvidia_driver(which=lambda _name: None, module_file=module) is None
    module.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 30 2025\n"
    )
    assert probe_nvidia_driver(which=lambda _name: None, module_file=module) == (570, 86, 15)


def test_probe_asks_nvidia_smi_first(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 581.29\n")
    smi.chmod(0o755)
    found = probe_nvidia_driver(which=lambda _name: str(smi), module_file=tmp_path / "none")
    assert found == (581, 29)
