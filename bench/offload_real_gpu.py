"""`python -m bench.offload_real_gpu --model FILE.gguf`: a real GGUF model on a CUDA GPU.

The GPU form of `ragdoll bench offload --model` (bench/offload_real.py), for a machine
lent without llama.cpp built on it (the device machine reaches no package index):
each system in its own process (bench/offload_real_child.py), on the same prompts made
from a real manual in the model's chat template (`offload_real.prompts`):

- "executor": the file opened as the engine opens it on this machine (the planner's
  placement from the machine's profile, layers decoded once at load where they fit, as
  the engine asks when the user left the weights as stored);
- "executor-compressed": the same, the layers kept as stored and decoded at each use;
- "transformers": transformers' own GGUF loading, decoded to bfloat16, with its KV cache.

Each gives its load time, prefill and decode tok/s at one row, and peak GPU memory; the
float32 dequantize-then-matmul reference (on the CPU) gives each system's agreement:
the share of its greedy tokens that are the reference's top-1 choice. Prints a table,
writes the JSON with `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.offload_systems import MIB, load_average

SYSTEMS = ("executor", "executor-compressed", "transformers")


def _child(spec: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.offload_real_child", json.dumps(spec)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-1500:]}"}
    return json.loads(lines[-1][len("RESULT ") :])


def _spec(base: dict[str, Any], system: str) -> dict[str, Any]:
    if system == "executor":
        return {**base, "system": "executor", "device": "cuda", "decode_at_load": True}
    if system == "executor-compressed":
        return {**base, "system": "executor", "device": "cuda", "decode_at_load": False}
    return {**base, "system": system, "device": "cuda"}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from bench.offload_real import prompts
    from engine.runtime.models.resolve import resolve_model_path

    if not torch.cuda.is_available():
        raise SystemExit("bench.offload_real_gpu: torch sees no CUDA device")
    gguf = Path(args.model).expanduser().resolve()
    home = Path(tempfile.mkdtemp(prefix="ragdoll-bench-real-gpu-"))
    os.environ["RAGDOLL_HOME"] = str(home)
    folder = resolve_model_path(model=str(gguf))
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    made = prompts(tokenizer=tokenizer, prompt_tokens=args.prompt_tokens, agreement=args.agreement)
    base = {
        "model": str(gguf),
        "home": str(home),
        "speed_prompt": made["speed"],
        "tokens": args.tokens,
        "agreement": made["agreement"],
        "agreement_tokens": args.agreement_tokens,
        "threads": 0,
    }
    gpu = torch.cuda.get_device_name(0)
    print(
        f"{gpu}; model {gguf.name} ({gguf.stat().st_size / MIB:.0f} MiB); prompt "
        f"{len(made['speed'])} tokens, {args.tokens} decode tokens, {args.agreement} agreement "
        f"prompts of {args.agreement_tokens}; load average {load_average()}",
        flush=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    agreement: dict[str, Any] = {}
    for round_ in range(args.repeats):
        order = SYSTEMS if round_ % 2 == 0 else tuple(reversed(SYSTEMS))
        for system in order:
            spec = _spec(base, system)
            if round_ > 0:
                spec["agreement"] = []
            result = _child(spec, timeout_s=args.child_timeout)
            runs[system].append(result)
            print(_line(system, result, prompt=len(made["speed"]), tokens=args.tokens), flush=True)
        if round_ == 0:
            # Right after the first round: a run cut short by its time limit keeps it.
            agreement = _agreement(base=base, runs=runs, timeout_s=args.child_timeout)
    out = {
        "gpu_name": gpu,
        "model": gguf.name,
        "file_bytes": gguf.stat().st_size,
        "prompt_tokens": len(made["speed"]),
        "tokens": args.tokens,
        "runs": runs,
        "agreement": agreement,
        "load_average_after": load_average(),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def _agreement(
    *, base: dict[str, Any], runs: dict[str, list[dict[str, Any]]], timeout_s: float
) -> dict[str, Any]:
    sequences = {
        s: [[p, t] for p, t in zip(base["agreement"], r[0]["agreement_tokens"], strict=True)]
        for s, r in runs.items()
        if r and not r[0].get("error") and r[0].get("agreement_tokens")
    }
    reference = _child({**base, "system": "reference", "sequences": sequences}, timeout_s=timeout_s)
    if reference.get("error"):
        print(f"reference: FAILED: {reference['error']}", flush=True)
    agreement: dict[str, Any] = reference.get("agreement", {})
    for system, cell in agreement.items():
        print(
            f"{system:>20}: agrees with the float32 reference at {cell['same']}/"
            f"{cell['positions']} positions",
            flush=True,
        )
    return agreement


def _line(system: str, r: dict[str, Any], *, prompt: int, tokens: int) -> str:
    if r.get("error"):
        return f"{system:>20}: FAILED: {r['error'][-1500:]}"
    return (
        f"{system:>20}: load {r['load_s']:.1f} s, prefill {prompt / r['prefill_s']:.0f} tok/s, "
        f"decode {tokens / r['decode_s']:.1f} tok/s, peak GPU "
        f"{r.get('peak_device_bytes', 0) / MIB:.0f} MiB, decode mode {r.get('decode_mode', '-')}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.offload_real_gpu")
    parser.add_argument("--model", required=True, help="a .gguf file")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prompt-tokens", type=int, default=1500)
    parser.add_argument("--agreement", type=int, default=4)
    parser.add_argument("--agreement-tokens", type=int, default=64)
    # One lent machine's minutes (about 40 s a system and round there, 2026-12-04).
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child-timeout", type=float, default=300)
    parser.add_argument("--out")
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
