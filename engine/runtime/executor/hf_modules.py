"""Transformers' own modules as StreamingModel calls them, where decoder.py does not
compute a layer (`lean=False`, a model decoder.py does not run, packed layers decoded a
layer or a matrix at a time, KV on the host): the head unit, a module called on a unit's
tensors, and the mask each layer's attention kind reads.

Kept apart from forward.py, which decides where a unit's tensors come from and which path
computes them: what is here reads only transformers' module layout and config, never the
placement.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from transformers import DynamicCache, PretrainedConfig
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask


class Head(nn.Module):
    """Final norm + LM head as one unit (they always travel together)."""

    def __init__(self, *, norm: nn.Module, lm_head: nn.Module) -> None:
        super().__init__()
        self.norm = norm
        self.lm_head = lm_head

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(hidden))


def apply(
    module: nn.Module, *, tensors: dict[str, torch.Tensor], args: tuple, kwargs: dict
) -> torch.Tensor:
    # A unit's tensors name every parameter its module uses (the store hands the tied
    # head the embedding's matrix under lm_head's name), so functional_call's search for
    # tied parameters, a walk of the module at every call (about 4 % of a resident int4
    # decode step's time on one thread), has nothing to find.
    return functional_call(module, tensors, args, kwargs, tie_weights=False)


def layer_types(config: PretrainedConfig) -> list[str]:
    types = getattr(config, "layer_types", None)
    if types:
        return list(types)
    # Mistral has no layer_types: every layer uses the window when one is set.
    kind = (
        "sliding_attention"
        if config.model_type == "mistral" and getattr(config, "sliding_window", None)
        else "full_attention"
    )
    return [kind] * config.num_hidden_layers


def masks(
    hidden: torch.Tensor,
    *,
    config: PretrainedConfig,
    kinds: list[str],
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    cache: DynamicCache,
) -> dict[str, torch.Tensor | None]:
    """The mask for each attention kind among `kinds` (`layer_types`) over the
    embedded `hidden`, by transformers."""
    kwargs = {
        "config": config,
        "inputs_embeds": hidden,
        "attention_mask": attention_mask,
        "past_key_values": cache,
        "position_ids": position_ids,
    }
    made: dict[str, torch.Tensor | None] = {}
    if "full_attention" in kinds:
        made["full_attention"] = create_causal_mask(**kwargs)  # type: ignore[arg-type]
    if "sliding_attention" in kinds:
        made["sliding_attention"] = create_sliding_window_causal_mask(**kwargs)  # type: ignore[arg-type]
    return made
