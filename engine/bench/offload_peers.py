"""`ragdoll bench offload --peers llama.cpp,accelerate`: the executor against llama.cpp and
Accelerate under one memory limit, side by side in one run (issue #20).

Systems, all on one random-weight model (engine/models/synthetic.py; a real architecture,
the speed does not depend on the weight values), the same prompts, output length and
thread count:

- `executor f32` (the safetensors checkpoint) and `executor <fmt>` for each GGUF format of
  `--weights` (the executor reads the same GGUF files llama.cpp runs);
- `llama.cpp <fmt>`: llama-cpp-python on the GGUF file of each format (memory-mapped);
- `accelerate bf16`: transformers + Accelerate `device_map`, the layers on "disk".

Each system runs in its own child process (engine/bench/offload_child.py) placed in a fresh
memory cgroup (engine/bench/offload_cgroup.py) whose limit also bounds its page cache; the
model files are dropped from the page cache before each run. Scenarios:

- (a) `resident`: no limit; every layer in RAM (the executor's layers on the compute tier,
  llama.cpp with its default weight repacking, Accelerate without offloading);
- (b) `limited`: a limit of half the Q4_0 (int4) file plus the runtime's own allowance,
  the runtime's cgroup peak with a tiny model of the same architecture (measured in the
  same run and reported): the executor streams every layer from disk, llama.cpp pages its
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

from engine.bench import offload_cgroup, offload_llama
from engine.bench.offload_systems import (
    MIB,
    Size,
    cold_read_bandwidth,
    first_bytes,
    ram_read_bandwidth,
    write_model,
)
from engine.bench.offload_weights import GGUF_FORMATS as FORMATS
from engine.bench.offload_weights import parse_formats
from engine.executor.page_cache import evict_page_cache

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
        f"{_params(model_dir) / 1e6:.0f} M parameters; files: "
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
                    # All layers streamed under the limit. Keeping some in RAM
                    # (`room_bytes`, offload_child._layer_tiers) was killed by the limit
                    # with 6 and with 4 of 28 layers held (runs 6, 7): not used until the
                    # streamed path's own memory is understood.
                    "room_bytes": 0,
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

    figures = _figures(
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
    the project's writer (engine/models/gguf_writer.py) otherwise."""
    from engine.models.gguf_writer import write_gguf

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
            "the F32 file was written by engine/models/gguf_writer.py"
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
    from engine.models.gguf_file import companion_folder

    systems: dict[str, dict[str, Any]] = {}
    checkpoint = sorted(model_dir.glob("*.safetensors"))
    for fmt in formats:
        if fmt == "f32":
            folder, used = model_dir, checkpoint
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
    if "accelerate" in peers:
        systems["accelerate bf16"] = {
            "runtime": "accelerate",
            "format": "bf16",
            "spec": {"system": "accelerate", "model": str(model_dir), "dtype": "bfloat16"},
            "files": checkpoint,
        }
    return systems


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
                from engine.models.gguf_writer import write_gguf

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
    argv = [sys.executable, "-m", "engine.bench.offload_child", json.dumps(spec)]
    slug = name.replace(" ", "-").replace(".", "")
    with offload_cgroup.memory_cgroup(name=f"ragdoll-bench-{slug}", limit_bytes=limit) as cg:
        done = offload_cgroup.run_in_cgroup(cgroup=cg, argv=argv, timeout_s=timeout_s)
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
        per = r["decode_read_bytes"] / max(1, _steps(r))
        cells.append(
            f"B={b}: decode {r['decode_tok_s']:.2f} tok/s, prefill {r['prefill_tok_s']:.1f} "
            f"tok/s, {per / MIB:.0f} MiB read/step"
        )
    return (
        f"{name:>16} {where}: "
        + "; ".join(cells)
        + f"; peak {result['cgroup_peak_bytes'] / MIB:.0f} MiB, load {result['load_s']:.1f} s"
    )


def _steps(r: dict[str, Any]) -> int:
    return max(1, len(r["tokens"][0]) - 1)


def _figures(
    *,
    results: dict[str, dict[str, Any]],
    systems: dict[str, dict[str, Any]],
    batches: list[int],
    tokens: int,
    disk_bw: float,
    ram_bw: float,
) -> dict[str, Any]:
    resident = results["resident"]
    table: dict[str, Any] = {}
    for scenario, by_system in results.items():
        for name, result in by_system.items():
            row: dict[str, Any] = {
                "cgroup_peak_bytes": result.get("cgroup_peak_bytes"),
                "oom_killed": result.get("oom_killed", False),
            }
            if result.get("error"):
                row["error"] = result["error"]
                table.setdefault(name, {})[scenario] = row
                continue
            fmt = systems[name]["format"]
            reference = _reference(resident=resident, fmt=fmt)
            touched = _touched_bytes(systems[name])
            for b in batches:
                r = result["batches"][str(b)]
                step_s = r["decode_s"] / tokens
                read = r["decode_read_bytes"] / tokens
                if scenario == "resident":
                    bound = touched / ram_bw if ram_bw else 0.0
                else:
                    base = resident.get(name, {}).get("batches", {}).get(str(b))
                    t_comp = base["decode_s"] / tokens if base else 0.0
                    bound = max(t_comp, read / disk_bw if disk_bw else 0.0)
                ref = reference.get(str(b)) if reference else None
                row[str(b)] = {
                    "decode_tok_s": r["decode_tok_s"],
                    "prefill_tok_s": r["prefill_tok_s"],
                    "disk_bytes_per_step": read,
                    "roofline_efficiency": bound / step_s if step_s > 0 else 0.0,
                    "tokens_match_reference": None if ref is None else r["tokens"] == ref,
                    "token_agreement": None if ref is None else _agreement(r["tokens"], ref),
                }
            table.setdefault(name, {})[scenario] = row
    return {
        "systems": table,
        "batches": batches,
        "decode_tokens": tokens,
        "targets": _targets(table=table, batches=batches),
    }


