"""The prefix-reuse benchmark's quick form, end to end on a tiny model, and its CLI kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from bench.prefix_reuse import measure_ttft_prefix_reuse
from engine.runtime.models.synthetic import write_random_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_model(
        folder=tmp_path_factory.mktemp("prefix-model"),
        architecture="qwen2",
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=128,
        max_position_embeddings=4096,
    )


def test_quick_measurement_reuses_the_first_turn(tiny: Path) -> None:
    figures = measure_ttft_prefix_reuse(model_dir=tiny, quick=True)

    assert figures["ttft_cold_s"] > 0 and figures["ttft_warm_s"] > 0
    assert figures["ttft_speedup_prefix_reuse"] == pytest.approx(
        figures["ttft_cold_s"] / figures["ttft_warm_s"]
    )
    # The follow-up turn starts with the whole first turn: its prompt's whole blocks
    # at least come from the cache, and the new question is prefilled.
    block = figures["cache"]["block_tokens"]
    assert figures["reused_tokens"] >= figures["turn1_prompt_tokens"] // block * block
    assert figures["reused_tokens"] < figures["prompt_tokens"]
    assert figures["prompt_tokens"] > figures["turn1_prompt_tokens"] + figures["answer_tokens"]
    assert figures["first_tokens_match"] is True
    assert 0 < figures["cache"]["host_bytes"] <= figures["cache"]["host_budget"]
    # Another conversation shares the system prompt only.
    other = figures["other_sources"]
    assert 0 < other["reused_tokens"] < figures["turn1_prompt_tokens"] // 2
    assert other["ttft_cold_s"] > 0 and other["ttft_warm_s"] > 0


def test_bench_prefix_kind_prints_json(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "prefix", "--quick", "--json", "--model", str(tiny)]) == 0
    figures = json.loads(capsys.readouterr().out)
    for key in ("ttft_cold_s", "ttft_warm_s", "ttft_speedup_prefix_reuse", "prompt_tokens"):
        assert figures[key] > 0, key
    assert figures["reused_tokens"] > 0


@pytest.mark.slow  # an engine, its embedder and 15 answered turns: minutes on a busy CPU
def test_the_product_path_reuses_each_earlier_turn(tiny: Path, tmp_path: Path) -> None:
    """Five turns through Engine.ask_stream on a small document: from turn 2 on, the
    cache serves the earlier turns (hit tokens, not time), and the answers are the
    same with and without it."""
    from bench.prefix_conversation import QUESTIONS, measure_conversation_ttft

    docs = tmp_path / "docs"
    docs.mkdir()
    paragraphs = [
        f"{q.rstrip('?')}: the manual answers this in step {i}, where git bisect is "
        f"described with the commands start, good, bad, log, run and reset."
        for i, q in enumerate(QUESTIONS)
    ]
    (docs / "bisect.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    figures = measure_conversation_ttft(model_dir=tiny, docs=docs, repeats=1, k=2)
    turns = figures["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3, 4, 5]
    assert turns[0]["reused_tokens"] == 0
    for t in turns[1:]:
        if t["prompt_tokens"] is None:
            continue  # nothing relevant found: no prompt
        assert t["reused_tokens"] > 0
        assert t["new_tokens"] < t["prompt_tokens"]
    assert all(t["same_answer"] for t in turns)
