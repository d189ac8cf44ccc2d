"""The real samplers on a tiny random model, and `ragdoll profile --active`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.answer.generative import GenerativeAnswerer
from engine.models.synthetic import write_random_model
from engine.paths import resolve_paths
from engine.planner.profiling import EXTRACTIVE_NOTE, fit_power_law, load_saved_profile
from engine.planner.samplers import generation_sampler


def test_generation_sampler_times_batches_of_a_tiny_model(tmp_path: Path) -> None:
    folder = write_random_model(folder=tmp_path / "llama", architecture="llama", hidden_size=32)
    answerer = GenerativeAnswerer(model_path=folder)
    sample = generation_sampler(model=answerer.model, tokenizer=answerer.tokenizer)
    samples = [(b, sample(b)) for b in (1, 2, 4)]
    assert all(t > 0 for _, t in samples)
    assert fit_power_law(samples=samples).a > 0


def test_profile_active_in_extractive_mode_with_an_empty_index(ragdoll_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "profile", "--active", "--json", "--budget", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["generation"] is None and result["retrieval"] is None
    assert EXTRACTIVE_NOTE in result["notes"]
    assert load_saved_profile(data_dir=resolve_paths().data) is not None
    shown = subprocess.run(
        [sys.executable, "-m", "app.cli", "profile"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "active profile" in shown.stdout and "chosen: batch 4" in shown.stdout
