"""`ragdoll bench offload --peers llama.cpp,accelerate`: the executor against llama.cpp and
Accelerate under one memory limit, side by side in one run (issue #20).

Systems, all on one random-weight model (engine/runtime/models/synthetic.py; a real architecture,
the speed does not depend on the weight values), the same prompts, output length and
thread count:

- `executor f32` (the safetensors checkpoint), `executor bf16` (the checkpoint saved in
  bf16, computed as the product does on this CPU) and `executor <fmt>` for each GGUF format
  of `--weights` (the executor reads the same GGUF files llama.cpp runs);
- `llama.cpp <fmt>`: llama-cpp-python on the GGUF file of each format (memory-mapped);
- `accelerate bf16`: transformers + Accelerate `device_map` on the bf16 checkpoint (loaded
  in bf16 tensor by tensor, never through a float32 copy), the layers on "disk".

Each system runs in its own child process (bench/offload_child.py) placed in a fresh
memory cgroup (bench/offload_cgroup.py) whose limit also bounds its page cache; the
model files are dropped from the page cache before each run. Scenarios:

- (a) `resident`: no limit; every layer in RAM (the executor's layers on the compute tier,
  llama.cpp with its default weight repacking, Accelerate without offloading);
- (b) `limited`: a limit of half the Q4_0 (int4) file plus the runtime's own allowance,
  the runtime's cgroup peak with a tiny model of the same architecture (measured in the
  same run and reported): the executor runs the placement the product's planner makes
  inside that cgroup (its RAM budget is what the limit leaves, engine/runtime/hardware/cgroup.py:
  as many layers in RAM as fit, the rest streamed from the disk), llama.cpp pages its
  mmap (repacking off, since repacked weights are anonymous memory that cannot be paged),
  Accelerate offloads every layer to disk.

Figures per system, scenario and batch: decode and prefill tok/s, bytes read from the disk
per decode step (/proc/self/io read_bytes of the child), the cgroup's peak, roofline
efficiency, and whether the greedy tokens equal the reference: the executor's resident run
on the same weights (it dequantizes every matrix to float32 and multiplies: the plain
dequantize-then-matmul reference). Roofline: (a) the weight bytes a decode step touches /
the RAM read bandwidth; (b) max(the system's resident step time, its disk bytes per step /
the cold disk read bandwidth).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench import offload_cgroup, offload_llama
from bench.offload_peers_report import decode_steps, model_params, peer_figures, report_peers
from bench.offload_systems import (
    MIB,
    Size,
    cold_read_bandwidth,
    first_bytes,
    ram_read_bandwidth,
    write_model,
)
from bench.offload_weights import GGUF_FORMATS as FORMATS
from bench.offload_weights import format_folder, parse_formats
from engine.runtime.executor.page_cache import evict_page_cache

PEERS = ("llama.cpp", "accelerate")
TINY = Size(layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2, architecture="qwen2")
# Added to each runtime's measured allowance: activations and KV cache at the largest batch,
# and the variation of an interpreter's peak from run to run.
SLACK = 64 * MIB


def parse_peers(text: str | None) -> list[str]:
    names = [n.strip().lower() for n in (text or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer {unknown[0]!r}; known: {', '.join(PEERS)}")
    return names


def run_peers(
    *,
    args: argparse.Namespace,
    size: Size,
    folder: Path,
    prompt_tokens: int,
    tokens: int,
    batches: list[int],
    say: Callable[[str], None],
) -> dict[str, Any]:
    peers = parse_peers(args.peers)
    asked = [n.strip().lower() for n in (args.weights or "f32,q8_0,q4_0").split(",")]
    formats = (["f32"] if any(n in ("f32", "float32") for n in asked) else []) + parse_formats(
        args.weights or "f32,q8_0,q4_0"
    )
    threads = args.threads or torch.get_num_threads()
    skipped: dict[str, str] = {}
    cgroup_reason = offload_cgroup.unavailable_reason()
    if cgroup_reason:
        say(f"memory limit: skipped scenario (b): {cgroup_reason}")
        skipped["limited"] = cgroup_reason

    model_dir = write_model(folder=folder, size=size, dtype="float32")
    files = _gguf_files(
        model_dir=model_dir,
        formats=formats,
        want_llama="llama.cpp" in peers,
        source=getattr(args, "llama_cpp_source", None),
        threads=threads,
        say=say,
        skipped=skipped,
    )
    cache = folder.parent / f"{folder.name}-gguf-cache"
    systems = _systems(
        model_dir=model_dir,
        formats=formats,
        files=files,
        peers=peers,
        cache=cache,
        skipped=skipped,
        say=say,
    )
    q4 = files.get("q4_0")
    int4_bytes = q4.stat().st_size if q4 else None
    # Best of two cold reads of up to 1 GiB of the checkpoint.
    sources = first_bytes(model_dir=model_dir, limit=1024 * MIB)
    disk_bw = max(cold_read_bandwidth(sources=sources) for _ in range(2))
    ram_bw = ram_read_bandwidth()
    say(
        f"model: random {size.architecture}, {size.layers} layers, hidden {size.hidden}, MLP "
        f"{size.intermediate}, heads {size.heads}/{size.kv_heads}, "
        f"{model_params(model_dir) / 1e6:.0f} M parameters; files: "
        + ", ".join(f"{k} {v.stat().st_size / MIB:.0f} MiB" for k, v in files.items())
        + f"; prompt {prompt_tokens}, {tokens} decode tokens, batches {batches}; {threads} "
        f"threads; disk cold read {disk_bw / MIB:.0f} MiB/s, RAM read {ram_bw / MIB:.0f} MiB/s"
    )

    allowance = (
        _allowances(systems=systems, folder=folder, threads=threads, say=say)
        if not cgroup_reason
        else {}
    )
    limits: dict[str, int | None] = {}
    for name, system in systems.items():
        if int4_bytes is None or system["runtime"] not in allowance:
            continue
        if system.get("resident_only"):
            continue
        limits[name] = int4_bytes // 2 + allowance[system["runtime"]] + SLACK
    if int4_bytes is None and not cgroup_reason:
        skipped["limited"] = "scenario (b) needs q4_0 in --weights (its limit is half of it)"
        say(f"memory limit: skipped scenario (b): {skipped['limited']}")

    results: dict[str, dict[str, Any]] = {"resident": {}, "limited": {}}
    offload_root = Path(tempfile.mkdtemp(prefix="ragdoll-accelerate-offload-"))
    try:
        # The limited runs first: the main targets are there, and a run cut short
        # by a timeout keeps them.
        for scenario in ("limited", "resident"):
            if scenario in skipped:
                continue
            for name, system in systems.items():
                limit = limits.get(name) if scenario == "limited" else None
                if scenario == "limited" and limit is None:
                    continue
                spec = {
                    **system["spec"],
                    "tier": "disk" if scenario == "limited" else "resident",
                    "repack": scenario == "resident",
                    "batches": batches,
                    "prompt_tokens": prompt_tokens,
                    "tokens": tokens,
                    "threads": threads,
                    "depth": 1,
                    "offload_folder": str(offload_root / f"{name}-{scenario}"),
                }
                result = _run_child(
                    name=name,
                    spec=spec,
                    files=system["files"],
                    limit=limit,
                    timeout_s=float(getattr(args, "child_timeout", None) or 1800),
                )
                results[scenario][name] = result
                say(_line(name=name, scenario=scenario, result=result, limit=limit))
                shutil.rmtree(offload_root / f"{name}-{scenario}", ignore_errors=True)
    finally:
        shutil.rmtree(offload_root, ignore_errors=True)

    figures = peer_figures(
        results=results,
        systems=systems,
        batches=batches,
        tokens=tokens,
        disk_bw=disk_bw,
        ram_bw=ram_bw,
    )
    figures.update(
        {
            "peers": peers,
            "formats": formats,
            "threads": threads,
            "skipped": skipped,
            "allowance_bytes": allowance,
            "slack_bytes": SLACK,
            "limit_bytes": limits,
            "int4_file_bytes": int4_bytes,
            "disk_read_bytes_per_s": disk_bw,
            "ram_read_bytes_per_s": ram_bw,
            "files": {k: {"path": str(v), "bytes": v.stat().st_size} for k, v in files.items()},
        }
    )
    report_peers(figures, say=say)
    return figures


def _gguf_files(
    *,
    model_dir: Path,
    formats: list[str],
    want_llama: bool,
    source: Path | None,
    threads: int,
    say: Callable[[str], None],
    skipped: dict[str, str],
) -> dict[str, Path]:
    """{format: GGUF file}: llama.cpp's converter and quantizer when llama.cpp is here,
    the project's writer (engine/runtime/models/gguf_writer.py) otherwise."""
    from engine.runtime.models.gguf_writer import write_gguf

    files: dict[str, Path] = {}
    reason = offload_llama.unavailable_reason() if want_llama else None
    if want_llama and reason:
        say(f"llama.cpp: skipped: {reason}")
        skipped["llama.cpp"] = reason
    llama = want_llama and reason is None
    quantized = [f for f in formats if f in FORMATS]
    if not llama:
        for fmt in quantized:
            out = model_dir.parent / f"{model_dir.name}.{fmt}.gguf"
            if not out.is_file():
                write_gguf(model_dir=model_dir, out=out, qtype=FORMATS[fmt])
            files[fmt] = out
        return files
    src = offload_llama.converter_source(source)
    f32 = model_dir.parent / f"{model_dir.name}.llama-f32.gguf"
    if src is not None:
        offload_llama.convert_f32(model_dir=model_dir, out=f32, source=src)
        say(f"GGUF: converted by llama.cpp's convert_hf_to_gguf.py from {src}")
    else:
        if not f32.is_file():
            write_gguf(model_dir=model_dir, out=f32, qtype=FORMATS.get("f32") or _f32())
        say(
            "GGUF: llama.cpp's converter not found (--llama-cpp-source or "
            f"${offload_llama.SOURCE_ENV}: the llama-cpp-python sdist's vendor/llama.cpp); "
            "the F32 file was written by engine/runtime/models/gguf_writer.py"
        )
    if "f32" in formats:
        files["f32"] = f32
    for fmt in quantized:
        if fmt in offload_llama.FTYPES and fmt != "f32":
            out = model_dir.parent / f"{model_dir.name}.llama-{fmt}.gguf"
            files[fmt] = offload_llama.quantize(source=f32, out=out, fmt=fmt, threads=threads)
    return files


