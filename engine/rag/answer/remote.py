"""Answers written by a model on an OpenAI-compatible server (vLLM, Ollama, llama.cpp's
server) instead of the local executor: the same prompt layout as GenerativeAnswerer
(engine/rag/answer/prompt.py) sent as chat messages, streamed back piece by piece.

The engine keeps retrieval, the relevance gate, citations and conversations; only the
prompt of a question that passed the gate (its passages included) leaves the machine,
to the one server the person named (engine/rag/answer/server_client.py).
"""

from __future__ import annotations

import re
import statistics
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rag.answer.generative import GenerationRecord
from engine.rag.answer.passages import Passage
from engine.rag.answer.prompt import build_messages
from engine.rag.answer.server_client import ChatDelta, ServerEndpoint, chat_stream, http_client
from engine.wire_events import Turn

# The context assumed when the server does not say (vLLM's /v1/models does:
# max_model_len): Ollama's and llama.cpp's default windows are 2048-4096.
DEFAULT_SERVER_CONTEXT = 4096
# A token is about 4 characters of English; counting 3 leaves room for the server's
# tokenizer on code and other scripts, so a fitted prompt is not cut by the server.
_CHARS_PER_TOKEN = 3
_PIECES = re.compile(rf"\w{{1,{_CHARS_PER_TOKEN}}}|\s+|[^\w\s]")
LATENCY_SAMPLES = 32  # first-token times kept for the status (the median is shown)


class EstimatingTokenizer:
    """Counts tokens for prompt fitting without the server's tokenizer: pieces of at
    most 3 word characters, each space run and each other character one token (an
    over-estimate of BPE on English). `decode` gives back the text of what it encoded,
    so a source cut to a budget is cut at a piece boundary."""

    chat_template = "chatml"  # counts a chat layout; the server applies its own template
    eos_token_id = None
    pad_token_id = None

    def __init__(self) -> None:
        self._pieces: dict[str, int] = {}
        self._texts: list[str] = []

    def __call__(self, text: str, add_special_tokens: bool = True, **_: Any) -> dict[str, Any]:
        ids = []
        for piece in _PIECES.findall(text):
            if piece not in self._pieces:
                self._pieces[piece] = len(self._texts)
                self._texts.append(piece)
            ids.append(self._pieces[piece])
        return {"input_ids": ids}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(self._texts[i] for i in ids)

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], tokenize: bool = False, **_: Any
    ) -> str:
        # ChatML's frame: about what Qwen, vLLM's defaults and Ollama add per message.
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + "<|im_start|>assistant\n"


@dataclass(frozen=True, kw_only=True)
class ServerRequest:
    """One question for the server: its chat messages and answer length."""

    messages: tuple[dict[str, str], ...]
    max_new_tokens: int
    prompt_chars: int


