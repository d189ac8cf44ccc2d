"""`ragdoll bench prefix`: time to first token of a conversation's next turn, with the
prefix KV cache (RAGCache) and without, side by side in one run.

The conversation is the one RAGDoll holds: the system prompt, five retrieved sources,
a first question and the model's answer to it, then a follow-up question; rendered with
the model's chat template. "cold" prefills the whole follow-up prompt; "warm" serves the
first turn with a fresh cache (not timed), so the cache holds the system prompt, the
sources, the first question and the answer, and then times the follow-up, which
prefills only its new tail. A second figure is a new conversation with other sources
after that one: only the system prompt is shared (RAGCache's knowledge tree would also
share sources cited again; a source cited after other ones is a different prefix, so a
prefix cache does not reuse it). Each repeat runs cold and warm back to back and starts the
warm side from an empty cache; the figures are medians. The model's weights are all on
the compute tier, so the difference is prefill work, not weight streaming (a streamed
model pays its per-forward streaming time on both sides).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer

from bench.prefix_models import (
    PROMPT_DEFAULT,
    QUICK,
    SHAPES,
    random_model,
    shape_named,
)
from engine.rag.answer.prompt import load_system_prompt
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate
from engine.runtime.executor.prefix_cache import PrefixCache, prefix_cache_for
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner.model_spec import load_model_spec
from engine.runtime.planner.placement import Placement, StoreSpec, Workload
from engine.runtime.planner.planner import plan

GIB = 2**30
SOURCES = 5
QUESTION_1 = "What does the warranty cover, and for how long?"
QUESTION_2 = "And what must I keep to claim it?"
_SENTENCES = (
    "The warranty covers parts and labour for two years from the date of purchase.",
    "Keep the receipt, because the service centre asks for it before any repair.",
    "The air filter should be cleaned every month and replaced once a year.",
    "Do not expose the battery to heat, fire or direct sunlight.",
    "The report says that sales grew by twelve percent in the second quarter.",
    "The invoice is due within thirty days of the date shown on page three.",
    "Please read the safety instructions in chapter two before you use the device.",
    "The pump, the valve and the cable are sold separately; see table 2 for prices.",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, help="a model folder (default: a random Llama)")
    parser.add_argument(
        "--shape",
        choices=tuple(SHAPES),
        help="the random Llama's layer shape (bench/prefix_models.py): default "
        "(8 layers, hidden 512) or tinyllama (TinyLlama-1.1B's layer shape, 2 "
        "layers); without it the product path uses default, the prompt path a hidden-1024 one",
    )
    parser.add_argument("--layers", type=int, help="with --shape: how many layers")
    parser.add_argument("--repeats", type=int, help="cold/warm pairs; medians")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument(
        "--path",
        choices=("prompt", "product", "both"),
        default="both",
        help="prompt: a hand-built follow-up prompt on the executor; product: turns 1-5 of "
        "a conversation through the engine's answering API (bench/"
        "prefix_conversation.py); both (default)",
    )
    parser.add_argument("--k", type=int, default=2, help="product path: sources per turn")
    parser.add_argument("--docs", type=Path, help="product path: a folder to ask about")


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    if args.threads:
        torch.set_num_threads(args.threads)
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    path = getattr(args, "path", "prompt")
    product = None
    if path == "product" or (path == "both" and _docs_at_hand(args)):
        product = _product_path(args=args, quick=quick, say=say)
        if path == "product":
            return {"product": product}
    elif path == "both":
        # Said, not skipped quietly: the product path asks about real documents.
        product = {"skipped": _NO_DOCS}
        print(f"product path not measured: {_NO_DOCS}", file=sys.stderr)
    model_dir = args.model or _random_model(args=args, quick=quick)
    figures = measure_ttft_prefix_reuse(model_dir=model_dir, quick=quick, repeats=args.repeats)
    other = figures["other_sources"]
    say(
        f"model {figures['model']} on {figures['device']}; load average "
        f"{figures['machine']['load_average']}; torch threads {figures['torch_threads']}\n"
        f"follow-up prompt {figures['prompt_tokens']} tokens (first turn "
        f"{figures['turn1_prompt_tokens']} + answer {figures['answer_tokens']}), "
        f"{figures['reused_tokens']} reused from the cache\n"
        f"time to first token: without the cache {figures['ttft_cold_s'] * 1000:.0f} ms, "
        f"with it {figures['ttft_warm_s'] * 1000:.0f} ms: "
        f"{figures['ttft_speedup_prefix_reuse']:.1f}x "
        f"(median of {figures['repeats']}; first tokens equal: {figures['first_tokens_match']})\n"
        f"a new conversation with other sources ({other['prompt_tokens']} tokens) reuses "
        f"{other['reused_tokens']} (the system prompt): {other['ttft_cold_s'] * 1000:.0f} ms "
        f"→ {other['ttft_warm_s'] * 1000:.0f} ms, {other['ttft_speedup']:.2f}x"
    )
    if product is not None:
        figures["product"] = product
    return figures


_NO_DOCS = (
    "the real documents are absent: run `python -m bench.real_docs` "
    "(or set RAGDOLL_REAL_DOCS), or give --docs FOLDER"
)


def _docs_at_hand(args: argparse.Namespace) -> bool:
    from bench.real_docs import find_real_docs

    return args.docs is not None or find_real_docs() is not None


def _product_path(
    *, args: argparse.Namespace, quick: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    from bench.prefix_conversation import measure_conversation_ttft

    model_dir = args.model or _random_model(args=args, quick=quick, product=True)
    figures = measure_conversation_ttft(
        model_dir=model_dir, docs=args.docs, repeats=max(1, args.repeats or 1), k=args.k
    )
    figures["model"] = _describe(model_dir)
    figures["load_average"] = _load()
    lines = [
        f"product path: a 5-turn conversation through Engine.ask_stream, {figures['model']} "
        f"on {figures['device']}, k={figures['k']} sources per turn, answers of "
        f"{figures['answer_tokens']} tokens; load average {figures['load_average']}"
    ]
    for t in figures["turns"]:
        if t["ttft_off_s"] is None or t["ttft_on_s"] is None:
            lines.append(f"  turn {t['turn']}: not answered (nothing relevant found)")
            continue
        lines.append(
            f"  turn {t['turn']}: prompt {t['prompt_tokens']} tokens, {t['reused_tokens']} "
            f"reused ({t['repeated_sources']} of {t['sources']} sources shown before); "
            f"TTFT {t['ttft_off_s'] * 1000:.0f} ms without reuse, "
            f"{t['ttft_on_s'] * 1000:.0f} ms with it: {t['speedup']:.1f}x"
        )
    say("\n".join(lines))
    return figures


def measure_ttft_prefix_reuse(
    *, model_dir: Path, quick: bool, repeats: int | None = None
) -> dict[str, Any]:
    """TTFT of a conversation's follow-up turn without and with prefix reuse, on the
    model in `model_dir` (a folder with a tokenizer and chat template)."""
    repeats = max(1, repeats or (1 if quick else 3))
    source_tokens = 40 if quick else 250  # per source: five of them make a RAG prompt
    answer_tokens = 8 if quick else 32
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    placement = _placement(model_dir=model_dir)
    model = StreamingModel(model_dir=model_dir, placement=placement, dtype=_dtype(model_dir))
    try:
        system = load_system_prompt()
        user1 = _user_turn(tokenizer=tokenizer, tokens_per_source=source_tokens)
        turn1 = _chat(tokenizer, [("system", system), ("user", user1)])
        # The first turn's answer, as a conversation would carry it into the next turn.
        answer_ids = _generate(model, turn1, tokens=answer_tokens, cache=None)[1]
        answer = tokenizer.decode(answer_ids, skip_special_tokens=True)
        turn2 = _chat(
            tokenizer,
            [("system", system), ("user", user1), ("assistant", answer), ("user", QUESTION_2)],
        )
        # Another conversation: the same system prompt, other sources.
        other = _chat(
            tokenizer,
            [
                ("system", system),
                ("user", _user_turn(tokenizer=tokenizer, tokens_per_source=source_tokens, shift=1)),
            ],
        )
        cold: list[float] = []
        warm: list[float] = []
        other_cold: list[float] = []
        other_warm: list[float] = []
        other_reused = 0
        firsts: list[tuple[int, int]] = []
        reused = 0
        cache: PrefixCache | None = None
        for _ in range(repeats):
            ttft_cold, first_cold = _generate(model, turn2, tokens=1, cache=None)
            cache = prefix_cache_for(placement=placement, device=model.device)
            _generate(model, turn1, tokens=answer_tokens, cache=cache)  # the first turn
            before = cache.stats().tokens_reused
            ttft_warm, first_warm = _generate(model, turn2, tokens=1, cache=cache)
            reused = cache.stats().tokens_reused - before
            cold.append(ttft_cold)
            warm.append(ttft_warm)
            other_cold.append(_generate(model, other, tokens=1, cache=None)[0])
            before = cache.stats().tokens_reused
            other_warm.append(_generate(model, other, tokens=1, cache=cache)[0])
            other_reused = cache.stats().tokens_reused - before
            firsts.append((first_cold[0], first_warm[0]))
        assert cache is not None
        stats = cache.stats()
        return {
            "ttft_cold_s": statistics.median(cold),
            "ttft_warm_s": statistics.median(warm),
            "ttft_speedup_prefix_reuse": statistics.median(cold) / statistics.median(warm),
            "ttft_cold_runs_s": cold,
            "ttft_warm_runs_s": warm,
            "prompt_tokens": len(turn2),
            "reused_tokens": reused,
            "turn1_prompt_tokens": len(turn1),
            "answer_tokens": len(answer_ids),
            "first_tokens_match": all(a == b for a, b in firsts),
            "other_sources": {
                "ttft_cold_s": statistics.median(other_cold),
                "ttft_warm_s": statistics.median(other_warm),
                "ttft_speedup": statistics.median(other_cold) / statistics.median(other_warm),
                "prompt_tokens": len(other),
                "reused_tokens": other_reused,
            },
            "cache": {
                "block_tokens": cache.block_tokens,
                "device_bytes": stats.device_bytes,
                "host_bytes": stats.host_bytes,
                "device_budget": stats.device_budget,
                "host_budget": stats.host_budget,
                "tokens_stored": stats.tokens_stored,
            },
            "model": _describe(model_dir, dtype=model.dtype),
            "device": str(model.device),
            "quick": quick,
            "repeats": repeats,
            "torch_threads": torch.get_num_threads(),
            "machine": {
                "platform": f"{platform.system()} {platform.machine()}",
                "cpus": os.cpu_count(),
                "load_average": _load(),
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            },
        }
    finally:
        model.close()


def _generate(
    model: StreamingModel, prompt: list[int], *, tokens: int, cache: PrefixCache | None
) -> tuple[float, list[int]]:
    """(seconds to the first token, the tokens); runs to the end so the cache is filled."""
    began = time.perf_counter()
    first = 0.0
    out: list[int] = []
    request = GenerationRequest(
        prompt_ids=tuple(prompt), max_new_tokens=tokens, min_new_tokens=tokens
    )
    for event in generate(model=model, requests=[request], prefix_cache=cache):
        if not out:
            first = time.perf_counter() - began
        out.append(event.token_id)
    return first, out


def _user_turn(*, tokenizer: Any, tokens_per_source: int, shift: int = 0) -> str:
    """Five numbered sources of about `tokens_per_source` tokens each, then the question,
    in the layout GenerativeAnswerer's build_prompt uses; `shift` picks other sentences."""
    blocks = []
    for i in range(SOURCES):
        text: list[str] = []
        k = i + shift
        while (
            len(tokenizer(" ".join(text), add_special_tokens=False)["input_ids"])
            < tokens_per_source
        ):
            text.append(_SENTENCES[k % len(_SENTENCES)])
            k += 3
        blocks.append(f"[{i + 1}] (manual-{i + 1}.pdf, p. {i + 2}) {' '.join(text)}")
    return "Sources:\n" + "\n\n".join(blocks) + f"\n\nQuestion: {QUESTION_1}"


