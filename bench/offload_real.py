"""`ragdoll bench offload --model FILE.gguf [--peers llama.cpp]`: a real GGUF model through
the product's loading code beside llama.cpp, side by side in one run (issue #39).

Every system runs in its own child process (bench/offload_real_child.py) and memory
cgroup (bench/offload_cgroup.py), the rounds alternated (`--repeats`), at each
thread count of `--thread-counts`, with the model's files dropped from the page cache
before each child so that a first read is a real read:

- resident: no limit; load time (the executor's after its one-time repack, which is
  reported apart), cgroup peak, prefill tok/s of a RAG prompt of `--prompt-tokens` tokens
  made from a real manual with the model's own chat template, decode tok/s over
  `--tokens` greedy tokens;
- limited (`--limited`): a limit of half the file plus each runtime's own allowance
  (its cgroup peak with a tiny model: bench/offload_peers.py), the executor as its
  planner places the model inside that limit, llama.cpp paging its memory map; bytes
  read from the disk per decoded token as well.

Agreement: `--agreement-prompts` prompts (passages of a real manual with a question), each
system's greedy tokens fed to a dequantize-then-matmul reference (the file decoded to
float32, transformers' modules): the share of positions where the reference's top-1
token is the system's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import CHECKOUT, offload_cgroup, offload_llama
from bench.offload_systems import MIB, load_average
from engine.runtime.executor.page_cache import evict_page_cache

# Added to each runtime's allowance under the limit: activations and KV of the prompt.
SLACK = 96 * MIB
_QUESTIONS = (
    "What does this passage explain? Answer in two sentences.",
    "Which command or option does this passage describe, and what does it do?",
    "Summarise this passage for a new user.",
    "What should a user be careful about, according to this passage?",
    "List the main points of this passage.",
)


def _corpus_text() -> str:
    from bench.real_docs import find_real_docs

    corpus = find_real_docs()
    if corpus is not None and (corpus / "apt-guide.txt").is_file():
        return (corpus / "apt-guide.txt").read_text(encoding="utf-8", errors="replace")
    return (CHECKOUT / "README.md").read_text(encoding="utf-8")


def _chat(tokenizer: Any, *, sources: str, question: str) -> list[int]:
    messages = [
        {"role": "system", "content": "Answer from the sources below, citing them as [n]."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"},
    ]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompts(*, tokenizer: Any, prompt_tokens: int, agreement: int) -> dict[str, Any]:
    """The speed prompt (about `prompt_tokens` tokens of sources and a question) and the
    agreement prompts (a passage each), from a real manual, in the model's template."""
    text = _corpus_text()
    words = text.split()
    piece_ids = tokenizer(" ".join(words[:6000]))["input_ids"]
    # Sources cut so that the whole prompt, template included, is prompt_tokens long.
    frame = len(_chat(tokenizer, sources="", question=_QUESTIONS[0]))
    sources = tokenizer.decode(piece_ids[: max(16, prompt_tokens - frame)])
    speed = _chat(tokenizer, sources=f"[1] {sources}", question=_QUESTIONS[0])
    agreement_prompts = []
    for i in range(agreement):
        passage = " ".join(words[600 + i * 90 : 600 + (i + 1) * 90])
        question = _QUESTIONS[i % len(_QUESTIONS)]
        agreement_prompts.append(_chat(tokenizer, sources=f"[1] {passage}", question=question))
    return {"speed": speed, "agreement": agreement_prompts}


@contextlib.contextmanager
def _home(home: Path) -> Iterator[None]:
    before = os.environ.get("RAGDOLL_HOME")
    os.environ["RAGDOLL_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAGDOLL_HOME", None)
        else:
            os.environ["RAGDOLL_HOME"] = before


def _child(
    *, spec: dict[str, Any], files: list[Path], limit: int | None, timeout_s: float, name: str
) -> dict[str, Any]:
    evict_page_cache(files=files)
    argv = [sys.executable, "-m", "bench.offload_real_child", json.dumps(spec)]
    slug = name.replace(" ", "-").replace(".", "")
    with offload_cgroup.memory_cgroup(name=f"ragdoll-real-{slug}", limit_bytes=limit) as cg:
        done = offload_cgroup.run_in_cgroup(
            cgroup=cg, argv=argv, timeout_s=timeout_s, peer=spec["system"] == "llama.cpp"
        )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        why = "killed by the memory limit (OOM)" if done.oom_killed else f"exit {done.returncode}"
        return {"error": f"{why}: {done.stderr.strip()[-1200:]}", "peak_bytes": done.peak_bytes}
    result = json.loads(lines[-1][len("RESULT ") :])
    result["peak_bytes"] = done.peak_bytes
    return result


