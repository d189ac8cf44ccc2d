"""Model names to folders: a local path, or a snapshot already in the Hugging Face cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.errors import ModelLoadError
from engine.runtime.models.loading import read_model_files
from engine.runtime.models.resolve import display_name, resolve_model_path
from engine.runtime.models.synthetic import write_random_model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        arch: write_random_model(folder=root / arch, architecture=arch, hidden_size=32)
        for arch in ("llama", "qwen2", "mistral")
    }


def _put_in_hf_cache(*, hub: Path, repo_id: str, model: Path, revision: str) -> Path:
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    shutil.copytree(model, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def test_resolve_model_path_finds_a_model_in_the_hf_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: dict[str, Path]
) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snapshot = _put_in_hf_cache(
        hub=tmp_path / "hf" / "hub",
        repo_id="acme/tiny-llama",
        model=models["llama"],
        revision="0123456789abcdef0123456789abcdef01234567",
    )

    found = resolve_model_path(model="acme/tiny-llama")

    assert found.resolve() == snapshot.resolve()
    assert display_name(model_path=found) == "acme/tiny-llama"
    assert read_model_files(model_path=found).name == "acme/tiny-llama"


def test_resolve_model_path_honours_hf_hub_cache_and_missing_refs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: dict[str, Path]
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = _put_in_hf_cache(
        hub=tmp_path / "hub", repo_id="acme/q", model=models["qwen2"], revision="abc"
    )
    (snapshot.parent.parent / "refs" / "main").unlink()  # e.g. a copied cache

    assert resolve_model_path(model="acme/q").resolve() == snapshot.resolve()


def test_resolve_model_path_accepts_a_local_folder(models: dict[str, Path]) -> None:
    assert resolve_model_path(model=str(models["mistral"])) == models["mistral"].resolve()


def test_resolve_model_path_explains_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    with pytest.raises(ModelLoadError, match=r"'acme/absent'.*empty-hub"):
        resolve_model_path(model="acme/absent")
    with pytest.raises(ModelLoadError, match="does not exist"):
        resolve_model_path(model=str(tmp_path / "no" / "such" / "folder"))

    not_a_model = tmp_path / "folder"
    not_a_model.mkdir()
    with pytest.raises(ModelLoadError, match=r"config\.json"):
        resolve_model_path(model=str(not_a_model))
    (not_a_model / "config.json").write_text("{}")
    (not_a_model / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="safetensors"):
        resolve_model_path(model=str(not_a_model))