def _chat(tokenizer: Any, turns: list[tuple[str, str]]) -> list[int]:
    messages = [{"role": role, "content": content} for role, content in turns]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    text = "\n\n".join(content for _, content in turns) + "\n\nAnswer:"
    return list(tokenizer(text)["input_ids"])


def _placement(*, model_dir: Path) -> Placement:
    """Every layer on the compute tier: the GPU when there is one, else RAM."""
    gpu = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else 0
    return plan(
        hardware=synthetic_profile(gpu_bytes=gpu, ram_bytes=16 * GIB, disk_bytes=100 * GIB),
        model=load_model_spec(
            source=model_dir, dtype=str(_dtype(model_dir)).removeprefix("torch.")
        ),
        store=StoreSpec.default(),
        workload=Workload(batch=1, context_tokens=4096),
    )


def _dtype(model_dir: Path) -> torch.dtype:
    # Half precision is slow on most CPUs; a GPU runs the checkpoint's own dtype.
    if torch.cuda.is_available():
        config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
        stored = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
        if isinstance(stored, str):
            stored = getattr(torch, stored, None)
        if isinstance(stored, torch.dtype):
            return stored
    return torch.float32


def _random_model(*, args: argparse.Namespace, quick: bool, product: bool = False) -> Path:
    """The random-weight Llama to measure, written once per shape under the temp folder.
    The product path's default is smaller than the prompt path's (five turns, twice,
    through the whole pipeline), with a context long enough for a five-turn conversation."""
    name = getattr(args, "shape", None)
    layers = getattr(args, "layers", None)
    if name is not None:
        shape = shape_named(name, layers=layers)
    elif layers is not None:
        raise SystemExit("--layers goes with --shape")
    elif quick:
        shape = QUICK
    else:
        shape = SHAPES["default"] if product else PROMPT_DEFAULT
    return random_model(shape=shape, context=16384 if product else 4096)


def _describe(model_dir: Path, *, dtype: torch.dtype | None = None) -> str:
    """The model's architecture and sizes, as a report of the run should give them."""
    c = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    heads = c.num_attention_heads
    kv = getattr(c, "num_key_value_heads", None) or heads
    kind = str(dtype or _dtype(model_dir)).removeprefix("torch.")
    return (
        f"{c.model_type}, {c.num_hidden_layers} layers, hidden {c.hidden_size}, "
        f"MLP {c.intermediate_size}, {heads} heads / {kv} KV heads, vocab {c.vocab_size}, {kind}"
    )


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