def run_real(args: argparse.Namespace, *, say: Callable[[str], None]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from engine.runtime.models.resolve import resolve_model_path

    gguf = Path(args.model).expanduser().resolve()
    if not gguf.is_file():
        raise SystemExit(f"ragdoll bench offload --model: no file at {gguf}")
    peers = [p.strip() for p in (args.peers or "").split(",") if p.strip()]
    if any(p != "llama.cpp" for p in peers):
        raise SystemExit("ragdoll bench offload --model: the one peer is llama.cpp")
    systems = ["executor"]
    if getattr(args, "torch_forms", False):
        systems.append("executor-torch")  # the same executor on torch's kernel forms
    skipped: dict[str, str] = {}
    if "llama.cpp" in peers:
        reason = offload_llama.unavailable_reason()
        if reason:
            skipped["llama.cpp"] = reason
            say(f"llama.cpp: skipped: {reason}")
        else:
            systems.append("llama.cpp")
    if offload_cgroup.unavailable_reason():
        raise SystemExit(f"memory cgroups: {offload_cgroup.unavailable_reason()}")
    quick = bool(getattr(args, "quick", False))
    tokens = args.tokens or (16 if quick else 128)
    prompt_tokens = args.prompt_tokens or (256 if quick else 1500)
    counts = [int(t) for t in str(args.thread_counts or ("1" if quick else "1,2")).split(",")]
    agreement_n = (
        args.agreement_prompts if args.agreement_prompts is not None else (2 if quick else 10)
    )
    agreement_tokens = 16 if quick else 128
    home = Path(args.folder or tempfile.mkdtemp(prefix="ragdoll-bench-real-"))
    with _home(home):  # the companion folder (tokenizer, config) in the runs' own home
        folder = resolve_model_path(model=str(gguf))
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    made = prompts(tokenizer=tokenizer, prompt_tokens=prompt_tokens, agreement=agreement_n)
    base = {
        "model": str(gguf),
        "home": str(home),
        "speed_prompt": made["speed"],
        "tokens": tokens,
        "agreement": made["agreement"],
        "agreement_tokens": agreement_tokens,
    }
    say(
        f"model: {gguf.name}, {gguf.stat().st_size / MIB:.0f} MiB; prompt {len(made['speed'])} "
        f"tokens, {tokens} decode tokens; {agreement_n} agreement prompts of "
        f"{agreement_tokens} tokens; threads {counts}; load average {load_average()}"
    )
    timeout = float(getattr(args, "child_timeout", None) or 1800)
    cache_files = lambda: sorted((home / "cache").rglob("*.int4"))  # noqa: E731
    # The executor's one-time repack into its cache (what a first start pays), apart;
    # the quick form (a check that every part runs) lets its one run pay it.
    first: dict[str, Any] = {}
    if quick:
        say("executor first open: not measured apart in the quick form")
    else:
        first = _child(
            spec={**base, "system": "executor", "threads": counts[-1], "agreement": []},
            files=[gguf],
            limit=None,
            timeout_s=timeout,
            name="executor-first",
        )
        say(f"executor first open (native kernel built once): {first.get('load_s', 0):.1f} s")
    if "executor-torch" in systems:
        first_torch = _child(
            spec={**base, "system": "executor-torch", "threads": counts[-1], "agreement": []},
            files=[gguf],
            limit=None,
            timeout_s=timeout,
            name="executor-torch-first",
        )
        say(f"executor-torch first open (repacked once): {first_torch.get('load_s', 0):.1f} s")
    runs: list[dict[str, Any]] = []
    for round_ in range(max(1, args.repeats)):
        for threads in counts:
            order = systems if round_ % 2 == 0 else list(reversed(systems))
            for system in order:
                spec = {**base, "system": system, "threads": threads}
                if round_ > 0:
                    spec["agreement"] = []  # agreement tokens from the first round only
                result = _child(
                    spec=spec,
                    files=[gguf, *cache_files()],
                    limit=None,
                    timeout_s=timeout,
                    name=f"{system}-{threads}",
                )
                runs.append({"system": system, "threads": threads, "round": round_, **result})
                say(_line(runs[-1], prompt=len(made["speed"]), tokens=tokens))
    limited = _limited(
        args=args,
        systems=systems,
        base=base,
        gguf=gguf,
        counts=counts,
        timeout=timeout,
        files=cache_files,
        say=say,
    )
    agreement = _agreement(base=base, runs=runs, timeout=timeout, say=say)
    figures = _figures(runs=runs, prompt=len(made["speed"]), tokens=tokens)
    out = {
        "model": str(gguf),
        "file_bytes": gguf.stat().st_size,
        "prompt_tokens": len(made["speed"]),
        "tokens": tokens,
        "thread_counts": counts,
        "repeats": args.repeats,
        "first_open_s": first.get("load_s"),
        "skipped": skipped,
        "figures": figures,
        "limited": limited,
        "agreement": agreement,
        "load_average_after": load_average(),
    }
    _report(out, say=say)
    return out


def _line(r: dict[str, Any], *, prompt: int, tokens: int) -> str:
    head = f"{r['system']:>14} {r['threads']} thread(s), round {r['round'] + 1}"
    if r.get("error"):
        return f"{head}: FAILED: {r['error'][-600:]}"
    return (
        f"{head}: load {r['load_s']:.1f} s, peak {r['peak_bytes'] / MIB:.0f} MiB, prefill "
        f"{prompt / r['prefill_s']:.1f} tok/s, decode {tokens / r['decode_s']:.2f} tok/s"
    )


def _figures(*, runs: list[dict[str, Any]], prompt: int, tokens: int) -> dict[str, Any]:
    """Medians per (system, threads) over the rounds that finished."""
    out: dict[str, Any] = {}
    for r in runs:
        if r.get("error"):
            continue
        key = f"{r['system']}@{r['threads']}"
        cell = out.setdefault(key, {"load_s": [], "peak_bytes": [], "prefill": [], "decode": []})
        cell["load_s"].append(r["load_s"])
        cell["peak_bytes"].append(r["peak_bytes"])
        cell["prefill"].append(prompt / r["prefill_s"])
        cell["decode"].append(tokens / r["decode_s"])
    return {
        key: {name: statistics.median(values) for name, values in cell.items()}
        | {"rounds": len(cell["decode"])}
        for key, cell in out.items()
    }


def _limited(
    *,
    args: argparse.Namespace,
    systems: list[str],
    base: dict[str, Any],
    gguf: Path,
    counts: list[int],
    timeout: float,
    files: Callable[[], list[Path]],
    say: Callable[[str], None],
) -> dict[str, Any]:
    if not getattr(args, "limited", False):
        return {}
    from bench.offload_peers import allowances_for

    allowance = allowances_for(runtimes=systems, threads=counts[0], say=say)
    out: dict[str, Any] = {"allowance_bytes": allowance, "runs": []}
    for system in systems:
        if system not in allowance:
            continue
        limit = gguf.stat().st_size // 2 + allowance[system] + SLACK
        spec = {**base, "system": system, "threads": counts[0], "agreement": []}
        if system == "llama.cpp":
            spec["repack"] = False  # repacked weights are anonymous memory: never paged
        result = _child(
            spec=spec, files=[gguf, *files()], limit=limit, timeout_s=timeout, name=f"{system}-lim"
        )
        result.update({"system": system, "limit_bytes": limit})
        out["runs"].append(result)
        if result.get("error"):
            say(f"{system:>9} limited ({limit / MIB:.0f} MiB): FAILED: {result['error'][-600:]}")
            continue
        per = result["decode_read_bytes"] / max(1, base["tokens"])
        say(
            f"{system:>9} limited ({limit / MIB:.0f} MiB): decode "
            f"{base['tokens'] / result['decode_s']:.2f} tok/s, {per / MIB:.0f} MiB read per "
            f"token, peak {result['peak_bytes'] / MIB:.0f} MiB"
            + (
                f", {result['layers_in_ram']} of {result['layers']} layers in RAM"
                if "layers" in result
                else ""
            )
        )
    return out


def _agreement(
    *, base: dict[str, Any], runs: list[dict[str, Any]], timeout: float, say: Callable[[str], None]
) -> dict[str, Any]:
    sequences: dict[str, list[Any]] = {}
    for r in runs:
        if r.get("agreement_tokens") and r["system"] not in sequences:
            sequences[r["system"]] = [
                [p, t] for p, t in zip(base["agreement"], r["agreement_tokens"], strict=True)
            ]
    if not sequences:
        return {}
    result = _child(
        spec={**base, "system": "reference", "threads": 0, "sequences": sequences},
        files=[],
        limit=None,
        timeout_s=timeout,
        name="reference",
    )
    if result.get("error"):
        say(f"reference: FAILED: {result['error'][-600:]}")
        return {"error": result["error"]}
    out = {}
    for system, cell in result["agreement"].items():
        share = cell["same"] / max(1, cell["positions"])
        out[system] = {**cell, "share": share}
        say(
            f"agreement with the dequantize-then-matmul reference: {system} "
            f"{cell['same']}/{cell['positions']} = {share:.3f}"
        )
    return out


def _report(out: dict[str, Any], *, say: Callable[[str], None]) -> None:
    f = out["figures"]
    say("")
    say("| threads | system | load s | peak MiB | prefill tok/s | decode tok/s |")
    say("| --- | --- | --- | --- | --- | --- |")
    for threads in out["thread_counts"]:
        ours, peer = f.get(f"executor@{threads}"), f.get(f"llama.cpp@{threads}")
        torch_forms = f.get(f"executor-torch@{threads}")
        for name, cell in (
            ("executor", ours),
            ("executor-torch", torch_forms),
            ("llama.cpp", peer),
        ):
            if cell is None:
                continue
            say(
                f"| {threads} | {name} | {cell['load_s']:.1f} | {cell['peak_bytes'] / MIB:.0f} | "
                f"{cell['prefill']:.1f} | {cell['decode']:.2f} |"
            )
        if ours and peer:
            say(
                f"| {threads} | ratio | {ours['load_s'] / peer['load_s']:.2f}× | "
                f"{ours['peak_bytes'] / peer['peak_bytes']:.2f}× | "
                f"{ours['prefill'] / peer['prefill']:.2f}× | "
                f"{ours['decode'] / peer['decode']:.2f}× |"
            )
