"""A real trained model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, fetched by
bench/real_models.py; skipped with a message when it is not here) answers through
the product's path: the GGUF file resolved to its folder, planned for this machine, its
layers in their kernel forms, the prompt built from sources, the answer streamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.real_models import fetch_hint, find_real_model
from engine.paths import resolve_paths
from engine.rag.answer.in_use import open_model
from engine.rag.answer.passages import Passage
from engine.runtime.models.resolve import resolve_model_path

NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"


@pytest.fixture(scope="module")
def real_model_path() -> Path:
    path = find_real_model(NAME)
    if path is None:
        pytest.skip(fetch_hint(NAME))
    return path


def test_the_real_model_answers_from_its_sources(
    real_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))
    folder = resolve_model_path(model=str(real_model_path))
    in_use = open_model(model_path=folder, device="cpu", paths=resolve_paths())
    try:
        executor = in_use.answerer.executor
        assert executor.store.decode == "kernel"  # never decoded to float32
        assert in_use.owner.placement.fits
        passages = [
            Passage(
                index=1,
                text=(
                    "The backup job runs every night at 02:30 and keeps the last "
                    "fourteen archives in /srv/backups; older ones are deleted."
                ),
                path="/docs/ops.txt",
                page=None,
            )
        ]
        answer = "".join(
            in_use.answerer.stream(
                question="How many backup archives are kept?",
                passages=passages,
                max_new_tokens=40,
            )
        )
        assert "fourteen" in answer.lower() or "14" in answer, answer
    finally:
        in_use.close()
