"""`ragdoll bench offload --model FILE.gguf --quick` on a real model (SmolLM2-135M-Instruct
Q4_1, fetched by bench/real_models.py; skipped with a message when absent): every
figure it prints comes from a run that finished, and the agreement is counted."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import offload_cgroup
from bench.offload_real import prompts, run_real
from bench.real_models import fetch_hint, find_real_model

NAME = "smollm2-135m-instruct-q4_1"


@pytest.fixture(scope="module")
def smollm2() -> Path:
    path = find_real_model(NAME)
    if path is None:
        pytest.skip(fetch_hint(NAME))
    return path


@pytest.mark.skipif(offload_cgroup.unavailable_reason() is not None, reason="needs memory cgroups")
def test_quick_form_runs_the_executor_and_checks_its_tokens(smollm2: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    args = argparse.Namespace(
        model=smollm2,
        peers=None,
        quick=True,
        tokens=8,
        prompt_tokens=128,
        thread_counts="1",
        agreement_prompts=1,
        repeats=1,
        folder=tmp_path / "home",
        limited=False,
        child_timeout=600,
        json=False,
    )
    out = run_real(args, say=lines.append)
    cell = out["figures"]["executor@1"]
    assert cell["rounds"] == 1 and cell["decode"] > 0 and cell["prefill"] > 0
    assert cell["peak_bytes"] > 0
    agreement = out["agreement"]["executor"]
    assert agreement["positions"] == 16  # one prompt, the quick form's 16 tokens
    assert 0.5 <= agreement["share"] <= 1.0
    assert any(line.startswith("| 1 | executor |") for line in lines)


def test_prompts_are_built_in_the_models_template_to_the_asked_length(
    smollm2: Path, ragdoll_home: Path
) -> None:
    from transformers import AutoTokenizer

    from engine.runtime.models.resolve import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(
        resolve_model_path(model=str(smollm2)), local_files_only=True
    )
    made = prompts(tokenizer=tokenizer, prompt_tokens=300, agreement=3)
    assert 280 <= len(made["speed"]) <= 320
    assert len(made["agreement"]) == 3
    text = tokenizer.decode(made["agreement"][0])
    assert "<|im_start|>assistant" in text  # SmolLM2's chat template, ready to answer
