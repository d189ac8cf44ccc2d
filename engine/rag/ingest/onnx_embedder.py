"""An ONNX Runtime path for a sentence-transformers model on the CPU.

The model's transformer is exported once with `torch.onnx.export` into the cache
folder (`<cache>/embedders/<name>-<digest>.onnx`, written to a temporary name and
renamed, so a crash leaves no half file); pooling and normalisation run in NumPy.
Only plain models are exported: a Transformer module, then mean or CLS pooling,
then an optional Normalize; anything else stays on torch. After the export the
ONNX path is checked against torch on probe texts (cosine ≥ `MIN_COSINE`), and a
model that fails the check stays on torch too; a `.failed` file beside the export
says so, so that later starts do not try again (delete it to retry). Torch's vectors
of the probes are kept beside the export (`torch_probes`): later starts check
against them without loading torch's model (engine/rag/ingest/plain_model.py).

Measured on MiniLM and the real manuals' chunks (docs/benchmarks.md, "Embedder
back-ends"): the same vectors (cosine ≥ 0.9999), more chunks per second on 2 cores.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.rag.ingest.plain_model import PlainModel
from engine.runtime.models.process_wide import one_at_a_time

log = logging.getLogger(__name__)

MIN_COSINE = 0.999
PROBES = [
    "How do I install a package from a local .deb file?",
    "The maintainer scripts are installed into the DEBIAN directory.",
    "x",
    "A longer passage: " + "words of a manual page about git rebase and its options " * 12,
]


def _digest(location: str) -> str:
    """Changes when the weights change: the weight files' names, sizes and mtimes."""
    folder = Path(location)
    h = hashlib.sha256(str(folder.resolve()).encode())
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".json"):
            st = f.stat()
            h.update(f"{f.relative_to(folder)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def onnx_file(*, location: str, cache_dir: Path) -> Path:
    """Where the model's ONNX export is kept: one file per model folder and weights,
    shared by every back-end that reads the export."""
    return cache_dir / f"{Path(location).name[:40]}-{_digest(location)}.onnx"


class SharedTokenizer:
    """One tokenizer for every encoder of a model (the question's and ingestion's), one
    call at a time: a fast tokenizer's call sets its padding and truncation on the one
    Rust object, so two threads may not call it at once. A copy per thread cost a
    multilingual vocabulary (multilingual-e5's 250,002 pieces) about 270 MB each, and an
    engine held five or six; tokenising a batch takes milliseconds beside its inference."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def features(self, texts: list[str], *, max_tokens: int) -> Any:
        with self._lock:
            return self._tokenizer(
                texts,
                padding=True,
                truncation="longest_first",
                max_length=max_tokens,
                return_tensors="np",
            )


class OnnxEncoder:
    """`encode(texts)`: the model's L2-normalised vectors, via ONNX Runtime.
    One instance may encode in several threads at once (they take turns only to
    tokenise; a session's `run` is thread-safe)."""

    def __init__(
        self,
        *,
        session: Any,
        tokenizer: SharedTokenizer,
        pooling: str,
        max_tokens: int,
        file: Path,
    ) -> None:
        self._session = session
        self._file = file
        self._inputs = {i.name for i in session.get_inputs()}
        self._pooling = pooling
        self._max_tokens = max_tokens
        self._tokenizer = tokenizer

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        parts = [
            self._batch(texts[start : start + batch_size])
            for start in range(0, len(texts), batch_size)
        ]
        return np.asarray(np.concatenate(parts), dtype=np.float32)

    def sibling(self) -> OnnxEncoder:
        """The same encoder over a session of its own, made in the calling thread.
        ONNX Runtime starts a session's worker threads when the session is made,
        and on Linux they inherit that thread's CPU priority: ingestion makes its
        sibling after lowering its own priority (engine/rag/ingest/priority.py), so
        its batches yield the cores to a question as torch's pool does."""
        return OnnxEncoder(
            session=_session(self._file),
            tokenizer=self._tokenizer,
            pooling=self._pooling,
            max_tokens=self._max_tokens,
            file=self._file,
        )

    def _batch(self, texts: list[str]) -> np.ndarray:
        features = self._tokenizer.features(texts, max_tokens=self._max_tokens)
        feed = {k: np.asarray(v, dtype=np.int64) for k, v in features.items() if k in self._inputs}
        if "token_type_ids" in self._inputs and "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        hidden = self._session.run(None, feed)[0].astype(np.float32)
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


def export_onnx(*, model: Any, file: Path) -> None:
    """Write the model's transformer (token ids → last hidden state) as ONNX.

    One export in the process at a time (process_wide): at a first start with
    multilingual-e5 in force, the bundled MiniLM (the sentence scorer) and e5 exported
    together, and the one that failed was marked never to be tried again."""
    with one_at_a_time():
        _export(model=model, file=file)


def _export(*, model: Any, file: Path) -> None:
    import torch

    transformer = model[0].auto_model
    tokenizer = model.tokenizer
    sample = tokenizer(PROBES[:2], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class _Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = transformer

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

    was_training = transformer.training
    transformer.eval()  # dropout off: the export traces what runs
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        # The tracer's warnings are about branches on shapes that an encoder with
        # an attention mask always takes the same way; the check after export
        # (probes of several lengths and paddings) is what tells.
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Hidden().eval(),
                tuple(sample[n].cpu() for n in names),
                str(tmp),
                dynamo=False,
                input_names=names,
                output_names=["hidden"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "hidden"]},
                opset_version=17,
            )
        os.replace(tmp, file)
    finally:
        tmp.unlink(missing_ok=True)
        transformer.train(was_training)


def load_onnx_encoder(
    *, plain: PlainModel, tokenizer: Any, torch_model: Callable[[], Any], cache_dir: Path
) -> OnnxEncoder | None:
    """The ONNX path for the model `plain` describes (exported on first use), or None
    when it does not give torch's vectors; the reason is logged. `torch_model` loads
    the library's model: called only to export, or to make the probes' vectors."""
    if not Path(plain.location).is_dir():
        return None
    file = onnx_file(location=plain.location, cache_dir=cache_dir)
    failed = file.with_name(file.name + ".failed")  # tried before: not every start again
    if failed.exists():
        return None
    try:
        import onnxruntime  # noqa: F401  (without it: torch, below)

        if not file.exists():
            log.info("exporting the embedder to ONNX: %s", file)
            export_onnx(model=torch_model(), file=file)
        encoder = OnnxEncoder(
            session=_session(file),
            # The engine's own calls (chunking, piece counts) go through `tokenizer`
            # unlocked: the encoders' one copy is theirs.
            tokenizer=SharedTokenizer(copy.deepcopy(tokenizer)),
            pooling=plain.pooling,
            max_tokens=plain.max_tokens,
            file=file,
        )
        got = encoder.encode(PROBES, batch_size=len(PROBES))
    except Exception as e:  # any failure means: torch, as before
        log.warning("embedder %s stays on torch: the ONNX path failed (%s)", plain.location, e)
        _mark(failed, reason=str(e))
        return None
    cosine = probe_cosine(got, torch_probes(file=file, torch_model=torch_model))
    if cosine < MIN_COSINE:
        log.warning("embedder %s stays on torch: ONNX cosine %.5f to torch", plain.location, cosine)
        _mark(failed, reason=f"cosine {cosine:.5f} to torch")
        return None
    return encoder


def torch_probes(*, file: Path, torch_model: Callable[[], Any]) -> np.ndarray:
    """Torch's vectors of `PROBES` for the model exported in `file`, made once and kept
    beside it (its name carries the weights' digest). Every start checks its back-end
    against them: against torch itself, it had to load the library and the model."""
    kept = file.with_name(f"{file.name}.probes.npz")
    try:
        with np.load(kept) as data:
            if [str(t) for t in data["texts"]] == PROBES:
                return np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError):
        pass  # none yet, or an unreadable one: made again
    vectors = np.asarray(
        torch_model().encode(PROBES, normalize_embeddings=True, convert_to_numpy=True),
        dtype=np.float32,
    )
    tmp = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as out:
            np.savez(out, texts=np.asarray(PROBES), vectors=vectors)
        os.replace(tmp, kept)
    except OSError:  # a full or read-only cache: made again next time
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return vectors


def probe_cosine(got: np.ndarray, want: np.ndarray) -> float:
    """The lowest cosine between a back-end's probe vectors and torch's."""
    return float(np.min(np.sum(got * want, axis=1)))


def _session(file: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(file), sess_options=options, providers=["CPUExecutionProvider"])


def _mark(failed: Path, *, reason: str) -> None:
    try:
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.write_text(reason + "\n", encoding="utf-8")
    except OSError:  # a full or read-only cache: it is tried again next time
        pass
