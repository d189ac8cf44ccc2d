"""The random-weight cross-encoders the reranker cost benchmark writes from a config
load and score through the product's Reranker, XLM-RoBERTa's single token type too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.quality_rerank import write_random_cross_encoder
from engine.rag.answer.reranker import Reranker


@pytest.mark.parametrize("model_type", ["bert", "xlm-roberta"])
def test_a_config_becomes_a_cross_encoder_the_product_loads(
    tmp_path: Path, model_type: str
) -> None:
    config = {
        "architectures": ["XLMRobertaForSequenceClassification"],
        "model_type": model_type,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "vocab_size": 30522,
        "max_position_embeddings": 514,
        "type_vocab_size": 1 if model_type == "xlm-roberta" else 2,
        "pad_token_id": 1 if model_type == "xlm-roberta" else 0,
        "id2label": {"0": "LABEL_0"},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    folder = write_random_cross_encoder(tmp_path / "ce", config=path)
    scores = Reranker(model=str(folder)).scores(
        question="Which exit code skips a commit?",
        texts=["Exit code 125 tells git bisect to skip the commit.", "Bees swarm in May."],
    )
    assert scores.shape == (2,) and all(abs(s) < 1e3 for s in scores)