def _f32() -> Any:
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType.F32


def _systems(
    *,
    model_dir: Path,
    formats: list[str],
    files: dict[str, Path],
    peers: list[str],
    cache: Path,
    skipped: dict[str, str],
    say: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """name → {"runtime", "format", "spec", "files"}: what each child runs."""
    from engine.runtime.models.gguf_file import companion_folder

    systems: dict[str, dict[str, Any]] = {}
    checkpoint = sorted(model_dir.glob("*.safetensors"))
    bf16_dir: Path | None = None
    if "bf16" in formats or "accelerate" in peers:
        # Saved in bf16 once: what a user of a bf16 model has, so that no system needs
        # the float32 copy in memory to convert from.
        bf16_dir, bf16_files = format_folder(model_dir=model_dir, name="bf16", cache=cache)
    for fmt in formats:
        dtype = "float32"
        if fmt == "f32":
            folder, used = model_dir, checkpoint
        elif fmt == "bf16" and bf16_dir is not None:
            from engine.runtime.models.loading import cpu_bf16_is_fast

            # The product's choice on a CPU (ModelFiles.compute_dtype): bf16 where its
            # matmul is measured as fast as float32 here, else held bf16, widened per use.
            folder, used = bf16_dir, bf16_files
            dtype = "bfloat16" if cpu_bf16_is_fast() else "float32"
        elif fmt in files:
            folder, used = companion_folder(gguf_path=files[fmt], cache=cache), [files[fmt]]
        else:
            skipped[f"executor {fmt}"] = "no model file for this format"
            say(f"executor {fmt}: skipped: no model file for this format")
            continue
        systems[f"executor {fmt}"] = {
            "runtime": "executor",
            "format": fmt,
            "spec": {
                "system": "executor",
                "model": str(folder),
                "dtype": dtype,
                "repack_cache": str(cache / "int4"),
            },
            "files": used,
        }
        if fmt == "q4_0":
            # Resident only: the references its greedy tokens are compared with. The
            # int4 kernel's own arithmetic by dequantize-then-matmul (bf16 scales and
            # activations), and Q4_0 decoded to float32 with its float16 scales.
            for suffix, decode in (("reference", "kernel_reference"), ("layer", "layer")):
                systems[f"executor {fmt} {suffix}"] = {
                    "runtime": "executor",
                    "format": fmt,
                    "resident_only": True,
                    "spec": {"system": "executor", "model": str(folder), "decode": decode},
                    "files": used,
                }
    if "llama.cpp" in peers and "llama.cpp" not in skipped:
        for fmt in formats:
            if fmt in files and fmt in offload_llama.FTYPES:
                systems[f"llama.cpp {fmt}"] = {
                    "runtime": "llama.cpp",
                    "format": fmt,
                    "spec": {"system": "llama.cpp", "model": str(files[fmt])},
                    "files": [files[fmt]],
                }
    if "accelerate" in peers and bf16_dir is not None:
        systems["accelerate bf16"] = {
            "runtime": "accelerate",
            "format": "bf16",
            "spec": {"system": "accelerate", "model": str(bf16_dir), "dtype": "bfloat16"},
            "files": bf16_files,
        }
    return systems


def allowances_for(
    *, runtimes: list[str], threads: int, say: Callable[[str], None]
) -> dict[str, int]:
    """`_allowances` for runtimes named alone ("executor", "llama.cpp"): what
    `ragdoll bench offload --model` adds to half a real file for each runtime's limit."""
    folder = Path(tempfile.gettempdir()) / "ragdoll-bench-allowance"
    systems = {r: {"runtime": r, "spec": {"system": r}} for r in runtimes}
    return _allowances(systems=systems, folder=folder, threads=threads, say=say)


def _allowances(
    *,
    systems: dict[str, dict[str, Any]],
    folder: Path,
    threads: int,
    say: Callable[[str], None],
) -> dict[str, int]:
    """Each runtime's own memory: its cgroup peak running a tiny model of the same
    architecture (interpreter, libraries, buffers), resident, batch 1."""
    tiny_dir = write_model(folder=folder.parent / f"{folder.name}-tiny", size=TINY, dtype="float32")
    runtimes = {s["runtime"]: s for s in systems.values()}
    out: dict[str, int] = {}
    for runtime, system in runtimes.items():
        spec = dict(system["spec"])
        if runtime == "llama.cpp":
            tiny_gguf = tiny_dir.parent / f"{tiny_dir.name}.f32.gguf"
            if not tiny_gguf.is_file():
                from engine.runtime.models.gguf_writer import write_gguf

                write_gguf(model_dir=tiny_dir, out=tiny_gguf, qtype=_f32())
            spec["model"] = str(tiny_gguf)
        else:
            spec["model"] = str(tiny_dir)
        spec.update(
            {
                "tier": "resident",
                "batches": [1],
                "prompt_tokens": 8,
                "tokens": 2,
                "threads": threads,
            }
        )
        result = _run_child(name=runtime, spec=spec, files=[], limit=None, timeout_s=600)
        if result.get("error"):
            say(f"allowance for {runtime}: could not be measured: {result['error'][-300:]}")
            continue
        out[runtime] = int(result["cgroup_peak_bytes"])
        say(f"allowance for {runtime}: {out[runtime] / MIB:.0f} MiB (cgroup peak, tiny model)")
    return out


def _run_child(
    *, name: str, spec: dict[str, Any], files: list[Path], limit: int | None, timeout_s: float
) -> dict[str, Any]:
    if spec.get("repack_cache"):
        # The repacked weights are model files too: read from the disk, not the cache.
        files = [*files, *sorted(Path(spec["repack_cache"]).glob("*.int4"))]
    evict_page_cache(files=files)
    argv = [sys.executable, "-m", "bench.offload_child", json.dumps(spec)]
    slug = name.replace(" ", "-").replace(".", "")
    with offload_cgroup.memory_cgroup(name=f"ragdoll-bench-{slug}", limit_bytes=limit) as cg:
        done = offload_cgroup.run_in_cgroup(
            cgroup=cg, argv=argv, timeout_s=timeout_s, peer=spec["system"] != "executor"
        )
    evict_page_cache(files=files)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        why = "killed by the memory limit (OOM)" if done.oom_killed else f"exit {done.returncode}"
        return {
            "error": f"{why}: {done.stderr.strip()[-1500:]}",
            "oom_killed": done.oom_killed,
            "cgroup_peak_bytes": done.peak_bytes,
            "seconds": done.seconds,
        }
    result = json.loads(lines[-1][len("RESULT ") :])
    result.update({"cgroup_peak_bytes": done.peak_bytes, "oom_killed": False})
    return result


def _line(*, name: str, scenario: str, result: dict[str, Any], limit: int | None) -> str:
    where = f"{scenario}" + (f" (limit {limit / MIB:.0f} MiB)" if limit else "")
    if result.get("error"):
        return f"{name:>16} {where}: FAILED: {result['error'][:300]}"
    cells = []
    for b, r in result["batches"].items():
        per = r["decode_read_bytes"] / max(1, decode_steps(r))
        cells.append(
            f"B={b}: decode {r['decode_tok_s']:.2f} tok/s, prefill {r['prefill_tok_s']:.1f} "
            f"tok/s, {per / MIB:.0f} MiB read/step"
        )
    return (
        f"{name:>16} {where}: "
        + "; ".join(cells)
        + f"; peak {result['cgroup_peak_bytes'] / MIB:.0f} MiB, load {result['load_s']:.1f} s"
        + (f", {result['layers_in_ram']} layers in RAM" if "layers_in_ram" in result else "")
    )
