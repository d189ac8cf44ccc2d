"""`ragdoll bench ingest`: how fast documents go in, and what a rescan of an
unchanged folder costs.

1. Ingestion: a generated corpus of text PDFs (fpdf2, fixed seed) through the
   real path — discovery, the parsing child, chunking, the bundled embedder,
   LanceDB on disk — timed from submit to done: pages/s and chunks/s.
2. Rescan: a folder of small text files whose journal says they are indexed,
   rescanned as at engine start; seconds, and how many texts reached the
   embedder (counted at the embedder itself, so it must be 0). Then again after
   touching every file (new mtimes, same content: each file is hashed).
   The journal and chunks of this folder are written in bulk with synthetic
   vectors — ingesting 10,000 files for real would take an hour on 2 cores and
   says nothing about the rescan; the rescan itself is the real job.
3. small-files and ask-during (`--parts`): many small files of real text, and
   questions asked while a long real PDF is embedded (bench/ingest_many.py,
   bench/ask_during.py).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.ingest_many import wait_for_job
from engine.environ import EngineEnviron

_VOCABULARY = (
    "the valve pressure gauge inspection schedule winter harbour ferry timetable engine "
    "filter pump seal gasket manual section warranty battery charger voltage current "
    "garden soil compost seedlings irrigation greenhouse frost cover ventilation roof "
    "invoice payment account balance tenant lease deposit heating boiler service record "
    "recipe flour butter oven minutes temperature bicycle chain brake tyre lever cable"
)
WORDS = _VOCABULARY.split()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pdfs", type=int, help="PDF files in the ingestion corpus")
    parser.add_argument("--pages", type=int, help="pages per PDF")
    parser.add_argument("--rescan-files", type=int, help="files in the rescanned folder")
    parser.add_argument(
        "--parts",
        default="pdfs,rescan",
        help="comma-separated: pdfs, rescan, small-files, ask-during (default: pdfs,rescan)",
    )
    parser.add_argument(
        "--small-files", type=int, help="files of real text in small-files (20,000; quick 2,000)"
    )
    parser.add_argument(
        "--stand-in-embedder",
        action="store_true",
        help="small-files: hash vectors instead of MiniLM (all but the embedder is measured)",
    )
    parser.add_argument(
        "--ask-during", type=int, metavar="PAGES", help="pages of the PDF of ask-during (2,000)"
    )
    parser.add_argument(
        "--ask-pdf-from",
        type=Path,
        metavar="FOLDER",
        help="ask-during: the PDFs its long PDF is made of (default: the real manuals)",
    )
    parser.add_argument(
        "--ask-nice",
        metavar="LIST",
        help="ask-during: one run per nice value of ingestion, e.g. 0,10 (default: the engine's)",
    )
    parser.add_argument(
        "--ask-rounds", type=int, help="ask-during: 5 × this new questions a phase (2, at most 3)"
    )


class _CountingEmbedder:
    """The real embedder, counting every text it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.info = inner.info
        self.tokenizer = inner.tokenizer
        self.texts = 0
        self.seconds = 0.0

    def piece_counts(self, texts: list[str]) -> list[int]:
        return self._inner.piece_counts(texts)

    def embed(self, texts: list[str], **kw: Any) -> np.ndarray:
        started = time.perf_counter()
        self.texts += len(texts)
        try:
            return self._inner.embed(texts, **kw)
        finally:
            self.seconds += time.perf_counter() - started


