"""The embedder's back-ends side by side: torch (sentence-transformers, float32),
ONNX Runtime (engine/rag/ingest/onnx_embedder.py), torch with bf16 weights
(engine/rag/ingest/bf16_embedder.py) and OpenVINO (engine/rag/ingest/openvino_embedder.py:
bf16 inference precision where this CPU computes bf16 natively), on chunks of the
real manuals.

    python -m bench.embedder [--chunks 512] [--rounds 3]
        [--backends torch,onnx,bf16,openvino]
    python -m bench.embedder --ingest latex-clsguide.pdf maint-guide.pdf …
    python -m bench.embedder --ingest all [--backends torch,onnx,bf16,openvino]

`--ingest NAME…` instead ingests those files of the real manuals (one folder;
`all`: the 12) through the product's job path (discovery, the parsing child,
chunking, the embedder, commits to LanceDB on disk) once with each back-end
(torch in float32, ONNX Runtime, torch with bf16 weights, OpenVINO), into an index of its
own each, and reports pages/s and chunks/s.

CPU time per chunk (all threads of the process) is reported beside wall time:
a loaded machine sways it less. The chunks come from the real manuals
(`python -m bench.real_docs`) through the product's parsers and chunker
(200/40 tokens), taken evenly from every file. Each round encodes all of them
with each back-end in turn (batch 32, the ingestion batch), so load on the
machine falls on both alike; the figure is the median chunks/s over rounds.
Cosine: each chunk's vector from a back-end against its float32 torch vector
(both L2-normalised); the minimum must be ≥ 0.999.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from engine.environ import EngineEnviron


def real_chunks(*, corpus: Path, count: int, tokenizer: object) -> list[str]:
    """`count` chunk texts taken evenly from every file of the corpus."""
    from engine.rag.ingest.chunker import chunk_document
    from engine.rag.ingest.parsers import parse_file

    per_file: list[list[str]] = []
    for path in sorted(corpus.iterdir()):
        try:
            doc = parse_file(path=path)
        except Exception as e:
            print(f"skipped {path.name}: {e}", file=sys.stderr)
            continue
        texts = [c.text for c in chunk_document(doc=doc, tokenizer=tokenizer)]
        if texts:
            per_file.append(texts)
    share = max(1, count // max(1, len(per_file)))
    picked: list[str] = []
    for texts in per_file:
        step = max(1, len(texts) // share)
        picked.extend(texts[::step][:share])
    return picked[:count]


def ingest_rates(
    *, corpus: Path, names: list[str], backends: list[str] | None = None
) -> dict[str, object]:
    """Ingest the named manuals once per back-end: pages/s and chunks/s (each
    back-end's figures are printed to stderr as it finishes)."""
    import shutil

    from bench.ingest import _queue
    from bench.ingest_many import wait_for_job
    from engine.rag.ingest.embedder import Embedder

    figures: dict[str, object] = {"files": names}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "manuals"
        folder.mkdir()
        for name in names:
            shutil.copy2(corpus / name, folder / name)
        for backend in backends or ["torch", "onnx", "bf16", "openvino"]:
            embedder = Embedder(
                environ=EngineEnviron.from_environ(),
                device="cpu",
                backend=backend,
                cache_dir=root / "cache",
            )
            store, queue = _queue(root=root, name=f"index-{backend}", embedder=embedder)
            try:
                started = time.perf_counter()
                progress = wait_for_job(queue.submit(paths=[str(folder)]))
                seconds = time.perf_counter() - started
                pages = sum(d.pages or 0 for d in store.list_documents())
            finally:
                queue.stop()
                store.close()
            figures[backend] = {
                "backend_in_use": embedder.backend,
                "ingest_backend_in_use": embedder.ingest_backend,
                "pages": pages,
                "chunks": progress.chunks_added,
                "seconds": round(seconds, 1),
                "pages_per_s": round(pages / seconds, 2),
                "chunks_per_s": round(progress.chunks_added / seconds, 2),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
            print(json.dumps({backend: figures[backend]}), file=sys.stderr, flush=True)
    return figures


def encode_rates(
    *, corpus: Path, backends: list[str], args: argparse.Namespace
) -> dict[str, object]:
    """Chunks/s and CPU ms per chunk of each back-end (rounds alternate them),
    and each one's cosine to float32 torch."""
    from engine.rag.ingest.embedder import Embedder

    with tempfile.TemporaryDirectory() as cache:
        torch_ = Embedder(environ=EngineEnviron.from_environ(), device="cpu", backend="torch")
        embedders = {"torch": torch_}
        load_s: dict[str, float] = {}
        for name in backends:
            if name != "torch":
                started = time.perf_counter()
                embedders[name] = Embedder(
                    environ=EngineEnviron.from_environ(),
                    device="cpu",
                    backend=name,
                    cache_dir=Path(cache),
                )
                load_s[name] = round(time.perf_counter() - started, 1)
        texts = real_chunks(corpus=corpus, count=args.chunks, tokenizer=torch_.tokenizer)
        rates: dict[str, list[float]] = {name: [] for name in embedders}
        cpu: dict[str, list[float]] = {name: [] for name in embedders}
        vectors: dict[str, np.ndarray] = {}
        for _ in range(args.rounds):
            for name, embedder in embedders.items():
                t, c = time.perf_counter(), time.process_time()
                vectors[name] = embedder.embed(texts, batch_size=args.batch, background=True)
                rates[name].append(len(texts) / (time.perf_counter() - t))
                cpu[name].append((time.process_time() - c) / len(texts) * 1000)
    figures: dict[str, object] = {"chunks": len(texts), "rounds": args.rounds}
    for name, embedder in embedders.items():
        cosines = np.sum(vectors["torch"] * vectors[name], axis=1)
        figures[name] = {
            "backend_in_use": embedder.backend,
            "ingest_backend_in_use": embedder.ingest_backend,
            "load_and_check_s": load_s.get(name),
            "chunks_per_s": [round(r, 1) for r in rates[name]],
            "median": round(statistics.median(rates[name]), 1),
            "speedup_over_torch": round(
                statistics.median(rates[name]) / statistics.median(rates["torch"]), 2
            ),
            # CPU time of all the process's threads per chunk: less swayed by
            # other programs on the machine than wall time.
            "cpu_ms_per_chunk": round(statistics.median(cpu[name]), 1),
            "cosine_min": round(float(cosines.min()), 6),
            "cosine_median": round(float(np.median(cosines)), 6),
        }
    figures |= {"load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedder")
    parser.add_argument("--chunks", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--ingest", nargs="+", metavar="NAME", help="files of the real manuals ('all': every one)"
    )
    parser.add_argument(
        "--backends",
        default="torch,onnx,bf16,openvino",
        help="back-ends, in this order each round",
    )
    args = parser.parse_args(argv)

    from bench.real_docs import find_real_docs

    corpus = find_real_docs()
    if corpus is None:
        print("the real manuals are absent: python -m bench.real_docs", file=sys.stderr)
        return 2
    if args.ingest:
        names = sorted(p.name for p in corpus.iterdir()) if args.ingest == ["all"] else args.ingest
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        figures = ingest_rates(corpus=corpus, names=names, backends=backends)
        print(json.dumps(figures, indent=2) if args.json else figures)
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    figures = encode_rates(corpus=corpus, backends=backends, args=args)
    print(json.dumps(figures, indent=2) if args.json else figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
