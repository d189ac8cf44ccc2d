"""Batched generation on a StreamingModel: prefill, then one token per decode step.

Requests of different lengths share a batch with left padding: every row's last prompt
token sits in the last column, so one decode step appends one column for all rows.
Positions count real tokens only (cumsum of the mask), which makes a padded row compute
exactly what it would alone. A row stops on eos or at its max_new_tokens; the loop ends
when every row has stopped. Token ids are yielded as soon as each step is sampled.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from engine.executor.forward import StreamingModel


@dataclass(frozen=True, kw_only=True)
class GenerationRequest:
    prompt_ids: tuple[int, ...]
    max_new_tokens: int


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """temperature 0 is greedy; otherwise top-k / top-p sampling with a seeded generator."""

    temperature: float = 0.0
    top_k: int = 0  # 0: no limit
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class TokenEvent:
    request: int  # index into the requests given
    token_id: int
    finished: bool  # this is the request's last token


def generate(
    *,
    model: StreamingModel,
    requests: Sequence[GenerationRequest],
    sampling: Sampling = Sampling(),
    pad_token_id: int | None = None,
) -> Iterator[TokenEvent]:
    """Yield each request's new tokens, step by step, until every request has stopped."""
    if not requests:
        return
    for r in requests:
        if not r.prompt_ids:
            raise ValueError("a prompt must have at least one token")
    pad = pad_token_id if pad_token_id is not None else _pad_of(model)
    eos = set(model.eos_token_ids)
    ids, mask = left_pad([list(r.prompt_ids) for r in requests], pad=pad)  # (B, T)
    batch = len(requests)
    budget = torch.tensor([r.max_new_tokens for r in requests])
    done = budget <= 0  # a request for no tokens yields nothing
    if bool(done.all()):
        return
    produced = torch.zeros(batch, dtype=torch.long)
    generator = torch.Generator().manual_seed(sampling.seed)
    cache = model.new_cache()

    positions = positions_of(mask)  # (B, T)
    logits = model.forward(
        input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, phase="prefill"
    )  # (B, 1, V)
    while not bool(done.all()):
        next_ids = sample(logits[:, -1, :].float().cpu(), sampling=sampling, generator=generator)
        for i in range(batch):
            if done[i]:
                continue
            token = int(next_ids[i])
            produced[i] += 1
            finished = token in eos or int(produced[i]) >= int(budget[i])
            if finished:
                done[i] = True
            yield TokenEvent(request=i, token_id=token, finished=finished)
        if bool(done.all()):
            break
        # Stopped rows keep computing with pad tokens (cheaper than reshaping the cache
        # every time a row stops); their tokens are not yielded.
        step_ids = torch.where(done, torch.tensor(pad), next_ids).unsqueeze(1)  # (B, 1)
        mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype)], dim=1)
        positions = positions[:, -1:] + 1  # (B, 1)
        logits = model.forward(
            input_ids=step_ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            phase="decode",
        )


def generate_ids(
    *,
    model: StreamingModel,
    requests: Sequence[GenerationRequest],
    sampling: Sampling = Sampling(),
) -> list[list[int]]:
    """All new tokens per request (tests, benchmarks)."""
    out: list[list[int]] = [[] for _ in requests]
    for event in generate(model=model, requests=requests, sampling=sampling):
        out[event.request].append(event.token_id)
    return out


def left_pad(prompts: list[list[int]], *, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask), both (B, T_max), prompts right-aligned."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return ids, mask


def positions_of(mask: torch.Tensor) -> torch.Tensor:
    """Position of each token among its row's real tokens; padding gets 0 (as HF does)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def sample(logits: torch.Tensor, *, sampling: Sampling, generator: torch.Generator) -> torch.Tensor:
    """(B, V) float logits → (B,) token ids."""
    if sampling.temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits / sampling.temperature
    if sampling.top_k > 0:
        k = min(sampling.top_k, logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        drop = sorted_probs.cumsum(-1) - sorted_probs > sampling.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _pad_of(model: StreamingModel) -> int:
    pad = model.config.pad_token_id
    if pad is not None:
        return int(pad)
    return model.eos_token_ids[0] if model.eos_token_ids else 0
