"""bench/decode_step.py: its four variants, timed and compared, on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

from bench import decode_step
from engine.runtime.executor import forward


def test_the_variants_are_timed_and_the_attention_choice_restored(tmp_path: Path) -> None:
    before = forward.GPU_ATTENTION
    out = tmp_path / "decode.json"
    assert (
        decode_step.main(
            [
                "--device",
                "cpu",
                "--shape",
                "tiny",
                "--steps",
                "3",
                "--rounds",
                "1",
                "--prompt",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert figures["decoder_runs"] and figures["device"] == "cpu"
    assert set(figures["variants"]) == set(decode_step.VARIANTS)
    for row in figures["variants"].values():
        assert row["median_ms"] > 0 and len(row["ms"]) == 1
        assert 0 <= row["tokens_equal"] <= 3
    assert before == forward.GPU_ATTENTION
