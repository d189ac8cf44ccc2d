"""The recommended models' GGUF variants: each names a catalogue model, has a size
smaller than the model's own weights, and is found when it is in the Hugging Face cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner import StoreSpec
from engine.service.models.catalogue import load_catalogue, recommended
from engine.service.models.catalogue_gguf import load_gguf_variants

GIB = 2**30
NO_GPU = synthetic_profile(gpu_bytes=0, ram_bytes=16 * GIB, disk_bytes=500 * GIB)


def test_every_variant_names_a_catalogue_model_and_a_gguf_file() -> None:
    ids = {e.id for e in load_catalogue()}
    variants = load_gguf_variants()
    assert variants
    for v in variants:
        assert v.model in ids, v.model
        assert v.file.lower().endswith(".gguf")
        assert v.quant.lower().replace("_m", "") in v.file.lower().replace("_m", "")
        assert 2 < v.bits_per_weight < 17


def test_recommended_models_carry_gguf_sizes_and_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    variant = next(v for v in load_gguf_variants() if v.model == "Qwen/Qwen2.5-0.5B-Instruct")
    snapshot = hub / f"models--{variant.repo.replace('/', '--')}" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / variant.file).write_bytes(b"GGUF")

    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    result = recommended(paths=paths, chosen_model=None, store=StoreSpec.default(), hardware=NO_GPU)

    by_id = {m.id: m for m in result.models}
    qwen = by_id["Qwen/Qwen2.5-0.5B-Instruct"]
    sizes = {v.quant: v.file_bytes for v in qwen.gguf_variants}
    assert sizes["Q4_K_M"] < sizes["Q8_0"] < qwen.weight_bytes
    assert all(qwen.verdict in v.verdict for v in qwen.gguf_variants)
    # Held compressed, a 7B Q4_K_M fits in RAM where its bf16 weights stream from disk
    # (8 GiB of RAM, no GPU).
    small = synthetic_profile(gpu_bytes=0, ram_bytes=8 * GIB, disk_bytes=500 * GIB)
    seven = {
        m.id: m
        for m in recommended(
            paths=paths, chosen_model=None, store=StoreSpec.default(), hardware=small
        ).models
    }["Qwen/Qwen2.5-7B-Instruct"]
    q4 = next(v for v in seven.gguf_variants if v.quant == "Q4_K_M")
    assert "offloaded" in seven.verdict
    # Held in the kernel forms (5.5 bits a layer weight, the head in int8) and prefilled
    # in chunks, it fits in RAM at the default batch of 4, where the bf16 weights stream
    # by two thirds; each variant's note carries its speed estimate.
    assert _offloaded(seven.verdict) > 50
    assert q4.verdict == "fits in RAM (no GPU)"
    assert "tokens/s here (estimate)" in q4.note
    installed = [v for v in qwen.gguf_variants if v.installed_path]
    assert [v.file for v in installed] == [variant.file]
    assert not any(v.installed_path for v in by_id["Qwen/Qwen2.5-7B-Instruct"].gguf_variants)


def test_a_model_whose_gguf_file_is_in_use_is_marked_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    variant = next(v for v in load_gguf_variants() if v.model == "Qwen/Qwen2.5-1.5B-Instruct")
    snapshot = hub / f"models--{variant.repo.replace('/', '--')}" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / variant.file).write_bytes(b"GGUF")
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})

    def chosen(model: str | None) -> list[str]:
        result = recommended(
            paths=paths, chosen_model=model, store=StoreSpec.default(), hardware=NO_GPU
        )
        return [m.id for m in result.models if m.chosen]

    assert chosen(str(snapshot / variant.file)) == ["Qwen/Qwen2.5-1.5B-Instruct"]
    assert chosen(str(tmp_path / "elsewhere.gguf")) == []
    assert chosen(None) == []


def test_a_gguf_file_downloaded_by_ragdoll_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.service.models.catalogue import download_folder

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    variant = next(v for v in load_gguf_variants() if v.model == "Qwen/Qwen2.5-3B-Instruct")
    folder = download_folder(repo_id=variant.repo, paths=paths)
    folder.mkdir(parents=True)
    (folder / (variant.file + ".part")).write_bytes(b"GG")  # an unfinished download

    def installed() -> list[str | None]:
        result = recommended(
            paths=paths, chosen_model=None, store=StoreSpec.default(), hardware=NO_GPU
        )
        qwen = next(m for m in result.models if m.id == variant.model)
        return [v.installed_path for v in qwen.gguf_variants if v.file == variant.file]

    assert installed() == [None]
    (folder / variant.file).write_bytes(b"GGUF")
    assert installed() == [str(folder / variant.file)]


def _offloaded(verdict: str) -> int:
    """The percent in "offloaded N% to disk (no GPU)"."""
    return int(verdict.split("offloaded ")[1].split("%")[0])
