"""`python -m bench.decode_step [--device cuda] [--shape smol|qwen15]`: what one decode step
costs the executor on a model held decoded, by how it computes its layers.

A random-weight model of a real model's shape (SmolLM2-135M or Qwen2.5-1.5B, bfloat16),
opened as the engine opens it (`open_model`, decoded at load). One prompt, then greedy
decode steps, timed; four variants alternated in each round:

- "decoder": the executor as it runs (engine/runtime/executor/decoder.py computes the
  layers; on a GPU, attention without cuDNN's: forward.GPU_ATTENTION);
- "modules": the Hugging Face modules compute the layers (what a model held decoded ran
  before 2026-12-04);
- "+cudnn": each of those with cuDNN's attention allowed first (what ran before).

Prints each variant's median ms a step over the rounds, its ratio to "modules+cudnn",
and how many of its greedy tokens equal that variant's (random weights give near-ties, so
bfloat16 rounding may part them: a figure of numerics, not of correctness, which the
tests check against the modules in float32). `--out` writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

SHAPES: dict[str, dict[str, Any]] = {
    "smol": {  # SmolLM2-135M
        "architecture": "llama",
        "hidden_size": 576,
        "num_layers": 30,
        "num_heads": 9,
        "num_kv_heads": 3,
        "intermediate_size": 1536,
        "vocab_size": 49152,
    },
    "qwen15": {  # Qwen2.5-1.5B
        "architecture": "qwen2",
        "hidden_size": 1536,
        "num_layers": 28,
        "num_heads": 12,
        "num_kv_heads": 2,
        "intermediate_size": 8960,
        "vocab_size": 151936,
    },
    "tiny": {  # for the tests
        "architecture": "llama",
        "hidden_size": 64,
        "num_layers": 2,
        "num_heads": 4,
        "num_kv_heads": 2,
        "intermediate_size": 128,
    },
}
VARIANTS = ("decoder", "modules", "decoder+cudnn", "modules+cudnn")


def run(*, device: str, shape: str, steps: int, rounds: int, prompt: int) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend

    from engine.paths import resolve_paths
    from engine.rag.answer.in_use import open_model
    from engine.runtime.executor import forward
    from engine.runtime.models.synthetic import write_random_model
    from engine.runtime.planner.placement import StoreSpec

    home = Path(tempfile.mkdtemp(prefix="ragdoll-bench-decode-"))
    os.environ["RAGDOLL_HOME"] = str(home)
    folder = write_random_model(folder=home / "model", dtype="bfloat16", **SHAPES[shape])
    in_use = open_model(
        model_path=folder,
        device=device,
        decode_at_load=True,
        paths=resolve_paths(),
        stop_at_eos=False,
        store=lambda: StoreSpec.from_index(index_bytes=0, partition_count=0),
        context_tokens=prompt + steps + 8,
    )
    executor = in_use.answerer.executor
    vocab = int(executor.config.vocab_size)
    ids = torch.randint(0, vocab, (1, prompt), generator=torch.Generator().manual_seed(1))
    without = forward.GPU_ATTENTION
    backends = {False: without, True: (SDPBackend.CUDNN_ATTENTION, *without)}

    def sync() -> None:
        if executor.device.type == "cuda":
            torch.cuda.synchronize(executor.device)

    def decode() -> tuple[float, list[int]]:
        cache = executor.new_cache()
        logits = executor.forward(
            input_ids=ids,
            attention_mask=torch.ones(1, prompt, dtype=torch.long),
            position_ids=torch.arange(prompt)[None],
            cache=cache,
            phase="prefill",
        )
        chosen: list[int] = []
        sync()
        began = time.perf_counter()
        for step in range(steps):
            token = logits[:, -1].argmax(-1, keepdim=True)
            chosen.append(int(token))
            logits = executor.forward(
                input_ids=token,
                attention_mask=torch.ones(1, prompt + step + 1, dtype=torch.long),
                position_ids=torch.tensor([[prompt + step]]),
                cache=cache,
                phase="decode",
            )
        sync()
        return (time.perf_counter() - began) / steps * 1e3, chosen

    dense = executor._dense
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    tokens: dict[str, list[int]] = {}
    try:
        for _ in range(rounds):
            for variant in VARIANTS:
                executor._dense = dense and variant.startswith("decoder")
                forward.GPU_ATTENTION = backends["+cudnn" in variant]
                ms, tokens[variant] = decode()
                times[variant].append(ms)
    finally:
        forward.GPU_ATTENTION = without
        executor._dense = dense
        in_use.close()
    old = statistics.median(times["modules+cudnn"])
    rows = {
        v: {
            "median_ms": statistics.median(times[v]),
            "ms": times[v],
            "speedup": old / statistics.median(times[v]),
            "tokens_equal": sum(
                a == b for a, b in zip(tokens[v], tokens["modules+cudnn"], strict=True)
            ),
        }
        for v in VARIANTS
    }
    return {
        "device": executor.device.type,
        "gpu_name": torch.cuda.get_device_name(0) if executor.device.type == "cuda" else None,
        "shape": shape,
        "steps": steps,
        "rounds": rounds,
        "prompt_tokens": prompt,
        "decoder_runs": dense,
        "variants": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="smol")
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=200, help="prompt tokens")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    figures = run(
        device=args.device,
        shape=args.shape,
        steps=args.steps,
        rounds=args.rounds,
        prompt=args.prompt,
    )
    print(
        f"{figures['gpu_name'] or figures['device']}; shape {args.shape}; "
        f"{args.steps} steps after a {args.prompt}-token prompt, {args.rounds} rounds"
    )
    for variant, row in figures["variants"].items():
        print(
            f"{variant:14s} {row['median_ms']:7.2f} ms/step ({1e3 / row['median_ms']:6.1f} tok/s)"
            f"  {row['speedup']:.2f}x modules+cudnn  tokens equal {row['tokens_equal']}/"
            f"{args.steps}"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
