"""`ragdoll bench ingest --parts small-files`: many small files.

small-files: a folder of N small text files cut from real manuals' text (the
Debian manuals of `bench.real_docs`; overlapping windows, so every file
is different), ingested through the real job path into LanceDB on disk:
files/s, the index's size on disk against its chunks' text and vectors, and
the time of a rescan of the unchanged folder. `--stand-in-embedder` replaces
MiniLM by vectors from a hash of the text (no cost), to measure everything but
the embedder on a machine too busy to embed 20,000 files; MiniLM's own rate on
a sample of the same chunks is reported beside it.

ask-during (questions while a long PDF is embedded) is bench/ask_during.py.
"""

from __future__ import annotations

import datetime
import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.environ import EngineEnviron
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.priority_gate import PriorityGate

WINDOW_CHARS = 1_000


class StandInEmbedder(Embedder):
    """MiniLM's gate, batching and tokenizer; vectors from a hash of the text,
    each encode call taking `batch_s` (tests slow it down)."""

    def __init__(self, *, real: Embedder, batch_s: float = 0.0) -> None:
        self._gate = PriorityGate()
        self._tokenizer = real.tokenizer  # chunks are cut as in the product
        self.info = real.info
        self._beside_lock = threading.Lock()
        self._beside_ok = True
        self.batch_s = batch_s

    def _encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        if self.batch_s:
            time.sleep(self.batch_s)
        return self._encode_beside(texts, batch_size=batch_size)

    def _encode_beside(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.info.dimension)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32)


def real_text(corpus: Path) -> str:
    """The text of the real manuals (PDF pages through PDFium, text files as they are)."""
    import pypdfium2 as pdfium

    parts = []
    for file in sorted(corpus.iterdir()):
        if file.suffix == ".pdf":
            pdf = pdfium.PdfDocument(str(file))
            parts.extend(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
            pdf.close()
        elif file.suffix == ".txt":
            parts.append(file.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(" ".join(p.split()) for p in parts if p.strip())


def write_small_files(*, folder: Path, count: int, text: str) -> int:
    """`count` files of WINDOW_CHARS characters at evenly spread offsets; returns bytes."""
    stride = max(1, (len(text) - WINDOW_CHARS) // count)
    total = 0
    for i in range(count):
        sub = folder / f"part {i // 1000:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        piece = text[i * stride : i * stride + WINDOW_CHARS]
        data = f"Excerpt {i}: {piece}"
        (sub / f"excerpt {i:05d}.txt").write_text(data, encoding="utf-8")
        total += len(data.encode("utf-8"))
    return total


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def small_files(
    *, root: Path, corpus: Path, count: int, real: Embedder, stand_in: bool, say: Any
) -> dict[str, Any]:
    from engine.rag.ingest.jobs import IngestQueue
    from engine.rag.ingest.pipeline import CommitPolicy
    from engine.rag.store.lance_store import LanceStore

    folder = root / "excerpts"
    text = real_text(corpus)
    text_bytes = write_small_files(folder=folder, count=count, text=text)
    say(f"{count} files of real manual text ({text_bytes / 2**20:.1f} MiB) written")
    embedder = StandInEmbedder(real=real) if stand_in else real
    store = LanceStore(
        scorer=EngineEnviron.from_environ().ivf_scorer, folder=root / "index-excerpts"
    )
    store.ensure_embedder(embedder_id=real.info.id, dimension=real.info.dimension)
    queue = IngestQueue(
        store=store,
        embedder=lambda: embedder,
        commits=CommitPolicy.with_files(EngineEnviron.from_environ().ingest_commit_files),
    )
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        progress = wait_for_job(queue.submit(paths=[str(folder)]))
        seconds = time.perf_counter() - started
        # This process's CPU time (all its threads; the parsing child's is not in
        # it): what the job would take on free cores, where wall time on a shared
        # machine is what the other programs left it.
        cpu_s = time.process_time() - cpu_started
        size_after = folder_bytes(store.folder)
        chunks = store.chunks.to_arrow().select(["text"]).column("text").to_pylist()
        content = (
            sum(len(t.encode("utf-8")) for t in chunks) + len(chunks) * real.info.dimension * 4
        )
        # What the index settles to once the maintainer's next optimize has run
        # (it keeps old versions 10 minutes for readers in flight).
        store.keep_journal_versions_s = 0.001
        store.compact()
        store.maintain_index(force_optimize=True)
        store.chunks.optimize(cleanup_older_than=datetime.timedelta(seconds=0.001))
        size_settled = folder_bytes(store.folder)
        versions = {t: len(getattr(store, t).list_versions()) for t in ("documents", "pages")}
        rescan_started = time.perf_counter()
        rescan = wait_for_job(queue.submit_changes(paths=[str(folder)], origin="rescan"))
        rescan_s = time.perf_counter() - rescan_started
        sample = chunks[:64]
        embed_started = time.perf_counter()
        real.embed(sample, background=True)
        minilm_rate = len(sample) / (time.perf_counter() - embed_started)
    finally:
        queue.stop()
        store.close()
    return {
        "small_files": count,
        "small_files_text_bytes": text_bytes,
        "small_files_embedder": "stand-in (hash vectors)" if stand_in else real.info.id,
        "small_files_seconds": round(seconds, 1),
        "small_files_per_s": round(count / seconds, 2),
        "small_files_cpu_s": round(cpu_s, 1),
        "small_files_cpu_ms_per_chunk": round(cpu_s / max(1, progress.chunks_added) * 1000, 1),
        "small_files_chunks": progress.chunks_added,
        "small_files_errors": len(progress.errors),
        "index_bytes_after_job": size_after,
        "index_bytes_settled": size_settled,
        "chunk_text_and_vector_bytes": content,
        "index_ratio_after_job": round(size_after / content, 2),
        "index_ratio_settled": round(size_settled / content, 2),
        "table_versions_settled": versions,
        "rescan_unchanged_seconds": round(rescan_s, 2),
        "rescan_skipped": rescan.files_skipped,
        "minilm_chunks_per_s": round(minilm_rate, 2),
    }


def wait_for_job(job: Any) -> Any:
    """The job's last progress once it ends; raises unless it ended done."""
    version = -1
    while True:
        version, progress = job.wait_next(after=version, timeout_s=5.0)
        if progress.state in ("done", "failed", "cancelled"):
            if progress.state != "done":
                raise RuntimeError(f"the benchmark job ended {progress.state}: {progress.message}")
            return progress
