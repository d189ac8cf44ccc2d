"""The Linux bundle: quick form (no wheelhouse, a dry-run install). The full
build, install, start and uninstall is tests/installer/test_installed_app.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from installer.linux.build_bundle import build_app_wheel, constraints_without_torch, is_pure


@pytest.fixture
def bundle(quick_bundle: Path) -> Path:
    return quick_bundle


def dry_run(bundle: Path, *, path: str, extra: list[str], tmp: Path) -> dict:
    env = {**os.environ, "PATH": path}
    env.pop("RAGDOLL_TORCH", None)
    # -S: no site-packages, so the installer must live on the standard library alone.
    out = subprocess.run(
        [
            sys.executable,
            "-S",
            str(bundle / "install.py"),
            "--dry-run",
            "--prefix",
            str(tmp / "app"),
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def test_the_bundle_holds_the_installer_the_wheel_and_torch_free_constraints(
    bundle: Path,
) -> None:
    for name in (
        "install.sh",
        "install.py",
        "running.py",
        "transaction.py",
        "wheel_fit.py",
        "torch_choice.py",
        "constraints.txt",
        "bundle.json",
        "README.txt",
        "ragdoll.png",
    ):
        assert (bundle / name).is_file(), name
    assert os.access(bundle / "install.sh", os.X_OK)
    subprocess.run(["sh", "-n", str(bundle / "install.sh")], check=True)
    constraints = (bundle / "constraints.txt").read_text()
    assert "torch==" not in constraints and "numpy==" in constraints
    (wheel,) = bundle.glob("ragdoll_desktop-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "native/linux.py" in names and "app/commands/desktop.py" in names
    assert "resources/icons/hicolor/48x48/apps/ragdoll.png" in names
    assert "resources/samples/ragdoll-user-guide.pdf" in names
    assert not any(n.startswith(("tests/", "installer/")) for n in names)


def test_dry_run_without_a_gpu_plans_the_cpu_torch(bundle: Path, tmp_path: Path) -> None:
    plan = dry_run(bundle, path="/usr/bin:/bin", extra=["--offline"], tmp=tmp_path)
    assert plan["torch"]["requirement"].endswith("+cpu")
    torch_cmd = next(c for c in plan["commands"] if any(a.startswith("torch==") for a in c))
    assert "--extra-index-url" not in torch_cmd  # offline: pip's own configuration only
    assert plan["commands"][0][1:3] == ["-m", "venv"]
    assert plan["commands"][-1][-3:] == ["integrate", "--app-dir", str(tmp_path / "app")]
    assert not (tmp_path / "app").exists()  # a dry run writes nothing


def test_dry_run_with_an_nvidia_driver_plans_a_cuda_build(bundle: Path, tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 575.51.03\n")
    smi.chmod(0o755)
    plan = dry_run(bundle, path=f"{fake}:/usr/bin:/bin", extra=[], tmp=tmp_path)
    assert plan["torch"]["variant"] == "cu128"
    torch_cmd = next(c for c in plan["commands"] if any(a.startswith("torch==") for a in c))
    assert torch_cmd[-2:] == ["--extra-index-url", "https://download.pytorch.org/whl/cu128"]
    forced = dry_run(bundle, path=f"{fake}:/usr/bin:/bin", extra=["--torch", "cpu"], tmp=tmp_path)
    assert forced["torch"]["variant"] == "cpu"


def test_an_unknown_torch_choice_stops_the_install_with_a_message(
    bundle: Path, tmp_path: Path
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-S",
            str(bundle / "install.py"),
            "--dry-run",
            "--torch",
            "rocm9",
            "--prefix",
            str(tmp_path / "app"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "rocm9" in result.stderr


def test_constraints_lose_torch_and_cuda_pins_only() -> None:
    text = "numpy==2.0\ntorch==2.13.0\nnvidia-cublas-cu12==12.1\ntriton==3.0\nscipy==1.0\n"
    assert constraints_without_torch(text=text) == "numpy==2.0\nscipy==1.0\n"


def test_pure_means_a_py3_none_any_wheel() -> None:
    class Dist:
        def __init__(self, wheel: str) -> None:
            self.wheel = wheel

        def read_text(self, name: str) -> str:
            return self.wheel

    assert is_pure(Dist("Root-Is-Purelib: true\nTag: py2-none-any\nTag: py3-none-any\n"))  # type: ignore[arg-type]
    assert not is_pure(Dist("Root-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_28_x86_64\n"))  # type: ignore[arg-type]


def test_dry_run_from_a_folder_of_wheels_uses_no_index(bundle: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    plan = dry_run(bundle, path="/usr/bin:/bin", extra=["--wheels", str(wheels)], tmp=tmp_path)
    assert plan["torch"]["index_url"] is None
    torch_cmd = next(c for c in plan["commands"] if any(a.startswith("torch==") for a in c))
    app_cmd = next(c for c in plan["commands"] if c[-1].endswith(".whl") and "ragdoll" in c[-1])
    for command in (torch_cmd, app_cmd):
        assert "--no-index" in command and str(wheels) in command
        assert "--extra-index-url" not in command
    # The torch step leaves the environment incomplete on purpose: pip's "dependency
    # resolver" report about that is not printed; the app's step, the last, checks.
    assert "--no-warn-conflicts" in torch_cmd and "--no-warn-conflicts" not in app_cmd


def test_a_wheel_build_starts_from_an_empty_build_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module an earlier build copied to build/lib and the checkout has since deleted
    # would be shipped in the next wheel (setuptools copies over, never removes).
    import installer.linux.build_bundle as build_bundle

    stale = tmp_path / "build" / "lib" / "engine" / "moved_away.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("x = 1\n")
    seen: list[list[Path]] = []
    monkeypatch.setattr(build_bundle, "REPO", tmp_path)
    monkeypatch.setattr(
        build_bundle, "pip", lambda *args: seen.append(sorted((tmp_path / "build").rglob("*")))
    )
    build_app_wheel(into=tmp_path / "out")
    assert seen == [[tmp_path / "build" / ".wheel.lock"]]


@pytest.mark.slow
def test_two_wheel_builds_at_once_both_finish(tmp_path: Path) -> None:
    # Two test workers each build the quick bundle; unlocked, one of them failed about
    # half the time on setuptools' shared build/ folder ("File exists").
    outs = [tmp_path / "a", tmp_path / "b"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda out: build_app_wheel(into=out), outs))
    names = [sorted(zipfile.ZipFile(next(out.glob("*.whl"))).namelist()) for out in outs]
    assert names[0] == names[1]
    assert any(name.startswith("engine/") for name in names[0])
