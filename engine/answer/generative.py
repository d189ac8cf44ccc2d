"""Answers written by a local Hugging Face causal language model, with [n] citations.

Plain transformers generation: the model is loaded whole onto one device. The prompt is
built by `build_prompt` alone so that other executors can reuse it unchanged.
"""

from __future__ import annotations

import copy
import os
import re
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import snapshot_download
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    StoppingCriteria,
    StoppingCriteriaList,
    TextIteratorStreamer,
)

from engine.answer.passages import Passage
from engine.errors import ModelLoadError

# A repo id is "name" or "org/name" (see huggingface_hub's validate_repo_id).
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")
# Below this many tokens a truncated source is more confusing than useful.
_MIN_SOURCE_TOKENS = 24
# Used when neither the config nor the tokenizer says how long a context can be.
_FALLBACK_CONTEXT = 2048


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


def load_system_prompt() -> str:
    return (
        resources.files("resources")
        .joinpath("prompts/answer_system.txt")
        .read_text(encoding="utf-8")
        .strip()
    )


def build_prompt(
    *, tokenizer: Any, question: str, passages: list[Passage], max_prompt_tokens: int
) -> str:
    """The full prompt text: system prompt, numbered sources, question.

    Sources are kept in the order given (best first); the last one that does not fit is
    cut and the rest dropped, so that the prompt stays within `max_prompt_tokens` as
    counted by `count_prompt_tokens`.
    """
    system = load_system_prompt()
    question = " ".join(question.split())

    def render(blocks: list[str], q: str) -> str:
        return _render(tokenizer=tokenizer, system=system, sources=blocks, question=q)

    frame = count_prompt_tokens(tokenizer=tokenizer, prompt=render([], question))
    if frame > max_prompt_tokens:
        # Only an absurdly long question gets here; its start says what is asked.
        ids = _ids(tokenizer, question)
        question = _truncate(tokenizer, question, max(1, len(ids) - (frame - max_prompt_tokens)))
        frame = count_prompt_tokens(tokenizer=tokenizer, prompt=render([], question))
        if frame > max_prompt_tokens:
            raise ValueError(
                f"max_prompt_tokens={max_prompt_tokens} cannot hold even the instructions "
                f"({frame} tokens)"
            )

    budget = max_prompt_tokens - frame
    blocks: list[str] = []
    for passage in passages:
        block = _source_block(passage)
        # +2 for the blank line between sources; the final check below corrects drift.
        cost = len(_ids(tokenizer, block)) + 2
        if cost <= budget:
            blocks.append(block)
            budget -= cost
            continue
        if budget >= _MIN_SOURCE_TOKENS:
            blocks.append(_truncate(tokenizer, block, budget - 2) + " …")
        break

    # Token counts of pieces do not add up exactly (merges across joins): shrink the last
    # source until the whole prompt fits.
    prompt = render(blocks, question)
    while blocks:
        excess = count_prompt_tokens(tokenizer=tokenizer, prompt=prompt) - max_prompt_tokens
        if excess <= 0:
            break
        keep = len(_ids(tokenizer, blocks[-1])) - excess - 2
        if keep < _MIN_SOURCE_TOKENS:
            blocks.pop()
        else:
            blocks[-1] = _truncate(tokenizer, blocks[-1], keep) + " …"
        prompt = render(blocks, question)
    return prompt


def count_prompt_tokens(*, tokenizer: Any, prompt: str) -> int:
    """Tokens of a prompt as `GenerativeAnswerer` feeds it to the model."""
    return len(_encode_prompt(tokenizer=tokenizer, prompt=prompt, return_tensors=None)["input_ids"])


def _encode_prompt(*, tokenizer: Any, prompt: str, return_tensors: str | None) -> Any:
    # Chat templates write their own bos; adding special tokens again would double it.
    add_special = not getattr(tokenizer, "chat_template", None)
    return tokenizer(prompt, add_special_tokens=add_special, return_tensors=return_tensors)


def _render(*, tokenizer: Any, system: str, sources: list[str], question: str) -> str:
    sources_text = "\n\n".join(sources) if sources else "(no sources were found)"
    user = f"Sources:\n{sources_text}\n\nQuestion: {question}"
    if not getattr(tokenizer, "chat_template", None):
        return f"{system}\n\n{user}\n\nAnswer:"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:
        # Some templates (Gemma, older Mistral) refuse a system role: fold it into the
        # user's turn instead.
        merged = [{"role": "user", "content": f"{system}\n\n{user}"}]
        return tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)


