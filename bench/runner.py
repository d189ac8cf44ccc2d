"""`ragdoll bench KIND` and `python -m bench.KIND`: each kind's parser (the common
flags and its own) and the run that prints and writes its figures. Here rather than in
app/commands/bench.py so that a benchmark runs without the app (the engine never
imports it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

KINDS = {
    "offload": "the layer-streaming executor against Accelerate offloading and all-resident",
    "retrieval": "partitioned search: latency and recall by resident budget, batched queries",
    "ingest": "ingestion pages/s and chunks/s, and the rescan of an unchanged folder",
    "pipeline": "decoupled pipelines with adaptive batches against serial RAG",
    "prefix": "time to first token of a conversation's next turn with prefix KV reuse",
    "quality": "right page, answers that state the fact, refusals: real documents",
    "conversation": "follow-up questions over real documents: the right page in the top 3",
    "server": "an OpenAI-compatible model server as the generator: added first-token time",
    "each": "one question of each of 50 real documents: right pages, not stated, chat latency",
    "product_ttft": "a local GGUF through the OpenAI API: first token against llama.cpp's prefill",
}


def kind_parser(*, kind: str, module: Any) -> argparse.ArgumentParser:
    """The whole parser of `ragdoll bench KIND`: the common flags and the kind's own."""
    parser = argparse.ArgumentParser(prog=f"ragdoll bench {kind}", description=KINDS[kind])
    parser.add_argument("--quick", action="store_true", help="a small form that runs in minutes")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the JSON here")
    module.add_arguments(parser)
    return parser


def run_kind(*, kind: str, module: Any, options: argparse.Namespace) -> int:
    """Measure, then print the figures as JSON (`--json`) and write them (`--out`)."""
    options.kind = kind
    figures = module.run(options)
    text = json.dumps(figures, indent=2, sort_keys=True, default=str)
    if options.json:
        print(text)
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(text + "\n", encoding="utf-8")
    return 0
