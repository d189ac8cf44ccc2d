"""A continuation's log-probability after several contexts, in one padded pass, is what
transformers gives for each context alone; the streamed placements agree."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.likelihood import continuation_logprobs
from tests.engine.runtime.executor.conftest import make_placement

CONTEXTS = [[1, 40, 41, 42, 43, 44, 45, 46], [1, 50, 51], [1, 60, 61, 62, 63, 64]]
CONTINUATION = [7, 8, 9, 10]


def _reference(model_dir: Path) -> list[float]:
    ref = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    with torch.no_grad():
        for context in CONTEXTS:
            ids = torch.tensor([context + CONTINUATION])
            logp = torch.log_softmax(ref(input_ids=ids).logits[0].float(), dim=-1)
            start = len(context) - 1  # the position predicting the first continuation token
            out.append(sum(float(logp[start + i, t]) for i, t in enumerate(CONTINUATION)))
    return out


@pytest.mark.parametrize("tiers", [["cpu"] * 4, ["cpu", "disk", "cpu", "disk"]])
def test_padded_batch_matches_each_context_alone(llama_dir: Path, tiers: list[str]) -> None:
    model = StreamingModel(
        model_dir=llama_dir, placement=make_placement(model_dir=llama_dir, layer_tiers=tiers)
    )
    try:
        ours = continuation_logprobs(
            model=model, contexts=CONTEXTS, continuation=CONTINUATION, pad=0
        )
    finally:
        model.close()
    theirs = _reference(llama_dir)
    assert ours == pytest.approx(theirs, abs=1e-3)
    # The contexts differ, so do the likelihoods: nothing was read from the padding.
    assert len({round(v, 3) for v in ours}) == len(CONTEXTS)


def test_empty_inputs(llama_dir: Path) -> None:
    model = StreamingModel(
        model_dir=llama_dir, placement=make_placement(model_dir=llama_dir, layer_tiers=["cpu"] * 4)
    )
    try:
        assert continuation_logprobs(model=model, contexts=[], continuation=[5], pad=0) == []
        assert continuation_logprobs(model=model, contexts=[[1, 2]], continuation=[], pad=0) == [
            0.0
        ]
        with pytest.raises(ValueError, match="at least one token"):
            continuation_logprobs(model=model, contexts=[[]], continuation=[5], pad=0)
    finally:
        model.close()
