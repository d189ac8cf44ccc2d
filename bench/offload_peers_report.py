"""The figures and the report of `ragdoll bench offload --peers` (bench/offload_peers.py):
per system, scenario and batch the rates, bytes read per step, roofline efficiency and
greedy tokens against the reference, and the issue's targets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIB = 2**20


def decode_steps(r: dict[str, Any]) -> int:
    return max(1, len(r["tokens"][0]) - 1)


def peer_figures(
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
                # The executor's: how many of its layers its placement kept in RAM.
                "layers_in_ram": result.get("layers_in_ram"),
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
    resident run on the same weights (for bf16 the float32 checkpoint's when it ran, else
    the bf16 resident run's; for q4_0 the run of the kernel's arithmetic by
    dequantize-then-matmul). A resident run is its own reference where none other ran."""
    base = f"executor {fmt}"
    if fmt == "bf16" and resident.get("executor f32"):
        base = "executor f32"
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
    """Weight bytes one resident decode step reads from RAM: the files for llama.cpp and
    Accelerate (its bf16 checkpoint); for the executor the f32 checkpoint, the Q4_0 file
    as repacked for the int4 kernel (10/9 of it: a bf16 scale and zero per 32 weights
    where Q4_0 has one fp16 scale), else the weights in the dtype its matmuls read
    (Q8_0 and the Q4_0 references are decoded per use to float32)."""
    total = sum(f.stat().st_size for f in system["files"])
    if system["runtime"] in ("llama.cpp", "accelerate") or system["format"] == "f32":
        return total
    spec = system["spec"]
    if system["format"] == "q4_0" and not spec.get("decode"):
        return total * 10 // 9
    folder = Path(spec["model"])
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return _config_params(config) * (2 if spec.get("dtype") == "bfloat16" else 4)


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
                + (
                    f" | {row['layers_in_ram']} layers in RAM"
                    if row.get("layers_in_ram") is not None
                    else ""
                )
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


def model_params(model_dir: Path) -> int:
    return _config_params(json.loads((model_dir / "config.json").read_text(encoding="utf-8")))


def _config_params(config: dict[str, Any]) -> int:
    h, m, n = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads") or 0
    kv_dim = h // heads * (kv or heads)
    layer = 2 * h * h + 2 * h * kv_dim + 3 * h * m
    return n * layer + 2 * h * config["vocab_size"]
