"""The offload benchmark's quick form, end to end on a tiny model (figures, not speed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench import offload
from bench.offload_systems import SYSTEMS


def offload_args(folder: Path, *extra: str) -> argparse.Namespace:
    """`ragdoll bench offload --quick --json --folder FOLDER EXTRA...` as parsed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    offload.add_arguments(parser)
    return parser.parse_args(["--quick", "--json", "--folder", str(folder), *extra])


def test_quick_offload_benchmark_reports_every_figure(tmp_path: Path) -> None:
    tiny = "--layers 4 --hidden 64 --intermediate 128 --tokens 3 --prompt-tokens 8"
    # --device cpu: the CPU form even where CUDA exists (the GPU form: test_offload_gpu.py).
    out = tmp_path / "figures.json"
    argv = ["--quick", "--json", "--folder", str(tmp_path / "model"), "--out", str(out)]

    # Through `python -m bench.offload`'s entry, which also writes the JSON.
    assert offload.main([*argv, *tiny.split(), "--batches", "1,2", "--device", "cpu"]) == 0

    figures = json.loads(out.read_text(encoding="utf-8"))

    assert_every_figure(figures, batches={"1", "2"})
    assert figures["tokens_match_reference"] is True
    assert figures["accelerate_tokens_match_reference"] is True
    assert figures["model"]["offloaded_layers"] == [1, 3]
    assert 0 < figures["model"]["offloaded_bytes"] < figures["model"]["checkpoint_bytes"]
    assert (figures["device"], figures["gpu_name"]) == ("cpu", None)


def assert_every_figure(figures: dict[str, Any], *, batches: set[str]) -> None:
    """The figures both forms report, each a positive number for every system and batch."""
    for key in (
        "speedup_vs_accelerate_b1",
        "overlap_efficiency",
        "roofline_efficiency",
        "batch_amortization",
        "disk_read_bytes_per_s",
    ):
        assert isinstance(figures[key], float), key
    assert figures["speedup_vs_accelerate_b1"] > 0
    assert figures["roofline_efficiency"] > 0
    assert set(figures["systems"]) == set(SYSTEMS)
    for by_batch in figures["systems"].values():
        assert set(by_batch) == batches
        assert all(v["decode_tok_s"] > 0 and v["prefill_tok_s"] > 0 for v in by_batch.values())
