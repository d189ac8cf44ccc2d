"""The prompt ids the engine fed its local model for one question, rebuilt outside it.

The engine's answer carries its sources (the OpenAI API's `citations` extension: each
passage's text, path and page, in the order the model was given them) and the prompt's
length as its tokenizer counted it (`usage.prompt_tokens`). Fed to the engine's own
prompt builder (`build_prompt`, `encode_prompt`) with the same tokenizer and budget as
`GenerativeAnswerer.prompt_request`, they give the very ids; the length the engine
reported is the check. Nothing in the engine changes for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.rag.answer.passages import Passage


@dataclass(frozen=True, kw_only=True)
class PromptIds:
    ids: tuple[int, ...]
    checked: bool  # the length is the one the engine reported


class PromptRebuilder:
    """The tokenizer and context length of a model folder as the engine reads them."""

    def __init__(self, *, model_folder: Path) -> None:
        from engine.runtime.models.loading import read_model_files

        files = read_model_files(model_path=model_folder)
        self._tokenizer: Any = files.tokenizer
        self._context_length = files.context_length

    def rebuild(
        self,
        *,
        question: str,
        citations: list[dict[str, Any]],
        max_new_tokens: int,
        engine_prompt_tokens: int | None,
    ) -> PromptIds:
        from engine.rag.answer.prompt import build_prompt, encode_prompt

        passages = [
            Passage(index=int(c["index"]), text=c["text"], path=c["path"], page=c.get("page"))
            for c in sorted(citations, key=lambda c: int(c["index"]))
        ]
        # As GenerativeAnswerer.prompt_request budgets it (engine/rag/answer/generative.py).
        max_new = max(1, min(max_new_tokens, self._context_length // 2))
        prompt = build_prompt(
            tokenizer=self._tokenizer,
            question=question,
            passages=passages,
            max_prompt_tokens=self._context_length - max_new,
        )
        ids = encode_prompt(tokenizer=self._tokenizer, prompt=prompt, return_tensors=None)
        out = tuple(int(i) for i in ids["input_ids"])
        return PromptIds(ids=out, checked=engine_prompt_tokens == len(out))
