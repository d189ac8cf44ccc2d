"""One system of `ragdoll bench offload --peers`, run inside its memory cgroup.

`python -m bench.offload_child SPEC_JSON` loads one system once (the executor on a
model folder, Accelerate `device_map` offloading, or llama.cpp on a GGUF file), runs the
greedy prefill + decode of every batch size in the spec, and prints one JSON line: per
batch the timings, the greedy tokens and the bytes this process read from the disk while
decoding (/proc/self/io `read_bytes`: real block-device reads, page faults on an mmap
included, page-cache hits excluded). The parent (bench/offload_peers.py) made the
cgroup and dropped the model's files from the page cache before starting it.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# Imports of the systems are inside the functions: each child loads only its own runtime,
# so that the memory its cgroup is charged is that runtime's.


def read_bytes() -> int:
    """Bytes this process has read from block devices so far (0 where not reported)."""
    try:
        for line in Path("/proc/self/io").read_text(encoding="utf-8").splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def anon_bytes() -> int:
    """This process's anonymous resident memory now (/proc/self/status RssAnon; 0 where
    not reported): what the cgroup cannot reclaim, unlike the page cache it also counts."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    threads = int(spec.get("threads") or 0)
    if threads:
        torch.set_num_threads(threads)
    system = spec["system"]
    start = time.perf_counter()
    if system == "llama.cpp":
        from bench.offload_llama import LlamaRunner

        runner: Any = LlamaRunner(
            gguf=Path(spec["model"]),
            threads=threads or torch.get_num_threads(),
            max_batch=max(spec["batches"]),
            max_tokens=int(spec["prompt_tokens"]) + int(spec["tokens"]) + 8,
            repack=bool(spec.get("repack", True)),
        )
        run_batch: Callable[[torch.Tensor], Any] = lambda p: runner.run(  # noqa: E731
            prompts=p, tokens=int(spec["tokens"]), read_bytes=read_bytes
        )
    else:
        run_batch = _torch_system(spec)
    load_s = time.perf_counter() - start
    anon_loaded = anon_bytes()
    from bench.offload_systems import _prompts

    out: dict[str, Any] = {"load_s": load_s, "anon_bytes_loaded": anon_loaded, "batches": {}}
    for batch in spec["batches"]:
        prompts = _prompts(batch=int(batch), length=int(spec["prompt_tokens"]))
        run, decode_read = run_batch(prompts)
        out["batches"][str(batch)] = {
            "prefill_s": run.prefill_s,
            "decode_s": run.decode_s,
            "prefill_tok_s": run.prefill_tok_s,
            "decode_tok_s": run.decode_tok_s,
            "decode_read_bytes": decode_read,
            "streamed_bytes": run.streamed_bytes,
            # The executor's copy thread: seconds it spent loading during decode, and how
            # often the compute thread waited for it (disk-bound when busy ≈ decode_s).
            "copy_busy_s": run.copy_busy_s,
            "prefetch_waits": run.prefetch_waits,
            "tokens": run.tokens,
            "anon_bytes_after": anon_bytes(),
        }
    close = getattr(run_batch, "close", None)
    if close is not None:
        close()  # the executor's copy thread ends before the interpreter does
    out.update(getattr(run_batch, "info", {}))
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["torch_threads"] = torch.get_num_threads()
    return out


