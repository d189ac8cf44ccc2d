"""How likely a language model finds a continuation after each of several contexts.

One batched prefill, no generation: every row is a context followed by the same
continuation, left padded so that the continuations line up at the right edge, and
only the last positions go through the LM head (the head over every position of a
batch of 20 rows of 150 tokens would be 20·150·V products for nothing). The model's
reranking reads it (engine/rag/answer/model_ranker.py): the question's likelihood after
each passage.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import left_pad, positions_of


@torch.inference_mode()
def continuation_logprobs(
    *,
    model: StreamingModel,
    contexts: Sequence[Sequence[int]],
    continuation: Sequence[int],
    pad: int,
) -> list[float]:
    """The summed log-probability of `continuation`'s tokens after each context, in
    one forward pass (the caller keeps other work off the model meanwhile)."""
    if not contexts:
        return []
    wanted = [int(t) for t in continuation]
    if not wanted:
        return [0.0] * len(contexts)
    if any(not c for c in contexts):
        raise ValueError("every context needs at least one token")
    rows = [[int(t) for t in c] + wanted for c in contexts]
    ids, mask = left_pad(rows, pad=pad)
    n = len(wanted)
    # Position j's logits predict token j + 1: the last context token's predict the
    # continuation's first, and the last position's predict nothing asked for.
    logits = model.forward(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions_of(mask),
        cache=model.new_cache(),
        phase="prefill",
        tail=n + 1,
    )[:, :-1, :]
    logp = torch.log_softmax(logits.float(), dim=-1)
    target = torch.tensor(wanted, dtype=torch.long, device=logp.device).expand(len(rows), n)
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, n)
    return [float(v) for v in picked.sum(dim=-1).cpu()]