def _source_block(passage: Passage) -> str:
    where = Path(passage.path).name or passage.path
    if passage.page is not None:
        where = f"{where}, p. {passage.page}"
    return f"[{passage.index}] ({where}) {' '.join(passage.text.split())}"


def _ids(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _truncate(tokenizer: Any, text: str, max_tokens: int) -> str:
    ids = _ids(tokenizer, text)[: max(0, max_tokens)]
    # A cut inside a multi-byte character decodes to U+FFFD; drop it.
    return tokenizer.decode(ids).rstrip("\ufffd").rstrip()


class _EventStop(StoppingCriteria):
    """Stops generation as soon as any of the events is set."""

    def __init__(self, *, events: list[threading.Event]) -> None:
        self._events = events

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        stop = any(e.is_set() for e in self._events)
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


class GenerativeAnswerer:
    """A loaded causal LM that streams answers to questions about passages."""

    def __init__(self, *, model_path: Path, device: str | None = None, dtype: str | None = None):
        _check_model_folder(model_path)
        self.model_path = model_path
        self.name = display_name(model_path=model_path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # "auto" keeps the checkpoint's own dtype: converting a bf16 model to float32
        # would double its memory.
        torch_dtype: torch.dtype | str = _torch_dtype(dtype) if dtype else "auto"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(
                model_path,
                local_files_only=True,
                use_safetensors=True,
                dtype=torch_dtype,
            )
            self.model.to(self.device)
            self.model.eval()
        except Exception as e:
            raise ModelLoadError(f"Could not load the language model in {model_path}: {e}") from e
        self.context_length = _context_length(model=self.model, tokenizer=self.tokenizer)

    def stream(
        self,
        *,
        question: str,
        passages: list[Passage],
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        """Yield the answer's text piece by piece; stops early when `cancel` is set."""
        # Keep at least half the context for the sources: an answer without them is useless.
        max_new_tokens = max(1, min(max_new_tokens, self.context_length // 2))
        prompt = build_prompt(
            tokenizer=self.tokenizer,
            question=question,
            passages=passages,
            max_prompt_tokens=self.context_length - max_new_tokens,
        )
        inputs = _encode_prompt(tokenizer=self.tokenizer, prompt=prompt, return_tensors="pt")
        inputs = {k: v.to(self.device) for k, v in inputs.items()}

        stop = threading.Event()  # set when the caller stops reading
        events = [stop] if cancel is None else [stop, cancel]
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        generation_config = self._generation_config(
            temperature=temperature, max_new_tokens=max_new_tokens
        )
        failure: list[BaseException] = []

        def run() -> None:
            try:
                with torch.inference_mode():
                    self.model.generate(
                        **inputs,
                        generation_config=generation_config,
                        streamer=streamer,
                        stopping_criteria=StoppingCriteriaList([_EventStop(events=events)]),
                    )
            except BaseException as e:
                failure.append(e)
                # generate() ends the streamer only when it succeeds; without this the
                # reader would wait forever.
                streamer.end()

        thread = threading.Thread(target=run, name="ragdoll-generate", daemon=True)
        thread.start()
        try:
            for piece in streamer:
                if cancel is not None and cancel.is_set():
                    break
                if piece:
                    yield piece
        finally:
            stop.set()
            thread.join()
        if failure:
            raise failure[0]

    def _generation_config(self, *, temperature: float, max_new_tokens: int) -> Any:
        config = copy.deepcopy(self.model.generation_config)
        config.max_new_tokens = max_new_tokens
        config.max_length = None
        if config.pad_token_id is None:
            config.pad_token_id = self.tokenizer.pad_token_id or self.tokenizer.eos_token_id
        if temperature > 0:
            config.do_sample = True
            config.temperature = temperature
        else:
            # Greedy: drop the sampling settings a model ships with so that transformers
            # does not warn that they are ignored.
            config.do_sample = False
            config.temperature = None
            config.top_p = None
            config.top_k = None
        return config


def _context_length(*, model: Any, tokenizer: Any) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
    length = getattr(config or model.config, "max_position_embeddings", None)
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
