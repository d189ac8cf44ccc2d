"""A Hugging Face model folder written as a GGUF file, as llama.cpp's converter does.

Tests and the offload benchmark need GGUF files of models nobody can download here: this
writes a safetensors folder (e.g. engine/runtime/models/synthetic.py's random-weight models) with
the tensor names, the Llama q/k row order, the metadata keys and the byte-level BPE
tokenizer that llama.cpp's `convert_hf_to_gguf.py` writes, quantized with
`gguf.quants.quantize`. 1-D tensors (norms, biases) stay float32, as llama.cpp keeps them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFWriter, TokenType
from gguf.quants import quantize
from safetensors.torch import load_file

from engine.runtime.models.gguf_file import GGUF_ARCHITECTURES, hf_to_gguf_name, permute_rows
from engine.runtime.models.gguf_kquants import quantize_q4_k, quantize_q6_k

# llama.cpp's file-type codes (LLAMA_FTYPE_*), written as general.file_type.
_FILE_TYPES = {
    GGMLQuantizationType.F32: 0,
    GGMLQuantizationType.F16: 1,
    GGMLQuantizationType.Q4_0: 2,
    GGMLQuantizationType.Q4_1: 3,
    GGMLQuantizationType.Q5_0: 8,
    GGMLQuantizationType.Q5_1: 9,
    GGMLQuantizationType.Q8_0: 7,
    GGMLQuantizationType.Q4_K: 15,  # Q4_K_M: Q4_K with some tensors in Q6_K
    GGMLQuantizationType.Q6_K: 18,
}
# gguf-py quantizes no K format: engine/runtime/models/gguf_kquants.py writes these two.
_K_QUANTIZERS = {
    GGMLQuantizationType.Q4_K: quantize_q4_k,
    GGMLQuantizationType.Q6_K: quantize_q6_k,
}


def write_gguf(
    *,
    model_dir: Path,
    out: Path,
    qtype: GGMLQuantizationType,
    qtype_of: Callable[[str], GGMLQuantizationType] | None = None,
) -> Path:
    """Write the model in `model_dir` (config.json, safetensors, tokenizer.json) to `out`
    with its matrices in `qtype` (F32, F16, Q8_0, Q5_1, Q5_0, Q4_1 or Q4_0: what
    `gguf.quants.quantize` makes; Q4_K and Q6_K for matrices of 256-multiple widths), or
    per GGUF tensor name in `qtype_of(name)` (mixed files such as Q4_K_M)."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    arch = config["model_type"]
    if arch not in GGUF_ARCHITECTURES:
        raise ValueError(f"cannot write {arch} as GGUF")
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    writer = GGUFWriter(str(out), arch)
    writer.add_name(model_dir.name)
    writer.add_file_type(_FILE_TYPES[qtype])
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_rope_freq_base(float(config.get("rope_theta") or 10000.0))
    _add_tokenizer(writer=writer, model_dir=model_dir, config=config)
    scaling = config.get("rope_scaling") or {}
    if scaling.get("rope_type") == "llama3":
        head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
        writer.add_tensor("rope_freqs.weight", _llama3_rope_factors(config, head_dim=head_dim))
    weights: dict[str, torch.Tensor] = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        weights.update(load_file(str(file)))
    for name, tensor in weights.items():
        gguf_name = hf_to_gguf_name(name)
        if gguf_name is None:
            continue
        data = tensor.to(torch.float32).numpy()
        if arch != "qwen2" and gguf_name.endswith(("attn_q.weight", "attn_k.weight")):
            # llama.cpp interleaves the rotary halves of Llama-style q/k rows.
            groups = heads if "attn_q" in gguf_name else kv_heads
            data = permute_rows(torch.from_numpy(data), heads=groups, inverse=False).numpy()
        chosen = qtype_of(gguf_name) if qtype_of is not None else qtype
        _add_tensor(writer=writer, name=gguf_name, data=data, qtype=chosen)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _llama3_rope_factors(config: dict, *, head_dim: int) -> np.ndarray:
    """Per-frequency factors as llama.cpp's converter stores Llama 3's rope scaling."""
    scaling = config["rope_scaling"]
    base = float(config.get("rope_theta") or 10000.0)
    factor = float(scaling["factor"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    original = float(scaling["original_max_position_embeddings"])
    freqs = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < original / high:
            factors.append(1.0)
        elif wavelen > original / low:
            factors.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def _add_tensor(
    *, writer: GGUFWriter, name: str, data: np.ndarray, qtype: GGMLQuantizationType
) -> None:
    if data.ndim < 2 or qtype == GGMLQuantizationType.F32:
        writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
        return
    if qtype == GGMLQuantizationType.F16:
        writer.add_tensor(name, data.astype(np.float16))
        return
    kquant = _K_QUANTIZERS.get(qtype)
    data = np.ascontiguousarray(data, dtype=np.float32)
    packed = kquant(data) if kquant is not None else quantize(data, qtype)
    writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=qtype)


def _add_tokenizer(*, writer: GGUFWriter, model_dir: Path, config: dict) -> None:
    """The byte-level BPE of tokenizer.json as llama.cpp's "gpt2" tokenizer model."""
    spec = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = dict(spec["model"]["vocab"])
    special = {t["content"]: int(t["id"]) for t in spec.get("added_tokens", [])}
    vocab.update(special)
    size = max(int(config["vocab_size"]), max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [int(TokenType.UNUSED)] * size
    for text, index in vocab.items():
        tokens[index] = text
        types[index] = int(TokenType.CONTROL if text in special else TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for key, add in (
        ("bos_token_id", writer.add_bos_token_id),
        ("eos_token_id", writer.add_eos_token_id),
        ("pad_token_id", writer.add_pad_token_id),
    ):
        if config.get(key) is not None:
            add(int(config[key]))
    template = None
    tokenizer_config = model_dir / "tokenizer_config.json"
    if tokenizer_config.is_file():
        template = json.loads(tokenizer_config.read_text(encoding="utf-8")).get("chat_template")
    jinja = model_dir / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    if template:
        writer.add_chat_template(template)
    writer.add_add_bos_token(False)
