"""Answers written by a local Hugging Face causal language model, with [n] citations.

The model runs on the layer-streaming executor (engine/executor) under the placement the
planner makes for this machine, so a model larger than memory streams from the disk
instead of failing to load. The prompt is built by `build_prompt` alone.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import snapshot_download
from transformers import AutoConfig, AutoTokenizer, GenerationConfig

from engine.answer.passages import Passage
from engine.answer.prompt import (
    build_prompt,
    encode_prompt,
)
from engine.errors import ModelLoadError
from engine.executor.compat import GenerateCompat
from engine.executor.forward import StreamingModel
from engine.executor.generate import GenerationRequest, Sampling, TokenEvent, generate
from engine.executor.prefix_cache import PrefixCache, prefix_cache_for
from engine.hardware.profile import HardwareProfile, load_profile
from engine.paths import resolve_paths
from engine.planner.model_spec import load_model_spec
from engine.planner.placement import Placement, StoreSpec, Workload
from engine.planner.planner import plan
from engine.wire_events import Turn

# A repo id is "name" or "org/name" (see huggingface_hub's validate_repo_id).
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")
# Used when neither the config nor the tokenizer says how long a context can be.
_FALLBACK_CONTEXT = 2048
# The context the placement is sized for: prompts of a few sources and an answer. A
# model's full window (32k for Qwen2) would reserve KV that a RAG answer never fills
# and push weights off the compute tier for nothing.
PLANNED_CONTEXT = 4096


def resolve_model_path(*, model: str, cache_dir: Path | None = None) -> Path:
    """The folder of a model named by a local path or a Hugging Face repo id.

    Only what is already on disk is considered: a folder with config.json, or a snapshot
    in the local Hugging Face cache (`cache_dir`, else HF_HUB_CACHE / HF_HOME as set now).
    """
    local = Path(model).expanduser()
    if local.is_dir():
        _check_model_folder(local)
        return local.resolve()
    # "./x" matches the repo-id pattern but is clearly meant as a path.
    if not _REPO_ID.match(model) or model.startswith("."):
        raise ModelLoadError(f"No model folder at {model}: the folder does not exist.")
    cache = cache_dir if cache_dir is not None else _hub_cache()
    snapshot = _cached_snapshot(repo_id=model, cache=cache)
    if snapshot is None:
        raise ModelLoadError(
            f"Model {model!r} was not found: it is neither a folder on this computer nor "
            f"downloaded into the Hugging Face cache at {cache}. "
            "Give the path of a model folder, or download the model first."
        )
    _check_model_folder(snapshot)
    return snapshot


def _hub_cache() -> Path:
    # Read at call time: huggingface_hub.constants freezes the environment at import.
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _cached_snapshot(*, repo_id: str, cache: Path) -> Path | None:
    try:
        return Path(snapshot_download(repo_id, cache_dir=cache, local_files_only=True))
    except Exception:
        # Offline lookups fail for many reasons (no refs/main, malformed id, missing
        # files); scanning the snapshots folder below still finds a usable copy.
        pass
    snapshots = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = [s for s in snapshots.iterdir() if (s / "config.json").is_file()]
    if not candidates:
        return None
    return max(candidates, key=lambda s: s.stat().st_mtime)


def _check_model_folder(folder: Path) -> None:
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder} is not a model folder: it has no config.json.")
    if not any(folder.glob("*.safetensors")):
        raise ModelLoadError(
            f"{folder} has no .safetensors weights. RAGDoll only loads safetensors, "
            "because other weight formats can run code when they are opened."
        )


def display_name(*, model_path: Path) -> str:
    """'org/name' for a model in the Hugging Face cache, else the folder's name."""
    parent = model_path.parent
    if parent.name == "snapshots" and parent.parent.name.startswith("models--"):
        return parent.parent.name.removeprefix("models--").replace("--", "/")
    return model_path.name


@dataclass(frozen=True, kw_only=True)
class GenerationRecord:
    """What the last `stream` or `stream_batch` fed the executor and got back, the
    whole batch's (instrumentation)."""

    prompt_tokens: int
    generated_tokens: int
    cancelled: bool


