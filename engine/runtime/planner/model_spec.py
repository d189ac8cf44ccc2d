"""What a causal LM costs in memory, read from its config.json alone (no weights).

The planner needs bytes, not modules: the weights of each decoder layer, of the
embedding and of the LM head; the KV cache per token; and the compute workspace
H(B) of one forward step. All of it follows from a handful of config fields for
the dense decoder families below, and loading nothing keeps planning instant even
for a 70B model that is not on this machine.

Workspace H — an upper bound on the temporaries of one decoder layer plus the logits,
for `batch` sequences that each process `query` new tokens against `context` cached
tokens (prefill: query = context = prompt length; decode: query = 1). With
N = batch·query, a = bytes per activation (the weight dtype), h = hidden size,
I = MLP intermediate size, q_dim = heads·head_dim, kv_dim = kv_heads·head_dim:

    activations = N·a·(3h + 2·q_dim + 2·kv_dim)   residual, normed input, o_proj output;
                                                   q and the attention output; k and v
    mask        = batch·query·context·a            the 4-D attention mask SDPA is given
                                                   (boolean or in the activation dtype)
    mlp         = 3·N·I·a                          gate, up, and act(gate)·up
    logits      = batch·V·(a+4)                    last position only, plus an fp32 copy
    decoded     = K_b                              layers computed in their kernel forms: a
                                                   prefill's buffer for one matrix decoded
                                                   (its bfloat16 copy and integers)
                or  2·L_d                          compressed layers decoded whole: the
                                                   layer computing and the one being
                                                   decoded, in the compute dtype
                or  M_d                            compressed layers decoded one matrix at
                                                   a time (a CPU streaming them from the
                                                   disk): the largest matrix in the
                                                   compute dtype, its uint8 scratch and
                                                   one layer's norms and biases
    H           = activations + mask + mlp + logits + decoded

The executor runs transformers' SDPA attention (the "sdpa" implementation, on CPU and
GPU); its kernels never materialise the batch·heads·query·context scores that eager
attention would (heads·(a+4)/a times the mask: 192× for a 64-head bf16 model), so the
scores are not counted. The terms never all coexist, so the sum is an upper bound.
Prefill must keep only the last position's logits (Hugging Face `logits_to_keep=1`).

Compressed weights: the weights are held as stored (GGML blocks of a GGUF file, bf16
computed in float32; engine/runtime/executor/packed.py), so `layer_bytes`, `embed_bytes` and
`head_bytes` are the stored bytes when engine/runtime/planner/stored.py's `load_held_spec` finds
the files, `decoded_layer_bytes` is one layer in the compute dtype and
`decoded_matrix_bytes` M_d. Which of the two the executor holds is its decode mode
(engine/runtime/executor/packed.py `choose_decode`), which depends on the placement: the planner
passes `per_matrix` to the workspace where the executor will decode per matrix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from engine.errors import UnsupportedArchitectureError

DTYPE_BYTES: Mapping[str, int] = MappingProxyType(
    {
        "float32": 4,
        "float": 4,
        "fp32": 4,
        "float16": 2,
        "half": 2,
        "fp16": 2,
        "bfloat16": 2,
        "bf16": 2,
        "float64": 8,
        "double": 8,
    }
)

# A model computed in its kernel forms (engine/runtime/executor/forward.py) prefills a longer
# prompt in chunks of this many tokens, layer by layer: a prefill's activations are then a
# chunk's (llama.cpp's default micro-batch is 512 too), each matrix still decoded once.
PREFILL_CHUNK_TOKENS = 512

# Transformers' own default when a config names no dtype.
_DEFAULT_DTYPE = "float32"

_REQUIRED_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_hidden_layers",
    "vocab_size",
)


@dataclass(frozen=True, kw_only=True)
class _Family:
    """How one model_type lays out its parameters, with transformers' config defaults
    (a config.json may omit any field whose value is the default)."""

    tie_default: bool
    head_dim_default: int | None  # None: hidden_size // num_attention_heads
    kv_heads_default: int | None  # None: num_attention_heads
    qkv_bias: bool | None  # fixed q/k/v bias (Qwen2); None: follows attention_bias
    o_bias_follows_config: bool  # o_proj bias = attention_bias
    has_mlp_bias_option: bool
    norms_per_layer: int
    qk_norm: bool  # per-head RMSNorm on q and k (Qwen3, Gemma3)


_FAMILIES: Mapping[str, _Family] = MappingProxyType(
    {
        "llama": _Family(
            tie_default=False,
            head_dim_default=None,
            kv_heads_default=None,
            qkv_bias=None,
            o_bias_follows_config=True,
            has_mlp_bias_option=True,
            norms_per_layer=2,
            qk_norm=False,
        ),
        "mistral": _Family(
            tie_default=False,
            head_dim_default=None,
            kv_heads_default=8,
            qkv_bias=False,
            o_bias_follows_config=False,
            has_mlp_bias_option=False,
            norms_per_layer=2,
            qk_norm=False,
        ),
        "qwen2": _Family(
            tie_default=False,
            head_dim_default=None,
            kv_heads_default=32,
            qkv_bias=True,
            o_bias_follows_config=False,
            has_mlp_bias_option=False,
            norms_per_layer=2,
            qk_norm=False,
        ),
        "qwen3": _Family(
            tie_default=False,
            head_dim_default=128,
            kv_heads_default=32,
            qkv_bias=None,
            o_bias_follows_config=True,
            has_mlp_bias_option=False,
            norms_per_layer=2,
            qk_norm=True,
        ),
        "gemma": _Family(
            tie_default=True,
            head_dim_default=256,
            kv_heads_default=16,
            qkv_bias=None,
            o_bias_follows_config=True,
            has_mlp_bias_option=False,
            norms_per_layer=2,
            qk_norm=False,
        ),
        "gemma2": _Family(
            tie_default=True,
            head_dim_default=256,
            kv_heads_default=4,
            qkv_bias=None,
            o_bias_follows_config=True,
            has_mlp_bias_option=False,
            norms_per_layer=4,
            qk_norm=False,
        ),
        "gemma3_text": _Family(
            tie_default=True,
            head_dim_default=256,
            kv_heads_default=4,
            qkv_bias=None,
            o_bias_follows_config=True,
            has_mlp_bias_option=False,
            norms_per_layer=4,
            qk_norm=True,
        ),
    }
)

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_FAMILIES)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Memory facts of one model. Byte counts are exact for the config's dtype:
    sum(layer_bytes) + embed_bytes + head_bytes + final_norm_bytes is the size of
    every parameter the model holds."""

    name: str
    model_type: str
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    dtype: str
    dtype_bytes: int
    tie_word_embeddings: bool
    layer_bytes: tuple[int, ...]
    embed_bytes: int
    head_bytes: int  # 0 when tied: the head reuses the embedding matrix
    final_norm_bytes: int
    kv_bytes_per_token: int  # K and V of every layer for one token
    # Compressed layers (held as stored, decoded per use): one layer decoded into the
    # compute dtype; 0 when the layers are held in the compute dtype.
    decoded_layer_bytes: int = 0
    # What decoding one matrix at a time holds instead (M_d above); 0 when the layers are
    # held in the compute dtype or it is not known (then 2·L_d is counted either way).
    decoded_matrix_bytes: int = 0
    weight_format: str = ""  # e.g. "Q4_0" or "BF16" when compressed; "" when not
    parameters: int = 0  # 0: weight_bytes // dtype_bytes (uncompressed)
    # The layers are computed in their compressed kernel forms (a GGUF model on a CPU,
    # engine/runtime/executor/kernel_forms.py): nothing is decoded per use or at load, and a
    # prefill decodes one matrix at a time into a buffer of this many bytes (its
    # bfloat16 copy and its integers), whatever the placement.
    kernel_buffer_bytes: int = 0
    # A kernel-form prefill of several chunks keeps one layer's matrices decoded for
    # all of them (`Workspace.keeping_decoded`), unless its layers stream from the disk:
    # then the RAM goes to layers, which spare a disk read every step.
    kept_layer_bytes: int = 0

    @property
    def computed_compressed(self) -> bool:
        return self.kernel_buffer_bytes > 0

    @property
    def weight_bytes(self) -> int:
        return sum(self.layer_bytes) + self.embed_bytes + self.head_bytes + self.final_norm_bytes

    @property
    def parameter_count(self) -> int:
        return self.parameters or self.weight_bytes // self.dtype_bytes

    @property
    def kv_bytes_per_token_per_layer(self) -> int:
        return self.kv_bytes_per_token // self.num_layers

    def kv_bytes(self, *, batch: int, tokens: int) -> int:
        """C(B): the KV cache of `batch` sequences of `tokens` tokens each."""
        return batch * tokens * self.kv_bytes_per_token

    def workspace_bytes(
        self, *, batch: int, query_tokens: int, context_tokens: int, per_matrix: bool = False
    ) -> int:
        """H for one step; see the module docstring for the formula. `per_matrix`: the
        executor decodes compressed layers one matrix at a time (and keeps no layer
        decoded across a prefill's chunks)."""
        a = self.dtype_bytes
        n = batch * query_tokens
        q_dim = self.num_attention_heads * self.head_dim
        kv_dim = self.num_key_value_heads * self.head_dim
        activations = n * a * (3 * self.hidden_size + 2 * q_dim + 2 * kv_dim)
        mask = batch * query_tokens * context_tokens * a
        mlp = 3 * n * self.intermediate_size * a
        logits = batch * self.vocab_size * (a + 4)
        decoded = (
            self.decoded_matrix_bytes
            if per_matrix and self.decoded_matrix_bytes
            else 2 * self.decoded_layer_bytes
        )
        kept = 0 if per_matrix else self.kept_layer_bytes
        return activations + mask + mlp + logits + decoded + self.kernel_buffer_bytes + kept

    def prefill_workspace_bytes(
        self, *, batch: int, prompt_tokens: int, per_matrix: bool = False
    ) -> int:
        # A model computed in its kernel forms prefills a long prompt in chunks.
        chunk = PREFILL_CHUNK_TOKENS if self.computed_compressed else prompt_tokens
        return self.workspace_bytes(
            batch=batch,
            query_tokens=min(prompt_tokens, chunk),
            context_tokens=prompt_tokens,
            per_matrix=per_matrix,
        )

    def decode_workspace_bytes(
        self, *, batch: int, context_tokens: int, per_matrix: bool = False
    ) -> int:
        return self.workspace_bytes(
            batch=batch, query_tokens=1, context_tokens=context_tokens, per_matrix=per_matrix
        )