def _reference(*, resident: dict[str, Any], fmt: str) -> dict[str, Any] | None:
    """The greedy tokens of the dequantize-then-matmul reference for `fmt`: the executor's
    resident run on the same weights (float32 for bf16, whose reference is the checkpoint;
    for q4_0 the run of the kernel's arithmetic by dequantize-then-matmul)."""
    base = f"executor {'f32' if fmt == 'bf16' else fmt}"
    # The int4 kernel's reference when the benchmark ran one (q4_0).
    source = resident.get(f"{base} reference") or resident.get(base)
    if not source or source.get("error"):
        return None
    return {b: r["tokens"] for b, r in source["batches"].items()}


def _agreement(tokens: list[list[int]], ref: list[list[int]]) -> float:
    """Fraction of greedy positions equal to the reference up to the first difference per
    row (after a difference the rows continue from different prefixes)."""
    same = total = 0
    for row, ref_row in zip(tokens, ref, strict=True):
        total += len(ref_row)
        for a, b in zip(row, ref_row, strict=False):
            if a != b:
                break
            same += 1
    return same / total if total else 0.0


def _touched_bytes(system: dict[str, Any]) -> int:
    """Weight bytes one resident decode step reads from RAM: the files for llama.cpp; for
    the executor the float32 it holds (it keeps resident layers decoded); bf16 for
    Accelerate."""
    total = sum(f.stat().st_size for f in system["files"])
    if system["runtime"] == "llama.cpp":
        return total
    if system["runtime"] == "accelerate":
        return total // 2  # the float32 checkpoint held in bfloat16
    if system["format"] == "f32":
        return total
    folder = Path(system["spec"]["model"])
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return _config_params(config) * 4


def _targets(*, table: dict[str, Any], batches: list[int]) -> dict[str, Any]:
    b1, bmax = str(batches[0]), str(batches[-1])

    def rate(name: str, scenario: str, b: str) -> float | None:
        row = table.get(name, {}).get(scenario, {})
        return row.get(b, {}).get("decode_tok_s") if "error" not in row else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a and b else None

    ex4_lim, ex4_res = rate("executor q4_0", "limited", b1), rate("executor q4_0", "resident", b1)
    out: dict[str, Any] = {
        "limited_int4_vs_llama_q4_0": {
            "target": 2.0,
            "value": ratio(ex4_lim, rate("llama.cpp q4_0", "limited", b1)),
        },
        "limited_int4_vs_accelerate_bf16": {
            "target": 4.0,
            "value": ratio(ex4_lim, rate("accelerate bf16", "limited", b1)),
        },
        "resident_int4_vs_llama_q4_0": {
            "target": 0.8,
            "value": ratio(ex4_res, rate("llama.cpp q4_0", "resident", b1)),
        },
    }
    # The batch target is batch 8 against batch 1 (the quick form's batch 4 has none).
    for name in table if int(bmax) >= 8 else ():
        if name.startswith("executor"):
            for scenario in ("resident", "limited"):
                out[f"batch{bmax}_over_batch{b1} {name} {scenario}"] = {
                    "target": 5.0,
                    "value": ratio(rate(name, scenario, bmax), rate(name, scenario, b1)),
                }
    for v in out.values():
        v["met"] = None if v["value"] is None else v["value"] >= v["target"]
    return out


def report_peers(f: dict[str, Any], *, say: Callable[[str], None]) -> None:
    b1, bmax = str(f["batches"][0]), str(f["batches"][-1])
    say(
        f"{'system':>16} | scenario | decode tok/s B={b1} / B={bmax} | prefill tok/s B={b1} / "
        f"B={bmax} | disk MiB/step B={b1} | roofline B={b1} | tokens = reference | peak MiB"
    )
    for name, by_scenario in f["systems"].items():
        for scenario, row in by_scenario.items():
            peak = (row.get("cgroup_peak_bytes") or 0) / MIB
            if "error" in row:
                why = "OOM-killed" if row.get("oom_killed") else "failed"
                say(f"{name:>16} | {scenario:8} | {why} (peak {peak:.0f} MiB)")
                continue
            one, big = row[b1], row[bmax]
            say(
                f"{name:>16} | {scenario:8} | {one['decode_tok_s']:.2f} / "
                f"{big['decode_tok_s']:.2f} | {one['prefill_tok_s']:.1f} / "
                f"{big['prefill_tok_s']:.1f} | {one['disk_bytes_per_step'] / MIB:.1f} | "
                f"{one['roofline_efficiency']:.2f} | {_match(one)} / {_match(big)} | {peak:.0f}"
            )
    for key, t in f["targets"].items():
        value = "not measured" if t["value"] is None else f"{t['value']:.2f}"
        verdict = "" if t["met"] is None else (" met" if t["met"] else " MISSED")
        say(f"target {key}: {value} (target >= {t['target']}){verdict}")
    for what, why in f["skipped"].items():
        say(f"skipped {what}: {why}")


def _match(cell: dict[str, Any]) -> str:
    if cell["tokens_match_reference"] is None:
        return "-"
    return "yes" if cell["tokens_match_reference"] else f"no ({cell['token_agreement']:.2f})"


def _params(model_dir: Path) -> int:
    return _config_params(json.loads((model_dir / "config.json").read_text(encoding="utf-8")))


def _config_params(config: dict[str, Any]) -> int:
    h, m, n = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads") or 0
    kv_dim = h // heads * (kv or heads)
    layer = 2 * h * h + 2 * h * kv_dim + 3 * h * m
    return n * layer + 2 * h * config["vocab_size"]
