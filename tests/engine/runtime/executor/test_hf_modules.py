"""Transformers' modules as the executor calls them: on a unit's tensors, never their own,
and each layer's attention kind as the masks are made for it."""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig, MistralConfig

from engine.runtime.executor.hf_modules import Head, apply, layer_types


def test_the_head_computes_on_the_unit_s_tensors() -> None:
    with torch.device("meta"):
        head = Head(norm=nn.LayerNorm(4, elementwise_affine=False), lm_head=nn.Linear(4, 3))
    weight, bias = torch.randn(3, 4), torch.randn(3)
    hidden = torch.randn(2, 4)
    got = apply(
        head,
        tensors={"lm_head.weight": weight, "lm_head.bias": bias},
        args=(hidden,),
        kwargs={},
    )
    want = nn.functional.linear(nn.functional.layer_norm(hidden, (4,)), weight, bias)
    assert torch.allclose(got, want)


def test_layer_types_follow_the_config() -> None:
    assert layer_types(LlamaConfig(num_hidden_layers=2)) == ["full_attention"] * 2
    windowed = MistralConfig(num_hidden_layers=3, sliding_window=8)
    assert layer_types(windowed) == ["sliding_attention"] * 3
    assert layer_types(MistralConfig(num_hidden_layers=1, sliding_window=None)) == [
        "full_attention"
    ]