def load_model_spec(
    *, source: str | os.PathLike[str] | Mapping[str, Any], dtype: str | None = None
) -> ModelSpec:
    """The spec of the model described by `source`: a folder holding config.json, the
    path of a config.json, or the config as a dict. `dtype` overrides the config's.

    Raises UnsupportedArchitectureError naming what is missing or unknown, and
    FileNotFoundError / ValueError for a path that is not a readable JSON config.
    """
    if isinstance(source, Mapping):
        config = source
        name = str(config.get("_name_or_path") or config.get("model_type") or "model")
    else:
        path = Path(source).expanduser()
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"no model config at {path}")
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
        if not isinstance(config, dict):
            raise ValueError(f"{path} does not hold a JSON object")
        name = path.parent.name if path.name == "config.json" else path.stem
    return model_spec_from_config(config=config, name=name, dtype=dtype)


def model_spec_from_config(
    *, config: Mapping[str, Any], name: str = "model", dtype: str | None = None
) -> ModelSpec:
    family, model_type = _family_of(config)
    missing = [key for key in _REQUIRED_FIELDS if config.get(key) is None]
    if missing:
        raise UnsupportedArchitectureError(
            f"config of {model_type!r} lacks {', '.join(missing)}: cannot size the model"
        )
    hidden = int(config["hidden_size"])
    inter = int(config["intermediate_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    vocab = int(config["vocab_size"])
    kv_heads = config.get("num_key_value_heads")
    if kv_heads is None:
        kv_heads = family.kv_heads_default or heads
    kv_heads = int(kv_heads)
    head_dim = config.get("head_dim")
    if head_dim is None:
        head_dim = family.head_dim_default or hidden // heads
    head_dim = int(head_dim)
    tied = bool(config.get("tie_word_embeddings", family.tie_default))

    dtype_name = _dtype_name(dtype if dtype is not None else _config_dtype(config))
    dtype_bytes = DTYPE_BYTES[dtype_name]

    attention_bias = bool(config.get("attention_bias", False))
    qkv_bias = family.qkv_bias if family.qkv_bias is not None else attention_bias
    o_bias = attention_bias if family.o_bias_follows_config else False
    mlp_bias = bool(config.get("mlp_bias", False)) if family.has_mlp_bias_option else False

    q_dim = heads * head_dim
    kv_dim = kv_heads * head_dim
    attn_params = hidden * q_dim + 2 * hidden * kv_dim + q_dim * hidden
    if qkv_bias:
        attn_params += q_dim + 2 * kv_dim
    if o_bias:
        attn_params += hidden
    mlp_params = 3 * hidden * inter + (2 * inter + hidden if mlp_bias else 0)
    norm_params = family.norms_per_layer * hidden + (2 * head_dim if family.qk_norm else 0)
    per_layer = (attn_params + mlp_params + norm_params) * dtype_bytes

    embed = vocab * hidden * dtype_bytes
    return ModelSpec(
        name=name,
        model_type=model_type,
        num_layers=layers,
        hidden_size=hidden,
        intermediate_size=inter,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        dtype=dtype_name,
        dtype_bytes=dtype_bytes,
        tie_word_embeddings=tied,
        layer_bytes=(per_layer,) * layers,
        embed_bytes=embed,
        head_bytes=0 if tied else embed,
        final_norm_bytes=hidden * dtype_bytes,
        kv_bytes_per_token=2 * layers * kv_dim * dtype_bytes,
    )


def _family_of(config: Mapping[str, Any]) -> tuple[_Family, str]:
    model_type = config.get("model_type")
    if not model_type:
        architectures = config.get("architectures") or []
        raise UnsupportedArchitectureError(
            "config has no model_type"
            + (f" (architectures: {', '.join(architectures)})" if architectures else "")
            + f"; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    if config.get("quantization_config"):
        method = config["quantization_config"].get("quant_method", "unknown")
        raise UnsupportedArchitectureError(
            f"quantized checkpoints ({method}) are not supported: the planner needs plain "
            "float weights"
        )
    for moe_key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if config.get(moe_key):
            raise UnsupportedArchitectureError(
                f"mixture-of-experts models ({moe_key}) are not supported"
            )
    family = _FAMILIES.get(str(model_type))
    if family is None:
        raise UnsupportedArchitectureError(
            f"unsupported model_type {model_type!r}: no parameter layout known for it; "
            f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    return family, str(model_type)


def _config_dtype(config: Mapping[str, Any]) -> str:
    value = config.get("dtype") or config.get("torch_dtype") or _DEFAULT_DTYPE
    return str(value)


def _dtype_name(value: str) -> str:
    name = value.removeprefix("torch.").lower()
    if name not in DTYPE_BYTES:
        raise UnsupportedArchitectureError(
            f"unsupported dtype {value!r}; use one of float32, float16, bfloat16"
        )
    # One canonical spelling per width keeps JSON output and comparisons simple.
    return {
        "float": "float32",
        "fp32": "float32",
        "half": "float16",
        "fp16": "float16",
        "bf16": "bfloat16",
        "double": "float64",
    }.get(name, name)
