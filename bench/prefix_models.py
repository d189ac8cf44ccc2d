"""The random-weight Llamas `ragdoll bench prefix` writes: which layer shape, how many layers.

Prefix reuse saves the prefill of the reused tokens in every layer alike, so the ratio of
a turn's time to first token with and without it is a property of one layer's shape at
the prompt's sizes: the projections and MLP scale with the new tokens, the attention
with new tokens times context. The narrow default (hidden 512) spends a larger share of
each layer on attention than the models people run, which caps its ratio lower; "tinyllama"
is TinyLlama-1.1B's layer shape with fewer layers, so the forward's ratio
is the full model's at a fraction of its CPU time. Fewer layers only makes the per-question
costs outside the forward (search, tokenising) weigh more, so the ratio it gives is a
lower bound for the full model's. A shape's weights are random and float32, written with
engine/runtime/models/synthetic.py (the folder loads through the same code as a user's model);
its tokenizer is the synthetic one, so prompts count other tokens than a real tokenizer's.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from engine.runtime.models.synthetic import write_random_model


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    layers: int
    hidden: int
    mlp: int
    heads: int
    kv_heads: int


# "default" is the product path's model of the earlier rounds (docs/benchmarks-history.md,
# "A conversation's turns through the engine"), kept
# the default so that runs stay comparable with them; "tinyllama" is TinyLlama-1.1B's
# layer (hidden 2048, MLP 5632, 32 / 4 heads), 2 of its 22. Its vocabulary of 32000 is
# not copied: random weights pick ids past the synthetic tokenizer's ~800 as often as
# any, which decode to nothing, so no text (no first token) would come; the LM head
# runs on the prompt's last position only, where 32000 rows are ~0.1 % of the prefill.
SHAPES: dict[str, ModelShape] = {
    "default": ModelShape(layers=8, hidden=512, mlp=1408, heads=8, kv_heads=4),
    "tinyllama": ModelShape(layers=2, hidden=2048, mlp=5632, heads=32, kv_heads=4),
}
# The prompt path's model (a hand-built prompt on the executor alone), and the quick form's.
PROMPT_DEFAULT = ModelShape(layers=8, hidden=1024, mlp=2816, heads=16, kv_heads=4)
QUICK = ModelShape(layers=4, hidden=128, mlp=256, heads=4, kv_heads=2)


def shape_named(name: str, *, layers: int | None = None) -> ModelShape:
    """The shape called `name`, with `layers` layers when given."""
    try:
        shape = SHAPES[name]
    except KeyError:
        raise ValueError(f"unknown model shape {name!r}; expected {', '.join(SHAPES)}") from None
    if layers is not None:
        if layers < 1:
            raise ValueError(f"a model needs at least one layer, not {layers}")
        shape = replace(shape, layers=layers)
    return shape


def random_model(*, shape: ModelShape, context: int, parent: Path | None = None) -> Path:
    """A folder holding a random-weight Llama of `shape`, written once per shape and
    context under `parent` (the temp folder by default) and reused after."""
    name = (
        f"ragdoll-bench-prefix-{shape.layers}x{shape.hidden}x{shape.mlp}"
        f"-h{shape.heads}kv{shape.kv_heads}-{context}"
    )
    folder = (parent or Path(tempfile.gettempdir())) / name
    if not (folder / "config.json").is_file():
        write_random_model(
            folder=folder,
            architecture="llama",
            hidden_size=shape.hidden,
            num_layers=shape.layers,
            num_heads=shape.heads,
            num_kv_heads=shape.kv_heads,
            intermediate_size=shape.mlp,
            max_position_embeddings=context,
            dtype="float32",
        )
    return folder
