"""The GPU form of the real-model offload benchmark (bench/offload_real_gpu.py) and the
child systems it adds (bench/offload_real_child.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench import offload_real_gpu
from bench.offload_real_child import run_spec
from bench.real_models import fetch_hint, find_real_model

NAME = "smollm2-135m-instruct-q4_1"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_without_cuda_it_says_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no CUDA device"):
        offload_real_gpu.main(["--model", str(tmp_path / "absent.gguf")])


def test_the_executor_is_opened_as_the_engine_opens_it_and_once_kept_as_stored() -> None:
    base = {"model": "m.gguf"}
    engine = offload_real_gpu._spec(base, "executor")
    stored = offload_real_gpu._spec(base, "executor-compressed")
    peer = offload_real_gpu._spec(base, "transformers")
    assert engine["system"] == stored["system"] == "executor"
    assert engine["decode_at_load"] is True and stored["decode_at_load"] is False
    assert {engine["device"], stored["device"], peer["device"]} == {"cuda"}
    assert peer["system"] == "transformers"


@pytest.mark.slow
def test_each_system_of_the_gpu_form_agrees_with_the_reference_on_a_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same children on the CPU (a real model): the executor decoded at load and
    transformers' own GGUF loading give greedy tokens the float32 reference agrees with."""
    gguf = find_real_model(NAME)
    if gguf is None:
        pytest.skip(fetch_hint(NAME))
    from transformers import AutoTokenizer

    from bench.offload_real import prompts
    from engine.runtime.models.resolve import resolve_model_path

    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path))
    tokenizer = AutoTokenizer.from_pretrained(
        resolve_model_path(model=str(gguf)), local_files_only=True
    )
    made = prompts(tokenizer=tokenizer, prompt_tokens=128, agreement=1)
    base = {
        "model": str(gguf),
        "home": str(tmp_path),
        "speed_prompt": made["speed"],
        "tokens": 4,
        "agreement": made["agreement"],
        "agreement_tokens": 8,
        "threads": 0,
    }
    sequences = {}
    for system, extra in (("executor", {"decode_at_load": True}), ("transformers", {})):
        out = run_spec({**base, "system": system, "device": "cpu", **extra})
        assert out["device"] == "cpu" and out["prefill_s"] > 0 and out["decode_s"] > 0
        sequences[system] = [[made["agreement"][0], out["agreement_tokens"][0]]]
    agreement = run_spec({**base, "system": "reference", "sequences": sequences})["agreement"]
    for cell in agreement.values():
        assert cell["positions"] == 8 and cell["same"] >= 6
