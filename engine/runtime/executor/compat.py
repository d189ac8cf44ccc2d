"""A `generate(input_ids=..., ...)` in the shape of transformers', run by the executor.

Code written against a transformers model (active profiling's generation sampler times
`model.generate` on batches) keeps working when the product's model is a
StreamingModel, and then times the executor the product really uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, Sampling, generate


class GenerateCompat:
    """`.device`, `.config` and `.generate(...)` of a causal LM, over a StreamingModel."""

    def __init__(self, *, model: StreamingModel) -> None:
        self.executor = model

    @property
    def device(self) -> torch.device:
        return self.executor.device

    @property
    def config(self) -> Any:
        return self.executor.config

    def generate(
        self,
        *,
        input_ids: torch.Tensor,  # (B, T), left padded where attention_mask is 0
        attention_mask: torch.Tensor | None = None,
        max_new_tokens: int = 20,
        min_new_tokens: int = 0,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        pad_token_id: int | None = None,
        stop: Callable[[], bool] | None = None,
        **ignored: Any,
    ) -> torch.Tensor:
        """(B, T + n): the inputs followed by each row's new tokens, padded with
        `pad_token_id` after a row stops; every row stops at the step where `stop()`
        first answers True."""
        ids = input_ids.cpu()
        mask = attention_mask.cpu() if attention_mask is not None else torch.ones_like(ids)
        requests = [
            GenerationRequest(
                prompt_ids=tuple(int(t) for t in row[m.bool()]),
                max_new_tokens=max_new_tokens,
                min_new_tokens=min_new_tokens,
            )
            for row, m in zip(ids, mask, strict=True)
        ]
        sampling = Sampling(
            temperature=temperature if do_sample else 0.0,
            top_k=top_k,
            top_p=top_p,
            repetition_penalty=repetition_penalty,
        )
        new: list[list[int]] = [[] for _ in requests]
        for event in generate(
            model=self.executor,
            requests=requests,
            sampling=sampling,
            pad_token_id=pad_token_id,
            cancelled=(lambda _row: stop()) if stop is not None else None,
        ):
            new[event.request].append(event.token_id)
        pad = pad_token_id if pad_token_id is not None else 0
        width = max((len(n) for n in new), default=0)
        out = torch.full((ids.shape[0], ids.shape[1] + width), pad, dtype=ids.dtype)
        out[:, : ids.shape[1]] = ids
        for b, tokens in enumerate(new):
            out[b, ids.shape[1] : ids.shape[1] + len(tokens)] = torch.tensor(
                tokens, dtype=ids.dtype
            )
        return out.to(input_ids.device)