def run(args: argparse.Namespace) -> dict[str, Any]:
    from engine.rag.ingest.embedder import Embedder

    pdfs = args.pdfs or (6 if args.quick else 40)
    pages = args.pages or (5 if args.quick else 10)
    rescan_files = args.rescan_files or (1_000 if args.quick else 10_000)
    say = (lambda *a: None) if args.json else print
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    root = Path(tempfile.mkdtemp(prefix="ragdoll-bench-ingest-"))
    figures: dict[str, Any] = {}
    try:
        # The engine's own choice of back-end (bf16 weights or ONNX on a CPU: a
        # cache folder is what lets it choose), as the product ingests.
        real = Embedder(environ=EngineEnviron.from_environ(), cache_dir=root / "embedder-cache")
        embedder = _CountingEmbedder(real)
        if "pdfs" in parts:
            say(f"generating {pdfs} PDFs x {pages} pages…")
            corpus = _write_pdf_corpus(folder=root / "pdfs", files=pdfs, pages=pages)
            figures |= _ingest(root=root, corpus=corpus, embedder=embedder)
            say(
                f"ingestion: {figures['pdf_pages']} pages, {figures['chunks']} chunks in "
                f"{figures['ingest_seconds']:.1f} s = {figures['pages_per_s']:.2f} pages/s, "
                f"{figures['chunks_per_s']:.2f} chunks/s "
                f"(embedding {figures['embed_seconds']:.1f} s)"
            )
        if "rescan" in parts:
            say(f"writing {rescan_files} files and their journal…")
            figures |= _rescan(root=root, files=rescan_files, embedder=embedder)
            say(
                f"rescan of {figures['rescan_files']} unchanged files: "
                f"{figures['rescan_seconds']:.2f} s, {figures['rescan_embeddings']} embeddings; "
                f"after touching every file: {figures['rescan_touched_seconds']:.2f} s, "
                f"{figures['rescan_touched_embeddings']} embeddings"
            )
        if parts & {"small-files", "ask-during"}:
            figures |= _real_text_parts(args=args, parts=parts, root=root, real=real, say=say)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures |= {"load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    figures["embedder_backend"] = real.backend
    if parts - {"ask-during"}:  # ask-during ingests in the engine: its own figure
        figures["ingest_embedder_backend"] = real.ingest_backend  # "openvino-int8": in int8
    say(f"load average {figures['load_average_1m']} on {figures['cpus']} CPUs")
    return figures


def _real_text_parts(
    *, args: argparse.Namespace, parts: set[str], root: Path, real: Any, say: Any
) -> dict[str, Any]:
    from bench import ingest_many
    from bench.real_docs import find_real_docs

    corpus = find_real_docs()
    if corpus is None:
        raise SystemExit(
            "small-files and ask-during need the real manuals: "
            "python -m bench.real_docs (or set RAGDOLL_REAL_DOCS)"
        )
    figures: dict[str, Any] = {}
    if "small-files" in parts:
        count = args.small_files or (2_000 if args.quick else 20_000)
        figures |= ingest_many.small_files(
            root=root,
            corpus=corpus,
            count=count,
            real=real,
            stand_in=args.stand_in_embedder,
            say=say,
        )
        say(
            f"{count} small files: {figures['small_files_seconds']} s = "
            f"{figures['small_files_per_s']} files/s ({figures['small_files_embedder']}); "
            f"index {figures['index_bytes_after_job'] / 2**20:.1f} MiB after the job, "
            f"{figures['index_bytes_settled'] / 2**20:.1f} MiB settled, for "
            f"{figures['chunk_text_and_vector_bytes'] / 2**20:.1f} MiB of chunks and vectors "
            f"({figures['index_ratio_settled']}x); rescan unchanged "
            f"{figures['rescan_unchanged_seconds']} s; MiniLM {figures['minilm_chunks_per_s']} "
            "chunks/s here"
        )
    if "ask-during" in parts:
        pages = args.ask_during or (300 if args.quick else 2_000)
        for nice in (args.ask_nice or "").split(",") if args.ask_nice else [None]:
            figures |= _ask_during_at(
                args=args, root=root, corpus=corpus, pages=pages, nice=nice, say=say
            )
    return figures


def _ask_during_at(
    *, args: argparse.Namespace, root: Path, corpus: Path, pages: int, nice: str | None, say: Any
) -> dict[str, Any]:
    """One ask-during run; with `nice`, its engine's ingestion at that nice value
    (engine/rag/ingest/priority.py) and its figures prefixed `nice<N>_`."""
    from bench import ask_during
    from engine.environ import INGEST_NICE_ENV as NICE_ENV

    saved = os.environ.get(NICE_ENV)
    if nice is not None:
        os.environ[NICE_ENV] = nice.strip()
    try:
        folder = root / f"ask-{nice or 'default'}"
        folder.mkdir()
        found = ask_during.ask_during(
            root=folder,
            corpus=corpus,
            pages=pages,
            pdf_from=args.ask_pdf_from,
            rounds=args.ask_rounds or 2,
            say=say,
        )
    finally:
        if saved is None:
            os.environ.pop(NICE_ENV, None)
        else:
            os.environ[NICE_ENV] = saved
    for name in ("ask", "search"):
        say(
            f"ingestion nice {found['ingest_nice']}: {name} {found[f'{name}_idle_median_s']} s "
            f"idle, {found[f'{name}_during_median_s']} s while a {found['ask_pdf_pages']}-page "
            f"PDF is embedded ({found[f'{name}_during_ratio']}x; worst "
            f"{found[f'{name}_during_max_s']} s)"
        )
    say(f"ingestion meanwhile: {found['ingest_chunks_per_s_while_asking']} chunks/s")
    return {f"nice{nice.strip()}_{k}": v for k, v in found.items()} if nice is not None else found


def _write_pdf_corpus(*, folder: Path, files: int, pages: int) -> Path:
    from fpdf import FPDF

    folder.mkdir(parents=True)
    rng = random.Random(2026)
    for n in range(files):
        pdf = FPDF(format="A4")
        pdf.set_auto_page_break(auto=False)
        for p in range(pages):
            pdf.add_page()
            pdf.set_font("Helvetica", style="B", size=13)
            pdf.cell(0, 8, f"Manual {n}, section {p + 1}", new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", size=10)
            for _ in range(5):  # about 350 words a page, like a dense manual
                words = [rng.choice(WORDS) for _ in range(70)]
                pdf.multi_cell(0, 4.6, " ".join(words).capitalize() + ".")
                pdf.ln(2)
        pdf.output(str(folder / f"manual {n:03d}.pdf"))
    return folder


def _queue(*, root: Path, name: str, embedder: Any) -> tuple[Any, Any]:
    from engine.rag.ingest.jobs import IngestQueue
    from engine.rag.ingest.pipeline import CommitPolicy
    from engine.rag.store.lance_store import LanceStore

    store = LanceStore(scorer=EngineEnviron.from_environ().ivf_scorer, folder=root / name)
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)
    return store, IngestQueue(
        store=store,
        embedder=lambda: embedder,
        commits=CommitPolicy.with_files(EngineEnviron.from_environ().ingest_commit_files),
    )


def _ingest(*, root: Path, corpus: Path, embedder: _CountingEmbedder) -> dict[str, Any]:
    store, queue = _queue(root=root, name="index-pdfs", embedder=embedder)
    try:
        embedder.texts, embedder.seconds = 0, 0.0
        started = time.perf_counter()
        progress = wait_for_job(queue.submit(paths=[str(corpus)]))
        seconds = time.perf_counter() - started
        docs = store.list_documents()
    finally:
        queue.stop()
        store.close()  # its index maintainer must not outlive the folder removed after
    page_count = sum(d.pages or 0 for d in docs)
    if progress.errors:
        raise RuntimeError(f"generated PDFs failed: {progress.errors[:3]}")
    return {
        "pdf_files": len(docs),
        "pdf_pages": page_count,
        "chunks": progress.chunks_added,
        "ingest_seconds": round(seconds, 3),
        "embed_seconds": round(embedder.seconds, 3),
        # Discovery, parsing, chunking and the LanceDB commits: the rest of the time.
        "non_embed_seconds": round(seconds - embedder.seconds, 3),
        "pages_per_s": round(page_count / seconds, 3),
        "chunks_per_s": round(progress.chunks_added / seconds, 3),
        "files_per_s": round(len(docs) / seconds, 3),
        "ingest_embeddings": embedder.texts,
    }


def _rescan(*, root: Path, files: int, embedder: _CountingEmbedder) -> dict[str, Any]:
    folder = root / "notes"
    paths = _write_notes(folder=folder, files=files)
    store, queue = _queue(root=root, name="index-notes", embedder=embedder)
    try:
        _bulk_journal(store=store, paths=paths, dimension=embedder.info.dimension)
        out: dict[str, Any] = {"rescan_files": files}
        for label in ("rescan", "rescan_touched"):
            if label == "rescan_touched":
                for p in paths:
                    os.utime(p)
            embedder.texts = 0
            started = time.perf_counter()
            progress = wait_for_job(queue.submit_changes(paths=[str(folder)], origin="rescan"))
            out[f"{label}_seconds"] = round(time.perf_counter() - started, 3)
            out[f"{label}_embeddings"] = embedder.texts
            if progress.files_skipped != files:
                raise RuntimeError(f"{label}: {progress.files_skipped} of {files} files skipped")
        return out
    finally:
        queue.stop()
        store.close()


def _write_notes(*, folder: Path, files: int) -> list[Path]:
    rng = random.Random(7)
    paths = []
    for i in range(files):
        sub = folder / f"year {2000 + i % 20}" / f"month {i % 12 + 1:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"note {i:05d}.txt"
        path.write_text(f"Note {i}: " + " ".join(rng.choice(WORDS) for _ in range(20)) + ".")
        paths.append(path)
    return paths


def _bulk_journal(*, store: Any, paths: list[Path], dimension: int) -> None:
    """The rows ingestion would have written for these files (one chunk each)."""
    from engine.rag.ingest.fspath import to_store
    from engine.rag.ingest.indexer import READER_VERSION, content_hash, doc_id_for

    rng = np.random.default_rng(3)
    docs, pages, chunks = [], [], []
    for path in paths:
        st = path.stat()
        doc_id, key, text = doc_id_for(path), to_store(path), path.read_text()
        docs.append(
            {
                "doc_id": doc_id,
                "path": key,
                "size": st.st_size,
                "mtime": st.st_mtime,
                "content_hash": content_hash(path),
                "status": "indexed",
                "error": None,
                "pages": None,
                "chunks": 1,
                "reader": READER_VERSION,  # read by this version: the rescan skips it
                "languages": "en",
            }
        )
        pages.append({"page_key": f"{doc_id}:None", "doc_id": doc_id, "page": None, "text": text})
        vector = rng.standard_normal(dimension).astype(np.float32)
        chunks.append(
            {
                "chunk_id": f"{doc_id}:0",
                "doc_id": doc_id,
                "path": key,
                "ordinal": 0,
                "page": None,
                "char_start": 0,
                "char_end": len(text),
                "text": text,
                "text_hash": hashlib.sha1(text.encode()).hexdigest(),
                "vector": (vector / np.linalg.norm(vector)).tolist(),
            }
        )
    store.documents.add(pa.Table.from_pylist(docs, schema=store.documents.schema))
    store.pages.add(pa.Table.from_pylist(pages, schema=store.pages.schema))
    store.chunks.add(pa.Table.from_pylist(chunks, schema=store.chunks.schema))
