"""`ragdoll bench offload --weights`: the executor on the same model written as GGUF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import offload
from bench.offload_weights import parse_formats


def test_weight_formats_are_parsed_and_unknown_ones_refused() -> None:
    assert parse_formats("f32, Q8_0,q4_0") == ["q8_0", "q4_0"]
    assert parse_formats("bf16,int8,int4") == ["bf16", "int8", "int4"]
    assert parse_formats(None) == []
    with pytest.raises(ValueError, match="unknown weight format 'int3'"):
        parse_formats("f32,int3")


def test_quick_benchmark_runs_gguf_formats_with_fewer_disk_bytes(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    argv = ["--quick", "--json", "--folder", str(tmp_path / "model"), "--out", str(out)]
    tiny = "--layers 4 --hidden 64 --intermediate 128 --tokens 3 --prompt-tokens 8"
    extra = ["--batches", "1", "--device", "cpu", "--weights", "f32,int8,int4,bf16"]
    assert offload.main([*argv, *tiny.split(), *extra]) == 0

    weights = json.loads(out.read_text(encoding="utf-8"))["weights"]
    f32 = weights["f32"]["disk_bytes_per_token"]
    q8, q4, bf16 = weights["int8"], weights["int4"], weights["bf16"]
    # Norms stay float32 in GGUF, so the ratios are a little under 32/8.5 and 32/4.5.
    assert f32 / 4 < q8["disk_bytes_per_token"] < f32 / 3
    assert f32 / 8 < q4["disk_bytes_per_token"] < f32 / 5
    assert bf16["disk_bytes_per_token"] * 2 == f32
    # Held compressed in RAM too: the resident layers take the stored bytes.
    assert q4["held_layer_bytes"] < q8["held_layer_bytes"] < bf16["held_layer_bytes"]
    for w in (q8, q4, bf16):
        run = w["runs"]["1"]
        assert run["decode_tok_s"] > 0 and run["prefill_tok_s"] > 0
        assert run["resident_decode_tok_s"] > 0 and run["reference_decode_tok_s"] > 0
        assert run["tokens_match_reference"] is True
