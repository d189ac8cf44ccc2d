"""The peers benchmark's figures: which run is each system's reference, and the weight
bytes a resident step touches (the roofline's numerator)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.offload_peers_report import _reference, _touched_bytes, peer_figures


def _run(tokens: list[list[int]]) -> dict:
    return {
        "batches": {
            "1": {
                "decode_s": 1.0,
                "decode_tok_s": 4.0,
                "prefill_tok_s": 8.0,
                "decode_read_bytes": 0,
                "tokens": tokens,
            }
        }
    }


def test_bf16_is_checked_against_the_float32_checkpoint_when_it_ran_else_its_own_run() -> None:
    f32, bf16 = _run([[1, 2, 3]]), _run([[1, 2, 4]])
    assert _reference(resident={"executor f32": f32, "executor bf16": bf16}, fmt="bf16") == {
        "1": [[1, 2, 3]]
    }
    assert _reference(resident={"executor bf16": bf16}, fmt="bf16") == {"1": [[1, 2, 4]]}
    # Q4_0 is checked against the kernel's own arithmetic, dequantized, where it ran.
    ref = _run([[9]])
    got = _reference(resident={"executor q4_0": bf16, "executor q4_0 reference": ref}, fmt="q4_0")
    assert got == {"1": [[9]]}
    assert _reference(resident={}, fmt="q8_0") is None


def test_a_step_touches_the_bytes_each_runtime_multiplies_with(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    config = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
    }
    (folder / "config.json").write_text(json.dumps(config))
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"\0" * 9000)
    params = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128) + 2 * 64 * 100

    def system(runtime: str, fmt: str, **spec: str) -> dict:
        return {
            "runtime": runtime,
            "format": fmt,
            "spec": {"model": str(folder), **spec},
            "files": [weights],
        }

    # llama.cpp and Accelerate multiply with the bytes of their files (bf16 for the latter).
    assert _touched_bytes(system("llama.cpp", "q4_0")) == 9000
    assert _touched_bytes(system("accelerate", "bf16", dtype="bfloat16")) == 9000
    # The int4 kernel reads the repacked Q4_0: a bf16 scale and zero per 32 weights.
    assert _touched_bytes(system("executor", "q4_0")) == 10000
    # Decoded per use: float32, or bf16 where the executor computes in bf16.
    assert _touched_bytes(system("executor", "q4_0", decode="layer")) == 4 * params
    assert _touched_bytes(system("executor", "bf16", dtype="bfloat16")) == 2 * params


def test_the_limited_rows_say_how_many_layers_the_executor_kept_in_ram() -> None:
    result = {**_run([[1, 2]]), "cgroup_peak_bytes": 1, "layers_in_ram": 9}
    figures = peer_figures(
        results={"resident": {}, "limited": {"executor q4_0": result}},
        systems={
            "executor q4_0": {"format": "q4_0", "runtime": "executor", "files": [], "spec": {}}
        },
        batches=[1],
        tokens=1,
        disk_bw=1.0,
        ram_bw=1.0,
    )
    row = figures["systems"]["executor q4_0"]["limited"]
    assert row["layers_in_ram"] == 9 and row["1"]["decode_tok_s"] == 4.0