def _torch_system(spec: dict[str, Any]) -> Callable[[torch.Tensor], Any]:
    """The executor or Accelerate, loaded once; returns a function that times one batch."""
    from transformers import DynamicCache

    from bench.offload_systems import (
        GIB,
        _executor_forward,
        _hf_forward,
        _timed,
        forced_placement,
    )
    from engine.runtime.hardware.profile import synthetic_profile
    from engine.runtime.planner.model_spec import load_model_spec

    system, tier = spec["system"], spec["tier"]
    folder = Path(spec["model"])
    if system == "executor":
        from engine.runtime.executor.forward import StreamingModel

        dtype = getattr(torch, spec.get("dtype") or "float32")
        if tier == "disk":
            placement = planned_placement(spec, folder=folder, dtype=dtype)
        else:
            model_spec = load_model_spec(source=folder)
            placement = forced_placement(
                hardware=synthetic_profile(gpu_bytes=0, ram_bytes=64 * GIB, disk_bytes=1000 * GIB),
                spec=model_spec,
                layer_tiers=["cpu"] * model_spec.num_layers,
                depth=int(spec.get("depth") or 1),
            )
        model = StreamingModel(
            model_dir=folder,
            placement=placement,
            device=torch.device("cpu"),
            dtype=dtype,
            # The cgroup decides what stays in the page cache, as it does for the others.
            evict_after_read=False,
            kv_host_layers=0,
            # None: the executor's own choice (packed.choose_decode: the int4 kernel for
            # Q4_0 on a CPU, matrix decoding under the limit otherwise); the reference
            # systems name theirs.
            decode=spec.get("decode"),
            # Where streamed Q4_0 layers are kept repacked for the kernel (written by the
            # first run that streams them, reused by the next); absent: repacked per use.
            repack_cache=Path(spec["repack_cache"]) if spec.get("repack_cache") else None,
        )
        resident = placement.layer_tiers.count("cpu")
        info = {
            "layers_in_ram": resident,
            "layers": len(placement.layer_tiers),
            "decode_mode": model.store.decode,
            "dtype": str(dtype).removeprefix("torch."),
            "prefetch_depth_decode": placement.prefetch_depth_decode,
            # What the planner counted on using of the RAM it saw free (placement.used),
            # to set beside the measured peak: an estimate below it would be an OOM.
            "planned_ram_bytes": placement.used.cpu,
            "ram_available_at_plan_bytes": placement.capacities.cpu,
        }
        print(
            f"decode mode: {model.store.decode}; {resident} layers in RAM",
            file=sys.stderr,
            flush=True,
        )
        forward = _executor_forward(model)
        new_cache = model.new_cache
        timed_model: Any = model
    else:
        from accelerate import init_empty_weights  # noqa: F401 - Accelerate must be present
        from transformers import AutoModelForCausalLM

        dtype = getattr(torch, spec.get("dtype") or "bfloat16")
        if tier == "disk":
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            device_map: dict[str, str] = {
                "model.embed_tokens": "cpu",
                "model.rotary_emb": "cpu",
                "model.norm": "cpu",
                "lm_head": "cpu",
            }
            for i in range(int(config["num_hidden_layers"])):
                device_map[f"model.layers.{i}"] = "disk"
            # As a user would under a limit: a checkpoint saved in bf16 (the parent gives
            # one), loaded in bf16 tensor by tensor, the layers offloaded to the disk.
            hf = AutoModelForCausalLM.from_pretrained(
                folder,
                dtype=dtype,
                device_map=device_map,
                offload_folder=spec["offload_folder"],
                low_cpu_mem_usage=True,
            )
        else:
            hf = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, low_cpu_mem_usage=True)
        hf.eval()
        hf_config = hf.config
        forward = _hf_forward(hf, device=torch.device("cpu"))
        new_cache = lambda: DynamicCache(config=hf_config)  # noqa: E731
        timed_model = None

    def run_batch(prompts: torch.Tensor) -> tuple[Any, int]:
        marks: list[int] = []

        def counted(ids: Any, mask: Any, pos: Any, cache: Any, phase: str) -> Any:
            if phase == "decode" and not marks:
                marks.append(read_bytes())
            return forward(ids, mask, pos, cache, phase)

        run = _timed(
            system=system,
            load_s=0.0,
            prompts=prompts,
            tokens=int(spec["tokens"]),
            forward=counted,
            new_cache=new_cache,
            model=timed_model,
        )
        decode_read = read_bytes() - marks[0] if marks else 0
        return dataclasses.replace(run), decode_read

    if timed_model is not None:
        run_batch.close = timed_model.close  # type: ignore[attr-defined]
        run_batch.info = info  # type: ignore[attr-defined]
    return run_batch


def planned_placement(spec: dict[str, Any], *, folder: Path, dtype: torch.dtype) -> Any:
    """The product's placement for this model on this machine as this process sees it,
    inside its memory cgroup: the planner's RAM budget is what the cgroup's limit leaves
    (engine/runtime/hardware/cgroup.py), its layers the ones the planner keeps in RAM, the rest
    streamed from the disk. Sized for the benchmark's workload (its largest batch, prompt
    and output) with no index beside it; PlacementError when nothing fits."""
    from engine.runtime.hardware.profile import snapshot
    from engine.runtime.planner.placement import StoreSpec, Workload
    from engine.runtime.planner.planner import plan
    from engine.runtime.planner.stored import load_held_spec

    held = load_held_spec(source=folder, dtype=str(dtype).removeprefix("torch."), cpu=True)
    hardware = snapshot(data_dir=folder)
    if hardware.gpus:
        hardware = dataclasses.replace(hardware, gpus=())
    placement = plan(
        hardware=hardware,
        model=held,
        store=StoreSpec(index_bytes=0, partition_count=0, partition_bytes=0),
        workload=Workload(
            batch=max(int(b) for b in spec["batches"]),
            context_tokens=int(spec["prompt_tokens"]) + int(spec["tokens"]) + 1,
            retrieval_batch=1,
        ),
    )
    placement.raise_if_unfit()
    if spec.get("stream_all"):
        # The comparison the benchmark ran before it planned: every layer from the disk.
        placement = dataclasses.replace(
            placement, layer_tiers=("disk",) * len(placement.layer_tiers)
        )
    print(
        f"planned under RAM {hardware.ram_available_bytes / 2**20:.0f} MiB available of "
        f"{hardware.ram_total_bytes / 2**20:.0f} MiB (cgroup limit: "
        f"{hardware.ram_limit_bytes}); layers {placement.layer_tiers.count('cpu')} in RAM",
        file=sys.stderr,
        flush=True,
    )
    return placement


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    result = run_spec(spec)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
