"""Verdicts and speed estimates of the recommended models on described machines."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.runtime.executor.forward import ARCHITECTURES
from engine.runtime.hardware.profile import HardwareProfile, synthetic_profile
from engine.runtime.planner import StoreSpec, Workload, load_model_spec, plan
from engine.service.models.catalogue import (
    advise,
    download_folder,
    estimate_speed,
    find_entry,
    installed_folder,
    load_catalogue,
    recommended,
    verdict_of,
)
from engine.service.models.download import COMPLETE_MARKER

GIB = 2**30
BIG_GPU = synthetic_profile(gpu_bytes=80 * GIB, ram_bytes=128 * GIB, disk_bytes=2000 * GIB)
SMALL_GPU = synthetic_profile(gpu_bytes=8 * GIB, ram_bytes=32 * GIB, disk_bytes=500 * GIB)
NO_GPU = synthetic_profile(gpu_bytes=0, ram_bytes=16 * GIB, disk_bytes=500 * GIB)
TINY = synthetic_profile(gpu_bytes=0, ram_bytes=4 * GIB, disk_bytes=8 * GIB)


def _advice(hardware: HardwareProfile, repo_id: str):  # type: ignore[no-untyped-def]
    entry = find_entry(repo_id=repo_id)
    assert entry is not None
    return advise(
        entry=entry,
        spec=load_model_spec(source=entry.config_path()),
        hardware=hardware,
        store=StoreSpec.default(),
        workload=Workload(),
    )


def test_catalogue_entries_have_bundled_configs() -> None:
    entries = load_catalogue()
    assert 4 <= len(entries) <= 12
    for e in entries:
        spec = load_model_spec(source=e.config_path())
        assert spec.parameter_count > 0, e.id
        assert "/" in e.id and e.licence and e.description
        # Recommend only what the executor runs: a download must end in answers.
        model_type = json.loads(e.config_path().read_text())["model_type"]
        assert model_type in ARCHITECTURES, (e.id, model_type)
        # The download is the weights in the config's dtype plus tokenizer files:
        # a size that disagrees with the config is a wrong entry.
        assert spec.weight_bytes <= e.download_bytes <= spec.weight_bytes * 1.02 + 30e6, e.id


def test_the_catalogue_spans_small_to_large_models() -> None:
    """A laptop without a GPU needs choices between 0.5B and 7B, not a jump."""
    params = sorted(
        load_model_spec(source=e.config_path()).parameter_count for e in load_catalogue()
    )
    between = [p for p in params if 1e9 <= p < 7e9]
    assert params[0] < 1e9 and len(between) >= 4 and params[-1] > 7e9


def test_no_dated_entry_is_recommended() -> None:
    """The walkthrough found Qwen2 and Mistral 7B v0.1 offered beside their successors."""
    ids = [e.id for e in load_catalogue()]
    assert not [i for i in ids if i.startswith("Qwen/Qwen2-") or i.endswith("-v0.1")], ids
    assert all(e.download_bytes > 0 for e in load_catalogue())  # the welcome quotes sizes


def test_small_model_fits_on_a_big_gpu_and_is_fast() -> None:
    a = _advice(BIG_GPU, "Qwen/Qwen2.5-0.5B-Instruct")
    assert (a.verdict_kind, a.verdict, a.offloaded_percent) == ("gpu", "fits on GPU", 0)
    assert 0.4e9 < a.params < 0.6e9
    assert a.expected_tokens_per_s is not None and a.expected_tokens_per_s > 50
    assert a.speed_note.startswith("estimate")


def test_8b_is_offloaded_on_an_8_gib_gpu_and_slower_than_on_a_big_one() -> None:
    small = _advice(SMALL_GPU, "meta-llama/Llama-3.1-8B-Instruct")
    big = _advice(BIG_GPU, "meta-llama/Llama-3.1-8B-Instruct")
    assert small.verdict_kind == "offloaded"
    assert 0 < small.offloaded_percent < 100
    assert small.verdict == f"offloaded {small.offloaded_percent}%"
    assert big.verdict_kind == "gpu"
    assert small.expected_tokens_per_s < big.expected_tokens_per_s  # type: ignore[operator]
    assert "streaming" in small.speed_note


def test_too_large_says_how_much_is_missing_and_promises_no_speed() -> None:
    a = _advice(TINY, "meta-llama/Llama-3.1-70B-Instruct")
    assert a.verdict_kind == "too_large"
    assert a.missing_bytes > 0
    assert a.verdict.startswith("too large:") and "GiB missing" in a.verdict
    assert a.expected_tokens_per_s is None


def test_without_a_gpu_the_verdict_speaks_of_ram_and_disk() -> None:
    small = _advice(NO_GPU, "Qwen/Qwen2.5-0.5B-Instruct")
    assert (small.verdict_kind, small.verdict) == ("ram", "fits in RAM (no GPU)")
    mid = _advice(NO_GPU, "Qwen/Qwen2.5-7B-Instruct")
    assert mid.verdict_kind in ("ram", "offloaded")
    if mid.verdict_kind == "offloaded":
        assert mid.verdict.endswith("to disk (no GPU)")


def test_measured_bandwidth_replaces_the_nominal_one() -> None:
    entry = find_entry(repo_id="meta-llama/Llama-3.1-8B-Instruct")
    assert entry is not None
    spec = load_model_spec(source=entry.config_path())
    ram = replace(NO_GPU, ram_read_bytes_per_s=15e9)
    slow_disk = replace(ram, disk=replace(NO_GPU.disk, read_bytes_per_s=50e6))
    fast_disk = replace(ram, disk=replace(NO_GPU.disk, read_bytes_per_s=5e9))
    speeds = []
    for hw in (slow_disk, fast_disk):
        p = plan(hardware=hw, model=spec, store=StoreSpec.default(), workload=Workload())
        assert p.weights.disk > 0  # 16 GB of bf16 weights do not all fit in 16 GiB RAM
        s = estimate_speed(placement=p, hardware=hw)
        assert "measured bandwidths" in s.note
        speeds.append(s.tokens_per_s)
    assert speeds[0] < speeds[1]
    # Without a RAM measurement the note says which figure was assumed.
    unmeasured = plan(hardware=NO_GPU, model=spec, store=StoreSpec.default(), workload=Workload())
    assert "nominal" in estimate_speed(placement=unmeasured, hardware=NO_GPU).note


def test_unfit_placement_verdict() -> None:
    entry = find_entry(repo_id="meta-llama/Llama-3.1-70B-Instruct")
    assert entry is not None
    spec = load_model_spec(source=entry.config_path())
    p = plan(hardware=TINY, model=spec, store=StoreSpec.default(), workload=Workload())
    kind, words, percent = verdict_of(p)
    assert (kind, percent) == ("too_large", 0) and words.startswith("too large")


def test_installed_when_a_finished_download_is_there(tmp_path: Path) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    repo = "Qwen/Qwen2.5-0.5B-Instruct"
    folder = download_folder(repo_id=repo, paths=paths)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    assert installed_folder(repo_id=repo, paths=paths) is None  # not finished yet
    (folder / COMPLETE_MARKER).write_text(repo, encoding="utf-8")
    assert installed_folder(repo_id=repo, paths=paths) == folder

    result = recommended(
        paths=paths, chosen_model=str(folder), store=StoreSpec.default(), hardware=NO_GPU
    )
    by_id = {m.id: m for m in result.models}
    assert by_id[repo].installed and by_id[repo].chosen
    assert by_id[repo].installed_path == str(folder)
    assert not by_id["meta-llama/Llama-3.1-70B-Instruct"].installed
    assert "estimates" in result.hardware_note


@pytest.mark.parametrize("repo", ["Qwen/Qwen2.5-7B-Instruct"])
def test_chosen_by_repo_id_counts_as_installed(tmp_path: Path, repo: str) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    result = recommended(paths=paths, chosen_model=repo, store=StoreSpec.default(), hardware=NO_GPU)
    chosen = [m for m in result.models if m.chosen]
    assert [m.id for m in chosen] == [repo] and chosen[0].installed
