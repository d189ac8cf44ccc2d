"""Choosing a language model: a real (tiny, random-weight) Llama folder is
loaded by the same code users run, and answers come from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.runtime.models.synthetic import write_random_model
from tests.support.engine import RunningEngine


def test_chosen_model_answers_and_a_broken_one_is_refused(
    engine: RunningEngine, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n"
    )
    assert engine.ingest(notes).state == "done"
    model = write_random_model(folder=tmp_path / "tiny-llama", architecture="llama")

    result = engine.ragdoll("model", str(model))
    assert result.returncode == 0, result.stderr
    assert str(model) in result.stdout
    answer = engine.client.ask(question="When is the honey extracted?")
    assert answer.mode == "generative"
    assert answer.model and "tiny-llama" in answer.model
    assert answer.citations and answer.citations[0].path.endswith("bees.md")
    assert engine.client.status().answer_mode == "generative"

    broken = tmp_path / "not-a-model"
    broken.mkdir()
    with pytest.raises(EngineRequestError) as refused:
        engine.client.set_model(model=str(broken))
    assert refused.value.status == 400
    assert engine.client.settings().model == str(model)  # the old choice stands

    assert engine.ragdoll("model", "--none").returncode == 0
    assert engine.client.ask(question="When is the honey extracted?").mode == "extractive"