class RemoteAnswerer:
    """A model on an OpenAI-compatible server, answering as GenerativeAnswerer does:
    `stream` for one question, and `prompt_request` / `rewrite_request` for the
    pipeline's concurrent rows (engine/rag/pipeline/remote_rows.py)."""

    remote = True  # the seam's marker: rows go to the server, not to an executor

    def __init__(
        self,
        *,
        endpoint: ServerEndpoint,
        context_length: int = DEFAULT_SERVER_CONTEXT,
        concurrency: int = 8,
    ) -> None:
        """`concurrency`: the most requests in flight at once (the server's continuous
        batching batches them); the pipeline's generation batch is capped to it."""
        self.endpoint = endpoint
        self.name = endpoint.model
        self.context_length = context_length
        self.concurrency = max(1, concurrency)
        self.tokenizer = EstimatingTokenizer()
        self.device = "server"
        self.last_generation: GenerationRecord | None = None
        self.last_cached_tokens: int | None = None  # the server's prefix-cache hit, if told
        self._first_token_s: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # One client for every request: its connections and TLS set-up are reused.
        self._http = http_client(endpoint=endpoint)

    # -- requests --------------------------------------------------------------------

    def prompt_request(
        self,
        *,
        question: str,
        passages: list[Passage],
        max_new_tokens: int = 256,
        history: Sequence[Turn] = (),
    ) -> ServerRequest:
        """One question as chat messages, fitted as build_prompt fits a local prompt."""
        max_new_tokens = max(1, min(max_new_tokens, self.context_length // 2))
        messages = build_messages(
            tokenizer=self.tokenizer,
            question=question,
            passages=passages,
            max_prompt_tokens=self.context_length - max_new_tokens,
            history=history,
        )
        return _request(messages=messages, max_new_tokens=max_new_tokens)

    def rewrite_request(
        self, *, question: str, history: Sequence[Turn], max_new_tokens: int = 48
    ) -> ServerRequest:
        """A follow-up's rewrite into a standalone search query."""
        from engine.rag.answer.conversation import REWRITE_INSTRUCTIONS, rewrite_prompt_text

        user = rewrite_prompt_text(question=question, history=tuple(history))
        messages = [
            {"role": "system", "content": REWRITE_INSTRUCTIONS},
            {"role": "user", "content": user},
        ]
        return _request(messages=messages, max_new_tokens=max_new_tokens)

    def translate_request(
        self, *, question: str, language: str, max_new_tokens: int = 64
    ) -> ServerRequest:
        """A question's translation into `language` (engine/rag/answer/translation.py)."""
        from engine.rag.answer.translation import instructions

        messages = [
            {"role": "system", "content": instructions(language=language)},
            {"role": "user", "content": question},
        ]
        return _request(messages=messages, max_new_tokens=max_new_tokens)

    # -- answers ---------------------------------------------------------------------

    def deltas(
        self,
        *,
        request: ServerRequest,
        temperature: float = 0.0,
        cancel: threading.Event | None = None,
    ) -> Iterator[ChatDelta]:
        """The server's completion of one request; ModelServerError on any failure.
        Notes the first token's latency and the prefix-cache hit the server reports."""
        from time import monotonic

        started = monotonic()
        first = True
        for delta in chat_stream(
            endpoint=self.endpoint,
            messages=request.messages,
            max_tokens=request.max_new_tokens,
            temperature=temperature,
            cancel=cancel,
            http=self._http,
        ):
            if self._closed.is_set():
                return
            if delta.text and first:
                first = False
                with self._lock:
                    self._first_token_s.append(monotonic() - started)
            if delta.cached_tokens is not None:
                self.last_cached_tokens = delta.cached_tokens
            yield delta

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
        """Yield the answer's text piece by piece (GenerativeAnswerer.stream's contract)."""
        request = self.prompt_request(
            question=question, passages=passages, max_new_tokens=max_new_tokens, history=history
        )
        generated, prompt_tokens, stopped = 0, 0, False
        try:
            for delta in self.deltas(request=request, temperature=temperature, cancel=cancel):
                if delta.prompt_tokens is not None:
                    prompt_tokens = delta.prompt_tokens
                if delta.text:
                    generated += 1
                    yield delta.text
            stopped = cancel is not None and cancel.is_set()
        finally:
            self.last_generation = GenerationRecord(
                prompt_tokens=prompt_tokens, generated_tokens=generated, cancelled=stopped
            )

    def first_token_ms(self) -> float | None:
        """The median time to the first token of recent answers, as measured here
        (network included); None before the first."""
        with self._lock:
            samples = list(self._first_token_s)
        return round(statistics.median(samples) * 1000.0, 1) if samples else None

    def close(self, *, wait_s: float = 0.0) -> None:
        """Streams still open stop at their next piece (their connections close)."""
        self._closed.set()
        self._http.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()


def _request(*, messages: Sequence[dict[str, str]], max_new_tokens: int) -> ServerRequest:
    return ServerRequest(
        messages=tuple(messages),
        max_new_tokens=max_new_tokens,
        prompt_chars=sum(len(m["content"]) for m in messages),
    )
