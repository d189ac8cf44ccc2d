"""Recommended cross-encoders (rerankers), and where and how fast each would run here.

A reranker is listed beside the language models (resources/models.json,
"rerankers") and downloaded the same way, only when a person asks. Its size comes
from the bundled config (resources/reranker_configs): a BERT or XLM-RoBERTa
sequence classifier, counted layer by layer, so a verdict needs no download.

Where it runs is the planner's call (`reranker_device`): on the GPU when the GPU's
free memory holds its float32 weights several times over (it must not take the
room a language model streams through), otherwise on the CPU with its linear
layers in int8 (engine/rag/answer/reranker.py), which needs its embeddings in float32
and one byte per other weight.

The expected cost is an estimate, like the language models' speed: every question
reads `RERANK_CANDIDATES` pairs of at most `FOCUS_MAX_TOKENS` word pieces, two
FLOPs per pair token per non-embedding weight, at a nominal rate per CPU core (int8)
or for a GPU. With MiniLM-L6 on the 2-core machine it says 1.4 s; measured, 0.93 s
(docs/benchmarks.md, "Reranker cost"): it promises less than the machine gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.rag.answer.reranker import FOCUS_MAX_TOKENS, RERANK_CANDIDATES
from engine.runtime.hardware.profile import HardwareProfile
from engine.runtime.planner.sizes import format_gib
from engine.wire import ModelAdvice, Verdict
from resources import resource_path

NOMINAL_CPU_INT8_FLOPS_PER_CORE = 25e9
NOMINAL_GPU_FLOPS = 10e12  # float32 on a mid-range card
GPU_HEADROOM = 4  # free GPU memory must hold the weights this many times over
RAM_MARGIN_BYTES = 256 * 2**20


@dataclass(frozen=True, kw_only=True)
class RerankerEntry:
    id: str
    name: str
    config: str  # a file name (without .json) in resources/reranker_configs
    download_bytes: int  # safetensors weights and tokenizer files, as the hub lists them
    licence: str
    description: str

    def config_path(self) -> Path:
        return resource_path("reranker_configs", f"{self.config}.json")


@dataclass(frozen=True, kw_only=True)
class EncoderSize:
    parameters: int
    embedding_parameters: int  # word, position and type embeddings: kept float32 on a CPU

    @property
    def float32_bytes(self) -> int:
        return 4 * self.parameters

    @property
    def int8_bytes(self) -> int:
        return 4 * self.embedding_parameters + (self.parameters - self.embedding_parameters)

    def flops_per_question(self) -> float:
        pair_tokens = RERANK_CANDIDATES * FOCUS_MAX_TOKENS
        return 2.0 * (self.parameters - self.embedding_parameters) * pair_tokens


@dataclass(frozen=True, kw_only=True)
class RerankerPlacement:
    device: str  # "cuda", "mps" or "cpu"
    verdict: Verdict
    words: str
    memory_bytes: int  # what it holds where it runs
    seconds_per_question: float | None  # None when it does not fit


def load_rerankers(*, file: Path | None = None) -> tuple[RerankerEntry, ...]:
    """The recommended rerankers; a broken catalogue is a packaging bug, so it raises."""
    path = file or resource_path("models.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    entries = tuple(
        RerankerEntry(
            id=str(r["id"]),
            name=str(r["name"]),
            config=str(r["config"]),
            download_bytes=int(r["download_bytes"]),
            licence=str(r["licence"]),
            description=str(r["description"]),
        )
        for r in data.get("rerankers", [])
    )
    if len({e.id for e in entries}) != len(entries):
        raise ValueError(f"{path}: a reranker id appears twice")
    return entries


def find_reranker(*, repo_id: str) -> RerankerEntry | None:
    return next((e for e in load_rerankers() if e.id == repo_id), None)


def encoder_size(config: dict[str, Any]) -> EncoderSize:
    """Parameters of a BERT or XLM-RoBERTa sequence classifier with this config (as
    transformers builds it: BERT has a pooler, XLM-RoBERTa a dense layer in its head)."""
    h = int(config["hidden_size"])
    inter = int(config["intermediate_size"])
    layers = int(config["num_hidden_layers"])
    labels = len(config.get("id2label") or {"0": ""})
    embedding = (
        int(config["vocab_size"])
        + int(config["max_position_embeddings"])
        + int(config.get("type_vocab_size", 2))
    ) * h
    norm = 2 * h
    layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 2 * norm
    # BERT: a pooler, then the classifier; XLM-RoBERTa: a dense layer, then out_proj.
    head = (h * h + h) + (h * labels + labels)
    return EncoderSize(
        parameters=embedding + norm + layers * layer + head, embedding_parameters=embedding
    )


def size_of_config(path: Path) -> EncoderSize:
    return encoder_size(json.loads(path.read_text(encoding="utf-8")))


def reranker_device(*, hardware: HardwareProfile, size: EncoderSize) -> RerankerPlacement:
    """The GPU when it has room to spare, else the CPU in int8; too large when the RAM
    available cannot hold even that."""
    flops = size.flops_per_question()
    gpu = hardware.gpu
    if gpu is not None and gpu.free_bytes >= GPU_HEADROOM * size.float32_bytes:
        return RerankerPlacement(
            device=gpu.backend,
            verdict="gpu",
            words="runs on GPU",
            memory_bytes=size.float32_bytes,
            seconds_per_question=flops / NOMINAL_GPU_FLOPS,
        )
    needed = size.int8_bytes + RAM_MARGIN_BYTES
    if hardware.ram_available_bytes < needed:
        missing = needed - hardware.ram_available_bytes
        return RerankerPlacement(
            device="cpu",
            verdict="too_large",
            words=f"too large: {format_gib(missing)} missing",
            memory_bytes=size.int8_bytes,
            seconds_per_question=None,
        )
    cores = hardware.cpu_cores_physical or hardware.cpu_cores_logical or 1
    where = "runs on CPU (int8)" if gpu is None else "runs on CPU (int8; GPU kept for the model)"
    return RerankerPlacement(
        device="cpu",
        verdict="ram",
        words=where,
        memory_bytes=size.int8_bytes,
        seconds_per_question=flops / (NOMINAL_CPU_INT8_FLOPS_PER_CORE * cores),
    )


def advise_reranker(
    *,
    entry: RerankerEntry,
    hardware: HardwareProfile,
    installed_path: Path | None,
    chosen: bool,
) -> ModelAdvice:
    size = size_of_config(entry.config_path())
    placed = reranker_device(hardware=hardware, size=size)
    note = (
        f"estimate: {RERANK_CANDIDATES} passages of up to {FOCUS_MAX_TOKENS} word pieces per "
        f"question, {size_text(placed.memory_bytes)} held; nominal compute rate"
    )
    return ModelAdvice(
        id=entry.id,
        name=entry.name,
        params=size.parameters,
        licence=entry.licence,
        description=entry.description,
        weight_bytes=size.float32_bytes,
        verdict=placed.words,
        verdict_kind=placed.verdict,
        offloaded_percent=0,
        missing_bytes=0,
        expected_tokens_per_s=None,
        speed_note=note,
        installed=installed_path is not None or chosen,
        installed_path=str(installed_path) if installed_path else None,
        chosen=chosen,
        download_bytes=entry.download_bytes,
        role="reranker",
        seconds_per_question=placed.seconds_per_question,
    )


def size_text(n_bytes: int) -> str:
    return format_gib(n_bytes) if n_bytes >= 2**30 else f"{n_bytes / 2**20:.0f} MiB"
