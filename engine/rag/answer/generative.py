"""Answers written by a local Hugging Face causal language model, with [n] citations.

The model runs on the layer-streaming executor (engine/runtime/executor) under the placement its
PlacementOwner hands it (engine/runtime/planner/owner.py), so a model larger than memory streams
from the disk instead of failing to load. The prompt is built by `build_prompt` alone.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import GenerationConfig

from engine.rag.answer.passages import Passage
from engine.rag.answer.prompt import build_prompt, encode_prompt
from engine.runtime.executor.compat import GenerateCompat
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, Sampling, TokenEvent, generate
from engine.runtime.executor.likelihood import continuation_logprobs
from engine.runtime.executor.prefix_cache import PrefixCache, prefix_cache_for
from engine.runtime.models.loading import LoadedModel
from engine.runtime.planner.placement import Placement
from engine.wire_events import Turn

# llama.cpp's defaults (repeat_penalty 1.1 over repeat_last_n 64 tokens), which the apps
# built on it keep: a small model decoding greedily otherwise loops ("You can use the set
# key noautotitle…" six times over, SmolLM2-135M). Only the last 64 tokens, so that the
# answer may still quote the sources' words.
REPETITION_PENALTY = 1.1
REPETITION_WINDOW = 64


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
    """A loaded causal LM, run by the layer-streaming executor, that streams answers to
    questions about passages. It is given the model and its placement and does not
    plan (engine/rag/answer/in_use.py `open_model` assembles the three)."""

    def __init__(
        self,
        *,
        model: LoadedModel,
        placement: Placement,
        on_degrade: Callable[[Placement], None] | None = None,
        stop_at_eos: bool = True,
    ):
        """`model` runs under `placement` (the PlacementOwner's, which it does not
        keep: the owner reports the placement in force); `on_degrade` hears each
        placement an out-of-memory recovery moves the model to (the owner's `demoted`).
        `stop_at_eos=False` is for benchmarks: every answer runs to its max_new_tokens
        (equal work for every system compared)."""
        files = model.files
        self.model_path = files.path
        self.name = files.name
        self.tokenizer = files.tokenizer
        self.context_length = files.context_length
        self.executor = model.executor
        self.model = GenerateCompat(model=self.executor)  # for code written against HF
        self.device = str(self.executor.device)
        self._on_degrade = on_degrade
        # KV of prompt starts reused across turns and requests; None turns reuse off.
        self.prefix_cache: PrefixCache | None = prefix_cache_for(
            placement=placement, device=self.executor.device
        )
        stop_ids = _stop_ids(
            model_path=files.path, executor=self.executor, tokenizer=self.tokenizer
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
        from engine.rag.answer.conversation import REWRITE_INSTRUCTIONS, rewrite_prompt_text

        user = rewrite_prompt_text(question=question, history=tuple(history))
        return self._instructed(
            system=REWRITE_INSTRUCTIONS, user=user, cue="Query:", max_new_tokens=max_new_tokens
        )

    def translate_request(
        self, *, question: str, language: str, max_new_tokens: int = 64
    ) -> GenerationRequest:
        """A question's translation into `language` (engine/rag/answer/translation.py)."""
        from engine.rag.answer.translation import instructions

        return self._instructed(
            system=instructions(language=language),
            user=question,
            cue="Translation:",
            max_new_tokens=max_new_tokens,
        )

    def _instructed(
        self, *, system: str, user: str, cue: str, max_new_tokens: int
    ) -> GenerationRequest:
        """A short request: `system`'s instructions for `user`'s text, in the model's
        chat template (merged into the user's turn where it has no system role), or as
        plain text ending in `cue` for a model without one."""
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            try:
                prompt = self.tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            except Exception:  # a template without a system role
                merged = [{"role": "user", "content": f"{system}\n\n{user}"}]
                prompt = self.tokenizer.apply_chat_template(
                    merged, tokenize=False, add_generation_prompt=True
                )
        else:
            prompt = f"{system}\n\n{user}\n\n{cue}"
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
        """Token events of a batch of requests (see engine/runtime/executor/generate.py). One
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
                sampling=Sampling(
                    temperature=max(temperature, 0.0),
                    seed=seed,
                    repetition_penalty=REPETITION_PENALTY,
                    repetition_window=REPETITION_WINDOW,
                ),
                pad_token_id=self._pad_id,
                cancelled=cancelled,
                incoming=arrivals if incoming is not None else None,
                prefix_cache=self.prefix_cache,
                on_degrade=self._on_degrade,
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

    def continuation_logprobs(self, *, contexts: Sequence[str], continuation: str) -> list[float]:
        """The summed log-probability of `continuation` after each context, in one
        batched pass under the answerer's lock (it waits for a running batch)."""
        encoded = [self.tokenizer(c, add_special_tokens=True)["input_ids"] for c in contexts]
        wanted = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
        with self._lock:
            return continuation_logprobs(
                model=self.executor, contexts=encoded, continuation=wanted, pad=self._pad_id
            )

    def close(self, *, wait_s: float = 30.0) -> None:
        """Free the executor, after the batch that runs now has ended (up to `wait_s`):
        freed under a running batch, the weight store's units vanished mid-step
        (`KeyError: 'layer.22'` at shutdown, issue #44). Callers cancel their answers
        first (the engine does at shutdown), so a batch ends within a step."""
        acquired = self._lock.acquire(timeout=wait_s)
        try:
            self._finalizer()
        finally:
            if acquired:
                self._lock.release()


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
