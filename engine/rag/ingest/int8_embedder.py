"""Ingestion's copy of the embedder in int8: OpenVINO, quantized with NNCF.

MiniLM's encode is almost all matmuls; this EPYC-class CPU (AVX-512 VNNI) runs
int8 ones about twice as fast as bf16. The int8 model is made on the person's
machine, once, from the ONNX export of the weights the bundled package carries
(engine/rag/ingest/onnx_embedder.py: no download): NNCF's post-training
quantization, calibrated on chunks of the user guide the app ships
(resources/samples), saved beside the export in the cache folder (written under
temporary names and renamed: a crash leaves no half model). NNCF runs in a child
process (engine/rag/ingest/int8_quantizer.py), never in the engine's.

Only ingestion's chunks are embedded with it; questions and the answers'
sentences keep the float-faithful path (OpenVINO bf16), so a question's vector
is the model's and only the stored vectors carry int8's error. int8 does not
give the float32 vectors (cosine to float32 torch on the real manuals' chunks:
median about 0.995, minimum about 0.95; docs/benchmarks.md, "int8"), so it is
not a back-end swap under the 0.999 rule: it was measured as a retrieval change
(hit@1, hit@3, MRR of `ragdoll bench quality`) before it was made the default.
An index holding float and int8 chunk vectors side by side is searched with the
same question vector, each chunk vector near its float one: the two kinds
need no re-embedding (docs/benchmarks-history.md gives the figures that say so).

The first time, making it takes one to three minutes on a laptop (NNCF's child
process). Ingestion does not wait for it: `start_int8` tokenizes the calibration
texts and starts the child on a thread of its own, ingestion embeds in float
meanwhile, and its next batch after the child ended loads the int8 model
(engine/rag/ingest/embedder.py `_encode_background`). A person's first ingestion then
shows chunks going in from the start instead of "0 of 834 embedded" for minutes.

It is checked at load against float32 torch on probe texts and the calibration
chunks (`MIN_MEDIAN_COSINE`, `MIN_COSINE`): a model that fails, or that cannot
be made (NNCF not installed, an error), leaves ingestion on the float path, and a
`.failed` file beside the export says so (delete it to retry).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engine.rag.ingest.onnx_embedder import PROBES, _mark
from engine.rag.ingest.openvino_embedder import (
    OpenVinoEncoder,
    openvino_installed,
)

log = logging.getLogger(__name__)

IN_USE_MESSAGE = "ingestion embeds in int8"  # logged; the ask-during bench looks for it
# Vectors of one text, int8 against float32: an int8 model whose vectors are
# further than this from the model's is broken, not merely quantized.
MIN_MEDIAN_COSINE = 0.99
MIN_COSINE = 0.9
CALIBRATION_CHUNKS = 300
CHECK_TEXTS = 64  # checked at every load: float32 torch encodes them too
_STRIDE = 40
_CHUNK_PIECES = 200  # engine/rag/ingest/chunker.py's chunk
_QUESTION_PIECES = 24
_CALIBRATION_BATCH = 8
_GUIDE = "ragdoll-user-guide.md"


def nncf_installed() -> bool:
    """Found without importing it (engine/rag/ingest/int8_quantizer.py imports it, in its own
    process, with its telemetry off)."""
    import importlib.util

    return importlib.util.find_spec("nncf") is not None


def int8_file(onnx: Path) -> Path:
    """Where the int8 model of an ONNX export is kept (its weights in a `.bin` beside)."""
    return onnx.with_name(f"{onnx.stem}.int8.xml")


def calibration_texts(*, tokenizer: Any, limit: int = CALIBRATION_CHUNKS) -> list[str]:
    """Windows of the user guide the app ships, of a chunk's length and of a
    question's, at every `_STRIDE` word pieces: more samples of real text than
    its dozen chunks, at the lengths ingestion and questions embed."""
    from engine.rag.ingest.parsers import parse_file

    guide = Path(__file__).resolve().parents[3] / "resources" / "samples" / _GUIDE
    doc = parse_file(path=guide)
    text = "\n".join(page.text for page in doc.pages)
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    texts = list(PROBES)
    for start in range(0, max(1, len(ids) - _STRIDE), _STRIDE):
        for size in (_CHUNK_PIECES, _QUESTION_PIECES):
            texts.append(tokenizer.decode(ids[start : start + size]))
    return texts[:limit]


def quantize(*, onnx: Path, out: Path, tokenizer: Any, texts: list[str], max_tokens: int) -> None:
    """`onnx` quantized to int8 by NNCF and saved as `out`, in a child process
    (engine/rag/ingest/int8_quantizer.py: NNCF never loads into the engine)."""
    from engine.rag.ingest.int8_quantizer import quantize_in_child

    feeds = calibration_feeds(tokenizer=tokenizer, texts=texts, max_tokens=max_tokens)
    quantize_in_child(onnx=onnx, out=out, feeds=feeds)


def calibration_feeds(
    *, tokenizer: Any, texts: list[str], max_tokens: int
) -> list[dict[str, np.ndarray]]:
    """The calibration texts as the model's input arrays, in batches (the child
    needs no tokenizer)."""
    feeds = []
    for start in range(0, len(texts), _CALIBRATION_BATCH):
        features = tokenizer(
            texts[start : start + _CALIBRATION_BATCH],
            padding=True,
            truncation=True,
            max_length=max_tokens,
            return_tensors="np",
        )
        feeds.append({k: np.asarray(v, dtype=np.int64) for k, v in features.items()})
    return feeds


class Int8Making:
    """The int8 model being made by NNCF's child process, on a thread of its own
    (started from ingestion's, whose priority it inherits); a failure is marked
    as `load_int8_encoder`'s own are, so the next load stays in float."""

    def __init__(self, *, onnx: Path, out: Path, feeds: list[dict[str, np.ndarray]]) -> None:
        self._onnx = onnx
        self._out = out
        self._feeds = feeds
        self._thread = threading.Thread(target=self._run, name="ragdoll-int8-make", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from engine.rag.ingest.int8_quantizer import quantize_in_child

        try:
            quantize_in_child(onnx=self._onnx, out=self._out, feeds=self._feeds)
        except Exception as e:
            log.warning("the int8 embedder could not be made (%s): ingestion stays in float", e)
            _mark(self._out.with_name(f"{self._out.name}.failed"), reason=str(e))
        self._feeds = []

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, *, timeout_s: float | None = None) -> bool:
        self._thread.join(timeout_s)
        return self.done


def start_int8(*, model: Any, float_encoder: OpenVinoEncoder) -> Int8Making | None:
    """Start making the int8 copy of `float_encoder` when it is still to be made
    (not made, not marked failed, OpenVINO and NNCF here); None otherwise: then
    `load_int8_encoder` answers at once."""
    onnx = float_encoder._file
    out = int8_file(onnx)
    if out.exists() or out.with_name(f"{out.name}.failed").exists():
        return None
    if not (openvino_installed() and nncf_installed()):
        return None
    try:
        texts = calibration_texts(tokenizer=model.tokenizer)
        feeds = calibration_feeds(
            tokenizer=model.tokenizer, texts=texts, max_tokens=int(model.max_seq_length)
        )
    except Exception as e:
        log.warning("the int8 embedder could not be made (%s): ingestion stays in float", e)
        _mark(out.with_name(f"{out.name}.failed"), reason=str(e))
        return None
    log.info("quantizing the embedder to int8 for ingestion, which embeds in float meanwhile")
    return Int8Making(onnx=onnx, out=out, feeds=feeds)


def load_int8_encoder(*, model: Any, float_encoder: OpenVinoEncoder) -> OpenVinoEncoder | None:
    """An int8 copy of `float_encoder` (OpenVINO over the ONNX export of `model`,
    a float32 SentenceTransformer), made on first use and checked against
    `model`'s vectors; None when it cannot be made or is off (logged)."""
    onnx = float_encoder._file
    out = int8_file(onnx)
    failed = out.with_name(f"{out.name}.failed")
    if failed.exists() or not openvino_installed():
        return None
    if not nncf_installed():
        log.info("the embedder stays in float for ingestion: NNCF is not installed")
        return None
    try:
        texts = calibration_texts(tokenizer=model.tokenizer)
        if not out.exists():
            log.info("quantizing the embedder to int8 for ingestion: %s", out)
            quantize(
                onnx=onnx,
                out=out,
                tokenizer=model.tokenizer,
                texts=texts,
                max_tokens=int(model.max_seq_length),
            )
        encoder = int8_encoder(file=out, like=float_encoder)
        texts = texts[:: max(1, len(texts) // CHECK_TEXTS)][:CHECK_TEXTS]
        got = encoder.encode(texts, batch_size=32)
    except Exception as e:  # any failure means: ingestion stays on the float path
        log.warning("the int8 embedder could not be made (%s): ingestion stays in float", e)
        _mark(failed, reason=str(e))
        return None
    want = np.asarray(
        model.encode(texts, normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32
    )
    cosines = np.sum(got * want, axis=1)
    low, middle = float(np.min(cosines)), float(np.median(cosines))
    if low < MIN_COSINE or middle < MIN_MEDIAN_COSINE:
        log.warning("the int8 embedder is off (cosine min %.4f, median %.4f)", low, middle)
        _mark(failed, reason=f"cosine to float32: min {low:.5f}, median {middle:.5f}")
        return None
    log.info("%s (cosine to float32: min %.4f, median %.4f)", IN_USE_MESSAGE, low, middle)
    return encoder


def int8_encoder(*, file: Path, like: OpenVinoEncoder) -> OpenVinoEncoder:
    """`like` over the int8 model in `file`, compiled in the calling thread
    (ingestion's, whose priority its runtime threads inherit)."""
    return like.sibling(file=file)
