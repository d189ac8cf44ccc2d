"""One system of `ragdoll bench offload --model FILE.gguf`, in its own process (and memory
cgroup, made by the parent, bench/offload_real.py).

`python -m bench.offload_real_child SPEC_JSON` prints one `RESULT {json}` line:

- "executor": the GGUF file opened as the product opens it (`resolve_model_path` →
  `open_model` on this machine, a home of its own), then one prefill of the speed prompt
  and greedy decode steps, timed apart, and the greedy tokens of each agreement prompt;
- "llama.cpp": the same through llama-cpp-python (bench/offload_llama.py);
- "reference": the file's values decoded once to float32 and multiplied in float32 by
  the Hugging Face modules (dequantize-then-matmul), fed each system's prompts and
  tokens at once: at how many positions its own top-1 token is the system's (teacher
  forcing, so one early difference does not count every later position).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

from bench.offload_child import anon_bytes, read_bytes


def _executor(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ["RAGDOLL_HOME"] = spec["home"]
    from engine.paths import resolve_paths
    from engine.rag.answer.in_use import open_model
    from engine.runtime.executor.generate import GenerationRequest, generate_ids
    from engine.runtime.models.resolve import resolve_model_path
    from engine.runtime.planner.placement import StoreSpec

    start = time.perf_counter()
    folder = resolve_model_path(model=spec["model"])
    longest = max([len(spec["speed_prompt"])] + [len(p) for p in spec["agreement"]])
    device = str(spec.get("device", "cpu"))
    in_use = open_model(
        model_path=folder,
        device=device,
        # The engine's own choice where the user left the weights as stored (GPU form).
        decode_at_load=bool(spec.get("decode_at_load", False)),
        paths=resolve_paths(),
        stop_at_eos=False,
        # The model alone, as llama.cpp runs it: no index shares the memory.
        store=lambda: StoreSpec.from_index(index_bytes=0, partition_count=0),
        # The context llama.cpp is given (its n_ctx): what this run needs.
        context_tokens=longest + max(int(spec["tokens"]), int(spec["agreement_tokens"])) + 8,
    )
    load_s = time.perf_counter() - start
    executor = in_use.answerer.executor
    out: dict[str, Any] = {
        "load_s": load_s,
        "anon_bytes_loaded": anon_bytes(),
        "decode_mode": executor.store.decode,
        "layers_in_ram": in_use.owner.placement.layer_tiers.count("cpu"),
        "layers": len(in_use.owner.placement.layer_tiers),
        "device": executor.device.type,
    }
    ids = list(spec["speed_prompt"])
    cache = executor.new_cache()
    t = len(ids)
    mask = torch.ones(1, t, dtype=torch.long)
    began = time.perf_counter()
    logits = executor.forward(
        input_ids=torch.tensor([ids]),
        attention_mask=mask,
        position_ids=torch.arange(t)[None],
        cache=cache,
        phase="prefill",
    )
    _synchronize(executor.device)
    out["prefill_s"] = time.perf_counter() - began
    before = read_bytes()
    began = time.perf_counter()
    for step in range(int(spec["tokens"])):
        token = logits[:, -1].argmax(-1, keepdim=True)
        mask = torch.ones(1, t + step + 1, dtype=torch.long)
        logits = executor.forward(
            input_ids=token,
            attention_mask=mask,
            position_ids=torch.tensor([[t + step]]),
            cache=cache,
            phase="decode",
        )
    _synchronize(executor.device)
    out["decode_s"] = time.perf_counter() - began
    out["decode_read_bytes"] = read_bytes() - before
    del cache
    requests = [
        GenerationRequest(
            prompt_ids=tuple(p), max_new_tokens=int(spec["agreement_tokens"]), stop_token_ids=()
        )
        for p in spec["agreement"]
    ]
    out["agreement_tokens"] = [generate_ids(model=executor, requests=[r])[0] for r in requests]
    in_use.close()
    return out


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _llama(spec: dict[str, Any]) -> dict[str, Any]:
    from bench.offload_llama import LlamaRunner

    threads = int(spec["threads"])
    longest = max([len(spec["speed_prompt"])] + [len(p) for p in spec["agreement"]])
    start = time.perf_counter()
    runner = LlamaRunner(
        gguf=Path(spec["model"]),
        threads=threads,
        max_batch=1,
        max_tokens=longest + max(int(spec["tokens"]), int(spec["agreement_tokens"])) + 8,
        repack=bool(spec.get("repack", True)),
    )
    load_s = time.perf_counter() - start
    run, decode_read = runner.run(
        prompts=torch.tensor([spec["speed_prompt"]]),
        tokens=int(spec["tokens"]),
        read_bytes=read_bytes,
    )
    agreement = []
    for prompt in spec["agreement"]:
        done, _ = runner.run(
            prompts=torch.tensor([prompt]),
            tokens=int(spec["agreement_tokens"]) - 1,
            read_bytes=read_bytes,
        )
        agreement.append(done.tokens[0])
    return {
        "load_s": load_s,
        "anon_bytes_loaded": anon_bytes(),
        "prefill_s": run.prefill_s,
        "decode_s": run.decode_s,
        "decode_read_bytes": decode_read,
        "agreement_tokens": agreement,
    }


def _transformers(spec: dict[str, Any]) -> dict[str, Any]:
    """transformers' own GGUF loading (decoded to bfloat16 at load) on the GPU, with its
    KV cache: the peer the GPU form has where llama.cpp is not built."""
    from transformers import AutoModelForCausalLM

    gguf = Path(spec["model"])
    device = torch.device(str(spec.get("device", "cuda")))
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    ).to(device)
    model.eval()
    _synchronize(device)
    out: dict[str, Any] = {"load_s": time.perf_counter() - start, "device": device.type}

    def greedy(prompt: list[int], tokens: int) -> tuple[list[int], float, float]:
        with torch.inference_mode():
            began = time.perf_counter()
            step = model(input_ids=torch.tensor([prompt], device=device), use_cache=True)
            _synchronize(device)
            prefill_s = time.perf_counter() - began
            chosen: list[int] = []
            began = time.perf_counter()
            for _ in range(tokens):
                token = step.logits[:, -1].argmax(-1, keepdim=True)
                chosen.append(int(token.item()))
                step = model(input_ids=token, past_key_values=step.past_key_values, use_cache=True)
            _synchronize(device)
            return chosen, prefill_s, time.perf_counter() - began

    _, out["prefill_s"], out["decode_s"] = greedy(list(spec["speed_prompt"]), int(spec["tokens"]))
    out["agreement_tokens"] = [
        greedy(list(p), int(spec["agreement_tokens"]))[0] for p in spec["agreement"]
    ]
    return out


def _reference(spec: dict[str, Any]) -> dict[str, Any]:
    """Per system, the share of its tokens that are the reference's top-1 choice."""
    os.environ["RAGDOLL_HOME"] = spec["home"]
    from bench.offload_systems import GIB, forced_placement
    from engine.runtime.executor.forward import StreamingModel
    from engine.runtime.hardware.profile import synthetic_profile
    from engine.runtime.models.resolve import resolve_model_path
    from engine.runtime.planner.model_spec import load_model_spec

    folder = resolve_model_path(model=spec["model"])
    model_spec = load_model_spec(source=folder)
    placement = forced_placement(
        hardware=synthetic_profile(gpu_bytes=0, ram_bytes=64 * GIB, disk_bytes=1000 * GIB),
        spec=model_spec,
        layer_tiers=["cpu"] * model_spec.num_layers,
        depth=1,
    )
    model = StreamingModel(
        model_dir=folder,
        placement=placement,
        dtype=torch.float32,
        compressed=False,  # every block decoded once to float32: gguf's exact values
        lean=False,  # transformers' own modules
        kv_host_layers=0,
    )
    out: dict[str, Any] = {}
    try:
        for system, sequences in spec["sequences"].items():
            same = total = 0
            for prompt, tokens in sequences:
                ids = torch.tensor([list(prompt) + list(tokens[:-1])])
                logits = model.forward(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    position_ids=torch.arange(ids.shape[1])[None],
                    cache=model.new_cache(),
                    phase="prefill",
                    tail=len(tokens),
                )
                choice = logits[0].argmax(-1).tolist()
                same += sum(int(a == b) for a, b in zip(choice, tokens, strict=True))
                total += len(tokens)
            out[system] = {"same": same, "positions": total}
    finally:
        model.close()
    return {"agreement": out}


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    threads = int(spec.get("threads") or 0)
    if threads:
        torch.set_num_threads(threads)
    kind = spec["system"]
    if kind in ("executor", "executor-torch"):
        if kind == "executor-torch":  # the torch kernel forms, for comparison
            os.environ["RAGDOLL_TORCH_KERNELS"] = "1"
        out = _executor(spec)
    elif kind == "llama.cpp":
        out = _llama(spec)
    elif kind == "transformers":
        out = _transformers(spec)
    elif kind == "reference":
        out = _reference(spec)
    else:
        raise ValueError(f"unknown system {kind!r}")
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if torch.cuda.is_available():
        out["peak_device_bytes"] = torch.cuda.max_memory_allocated()
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print("RESULT " + json.dumps(run_spec(json.loads(args[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