class IncrementalDetokenizer:
    """Text of a growing token sequence, piece by piece, decoding only a short window.

    A token may end inside a multi-byte character (U+FFFD when decoded alone), and a
    tokenizer may render a token differently after its neighbour; so text is released
    only once it decodes cleanly, from a window that starts at the last release (the
    scheme of vLLM's detokenize_incrementally)."""

    def __init__(self, *, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # window start
        self._read = 0  # end of what has been released

    def add(self, token_id: int) -> str:
        self._ids.append(token_id)
        return self._release(final=False)

    def flush(self) -> str:
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        before = self._decode(self._ids[self._prefix : self._read])
        text = self._decode(self._ids[self._prefix :])
        if len(text) <= len(before) or (text.endswith("\ufffd") and not final):
            return ""
        piece = text[len(before) :] if text.startswith(before) else text
        self._prefix, self._read = self._read, len(self._ids)
        return piece.rstrip("\ufffd") if final else piece

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return self._tokenizer.decode(ids, skip_special_tokens=True)


class GenerativeAnswerer:
    """A causal LM under the planner's placement for this machine, run by the
    layer-streaming executor, that streams answers to questions about passages.

    Nothing loads the whole model: the executor builds it on the meta device and reads
    each unit's tensors into its home tier (held, or streamed per use from the disk)."""

    def __init__(
        self,
        *,
        model_path: Path,
        device: str | None = None,
        dtype: str | None = None,
        hardware: HardwareProfile | None = None,
        placement: Placement | None = None,
        store: StoreSpec | None = None,
        fault_hook: Callable[[str], None] | None = None,
        evict_after_read: bool = False,
        stop_at_eos: bool = True,
    ):
        """`evict_after_read` and `stop_at_eos=False` are for benchmarks: disk units are
        dropped from the page cache after each read (every read is a real disk read), and
        every answer runs to its max_new_tokens (equal work for every system compared)."""
        _check_model_folder(model_path)
        self.model_path = model_path
        self.name = display_name(model_path=model_path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
            config = AutoConfig.from_pretrained(model_path, local_files_only=True)
            self.context_length = _context_length(config=config, tokenizer=self.tokenizer)
            if placement is None:
                hardware = hardware or _this_machine(device=device)
                placement = _plan(
                    model_path=model_path,
                    hardware=hardware,
                    store=store or StoreSpec.default(),
                    dtype=_compute_dtype(config=config, dtype=dtype, cpu=hardware.gpu is None),
                    context_tokens=min(self.context_length, PLANNED_CONTEXT),
                )
            cpu = placement.compute_tier == "cpu"
            self.placement = placement
            self.executor = StreamingModel(
                model_dir=model_path,
                placement=placement,
                dtype=_compute_dtype(config=config, dtype=dtype, cpu=cpu),
                fault_hook=fault_hook,
                evict_after_read=evict_after_read,
            )
        except ModelLoadError:
            raise
        except Exception as e:
            raise ModelLoadError(f"Could not load the language model in {model_path}: {e}") from e
        self.model = GenerateCompat(model=self.executor)  # for code written against HF
        self.device = str(self.executor.device)
        # KV of prompt starts reused across turns and requests; None turns reuse off.
        self.prefix_cache: PrefixCache | None = prefix_cache_for(
            placement=placement, device=self.executor.device
        )
        stop_ids = _stop_ids(
            model_path=model_path, executor=self.executor, tokenizer=self.tokenizer
        )
        self._pad_id = _pad_id(tokenizer=self.tokenizer, stop_ids=stop_ids)
        self._stop_ids = stop_ids if stop_at_eos else ()
        self._lock = threading.Lock()  # the executor runs one batch at a time
        self.last_generation: GenerationRecord | None = None
        # The copy thread keeps the executor alive; when the engine drops this answerer
        # (another model chosen, or none), stop it and free the weights.
        self._finalizer = weakref.finalize(self, self.executor.close)

    def stream(
        self,
        *,
        question: str,
        passages: list[Passage],
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        cancel: threading.Event | None = None,
        seed: int = 0,
        history: Sequence[Turn] = (),
    ) -> Iterator[str]:
        """Yield the answer's text piece by piece; stops early when `cancel` is set or
        the caller stops reading (the batch and its KV cache are freed then)."""
        request = self.prompt_request(
            question=question, passages=passages, max_new_tokens=max_new_tokens, history=history
        )
        generated = 0
        stopped = cancel is not None and cancel.is_set()
        events = self.stream_batch(requests=[request], temperature=temperature, seed=seed)
        detokenizer = IncrementalDetokenizer(tokenizer=self.tokenizer)
        try:
            if not stopped:
                for event in events:
                    generated += 1
                    piece = detokenizer.add(event.token_id)
                    if piece:
                        yield piece
                    if cancel is not None and cancel.is_set():
                        stopped = True
                        break
                tail = "" if stopped else detokenizer.flush()
                if tail:
                    yield tail
        finally:
            events.close()  # frees the batch's KV cache now, not at garbage collection
            self.last_generation = GenerationRecord(
                prompt_tokens=len(request.prompt_ids),
                generated_tokens=generated,
                cancelled=stopped,
            )

    @property
    def pad_token_id(self) -> int:
        return self._pad_id

    def prompt_request(
        self,
        *,
        question: str,
        passages: list[Passage],
        max_new_tokens: int = 256,
        history: Sequence[Turn] = (),
    ) -> GenerationRequest:
        """One question as the executor's request: the prompt cut to fit the context
        (at least half of it kept for the sources; earlier turns of the conversation
        in what is left, oldest dropped first) and this model's stop tokens."""
        max_new_tokens = max(1, min(max_new_tokens, self.context_length // 2))
        prompt = build_prompt(
            tokenizer=self.tokenizer,
            question=question,
            passages=passages,
            max_prompt_tokens=self.context_length - max_new_tokens,
            history=history,
        )
        return self._request(prompt=prompt, max_new_tokens=max_new_tokens)

    def rewrite_request(
        self, *, question: str, history: Sequence[Turn], max_new_tokens: int = 48
    ) -> GenerationRequest:
        """A follow-up's rewrite into a standalone search query, as a short request."""
        from engine.answer.conversation import REWRITE_INSTRUCTIONS, rewrite_prompt_text

        user = rewrite_prompt_text(question=question, history=tuple(history))
        if getattr(self.tokenizer, "chat_template", None):
            messages = [
                {"role": "system", "content": REWRITE_INSTRUCTIONS},
                {"role": "user", "content": user},
            ]
            try:
                prompt = self.tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            except Exception:  # a template without a system role
                merged = [{"role": "user", "content": f"{REWRITE_INSTRUCTIONS}\n\n{user}"}]
                prompt = self.tokenizer.apply_chat_template(
                    merged, tokenize=False, add_generation_prompt=True
                )
        else:
            prompt = f"{REWRITE_INSTRUCTIONS}\n\n{user}\n\nQuery:"
        return self._request(prompt=prompt, max_new_tokens=max_new_tokens)

    def _request(self, *, prompt: str, max_new_tokens: int) -> GenerationRequest:
        ids = encode_prompt(tokenizer=self.tokenizer, prompt=prompt, return_tensors=None)
        return GenerationRequest(
            prompt_ids=tuple(ids["input_ids"]),
            max_new_tokens=max_new_tokens,
            stop_token_ids=self._stop_ids,
        )

    def stream_batch(
        self,
        *,
        requests: Sequence[GenerationRequest],
        temperature: float = 0.0,
        seed: int = 0,
        cancelled: Callable[[int], bool] | None = None,
        incoming: Callable[[], Sequence[GenerationRequest]] | None = None,
    ) -> Iterator[TokenEvent]:
        """Token events of a batch of requests (see engine/executor/generate.py). One
        batch runs at a time: the answerer's lock is held from the first event until
        the iterator ends or is closed (closing frees the batch's KV cache)."""
        prompt_tokens = sum(len(r.prompt_ids) for r in requests)
        generated = 0
        ended = False

        def arrivals() -> Sequence[GenerationRequest]:
            nonlocal prompt_tokens
            new = incoming() if incoming is not None else ()
            prompt_tokens += sum(len(r.prompt_ids) for r in new)
            return new

        with self._lock:
            # The only call of generate(): every answer, single or batched, comes here.
            events = generate(
                model=self.executor,
                requests=requests,
                sampling=Sampling(temperature=max(temperature, 0.0), seed=seed),
                pad_token_id=self._pad_id,
                cancelled=cancelled,
                incoming=arrivals if incoming is not None else None,
                prefix_cache=self.prefix_cache,
            )
            try:
                for event in events:
                    generated += 1
                    # Before the event leaves: whoever hears a row finish sees its tokens.
                    self.last_generation = GenerationRecord(
                        prompt_tokens=prompt_tokens, generated_tokens=generated, cancelled=False
                    )
                    yield event
                ended = True
            finally:
                events.close()
                self.last_generation = GenerationRecord(
                    prompt_tokens=prompt_tokens, generated_tokens=generated, cancelled=not ended
                )

    def close(self) -> None:
        self._finalizer()


def _this_machine(*, device: str | None) -> HardwareProfile:
    """The cached hardware profile (never a slow measurement here); without a cache,
    the counts alone."""
    hardware = load_profile(paths=resolve_paths(), measure=False)
    if device == "cpu" and hardware.gpus:
        hardware = dataclasses.replace(hardware, gpus=())
    return hardware


def _plan(
    *,
    model_path: Path,
    hardware: HardwareProfile,
    store: StoreSpec,
    dtype: torch.dtype,
    context_tokens: int,
) -> Placement:
    spec = load_model_spec(source=model_path, dtype=str(dtype).removeprefix("torch."))
    placement = plan(
        hardware=hardware,
        model=spec,
        store=store,
        workload=Workload(batch=1, context_tokens=context_tokens),
    )
    if not placement.fits:
        raise ModelLoadError(
            f"The language model in {model_path} does not fit: {placement.message}"
        )
    return placement


def _compute_dtype(*, config: Any, dtype: str | None, cpu: bool) -> torch.dtype:
    """The dtype asked for; else the checkpoint's, except bf16/f16 on a CPU, which run
    several times slower there than float32 (few CPUs have fast half-precision math)."""
    if dtype:
        return _torch_dtype(dtype)
    stored = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(stored, str):
        stored = getattr(torch, stored, None)
    if not isinstance(stored, torch.dtype):
        return torch.float32
    if cpu and stored in (torch.bfloat16, torch.float16):
        return torch.float32
    return stored


def _stop_ids(*, model_path: Path, executor: StreamingModel, tokenizer: Any) -> tuple[int, ...]:
    ids = set(executor.eos_token_ids)
    try:
        eos = GenerationConfig.from_pretrained(model_path, local_files_only=True).eos_token_id
    except OSError:  # no generation_config.json
        eos = None
    if eos is not None:
        ids.update(eos if isinstance(eos, list | tuple) else [eos])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return tuple(sorted(int(i) for i in ids))


def _pad_id(*, tokenizer: Any, stop_ids: tuple[int, ...]) -> int:
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return stop_ids[0] if stop_ids else 0


def _context_length(*, config: Any, tokenizer: Any) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else None
    length = getattr(text or config, "max_position_embeddings", None)
    if not length:
        # Tokenizers without a limit report a huge sentinel (int(1e30)).
        limit = getattr(tokenizer, "model_max_length", None)
        length = limit if limit and limit < 10_000_000 else _FALLBACK_CONTEXT
    return int(length)


def _torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ModelLoadError(f"Unknown dtype {name!r}; expected e.g. float32, bfloat16, float16.")
    return dtype
