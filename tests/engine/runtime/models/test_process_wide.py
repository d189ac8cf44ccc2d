"""Models built in two threads at once leave the process able to build a tied model."""

import threading
from pathlib import Path

from engine.rag.ingest.embedder import Embedder
from tests.support.tiny_embedder import write_random_embedder


def _tied_head_is_tied() -> bool:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=48,
        num_attention_heads=4,
        num_hidden_layers=1,
        vocab_size=97,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    return model.lm_head.weight is model.model.embed_tokens.weight


def test_embedders_loaded_at_once_leave_weight_tying_on(tmp_path: Path) -> None:
    # Transformers swaps PreTrainedModel.init_weights/tie_weights and torch.nn.init's
    # functions for stand-ins while it loads, and puts back what it found: two loads at
    # once could put back each other's stand-ins, for the process's life.
    from transformers import PreTrainedModel

    model = write_random_embedder(tmp_path / "tiny", hidden=32)
    originals = (PreTrainedModel.init_weights, PreTrainedModel.tie_weights)
    failures: list[BaseException] = []

    def load() -> None:
        try:
            for _ in range(12):
                Embedder(model=str(model), device="cpu", backend="torch").embed(["x"])
        except BaseException as e:  # reported below, not lost in the thread
            failures.append(e)

    workers = [threading.Thread(target=load) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures
    assert (PreTrainedModel.init_weights, PreTrainedModel.tie_weights) == originals
    assert _tied_head_is_tied()
