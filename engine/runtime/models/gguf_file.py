"""GGUF files (llama.cpp's format) as models the executor runs.

A GGUF file holds the weights (most of them in GGML blocks), the hyperparameters and the
tokenizer. The executor and the planner read a model *folder* (config.json, tokenizer
files), so a GGUF file gets a small companion folder in the cache: config.json and the
tokenizer rebuilt from the file's metadata, and `gguf_source.json` naming the file. The
weights are never copied: the weight store reads each tensor's blocks from the GGUF file
by byte range and decodes them (engine/runtime/executor/quant.py) when a layer is loaded or
streamed, so the file and the page cache hold the compressed bytes.

Only the architectures the executor runs are accepted (Llama, Mistral, Qwen2); others,
tensor types nothing here can decode and truncated files are refused with a
ModelLoadError that says which.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFValueType

from engine.errors import ModelLoadError
from engine.runtime.executor.quant import decodable, dequantize, tensor_bytes
from engine.runtime.models.gguf_header import HeaderError, read_header

SOURCE_FILE = "gguf_source.json"
# GGUF general.architecture → transformers model class, for the architectures the
# executor runs (llama.cpp writes Mistral models as "llama").
GGUF_ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
}
# Embedding models engine/rag/ingest/gguf_embedder.py reads: named here so that one chosen
# as the language model is pointed to the embedder.
GGUF_EMBEDDER_ARCHITECTURES = frozenset({"nomic-bert", "bert"})
_LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


@dataclass(frozen=True, kw_only=True)
class GGUFTensor:
    """One tensor of a GGUF file: its Hugging Face name and shape, and its blocks."""

    name: str  # Hugging Face name, e.g. model.layers.0.self_attn.q_proj.weight
    gguf_name: str
    qtype: GGMLQuantizationType
    shape: tuple[int, ...]  # Hugging Face (row-major) order
    start: int  # absolute byte offset in the file
    end: int
    permute_heads: int  # > 0: Llama q/k rows to put back in Hugging Face order


@dataclass(frozen=True, kw_only=True)
class GGUFModel:
    """What a GGUF file says about its model (read without loading a weight)."""

    path: Path
    architecture: str
    config: dict[str, Any]  # a transformers config.json
    tensors: tuple[GGUFTensor, ...]
    chat_template: str | None
    stop_ids: tuple[int, ...]  # end-of-generation tokens (eos, end of turn)
    # A SentencePiece vocabulary that puts "▁" before the text (Llama 2, Mistral).
    sentencepiece_prefix: bool = False

    def compressed_bytes(self) -> int:
        return sum(t.end - t.start for t in self.tensors)


def hf_to_gguf_name(name: str) -> str | None:
    """llama.cpp's name for a Hugging Face tensor name (None: not stored in GGUF)."""
    for gguf, hf in _GLOBAL.items():
        for kind in ("weight", "bias"):
            if name == f"{hf}.{kind}":
                return f"{gguf}.{kind}"
    match = re.match(r"^model\.layers\.(\d+)\.(.+)\.(weight|bias)$", name)
    if match is None:
        return None
    index, module, kind = match.groups()
    for gguf, hf in _LAYER.items():
        if hf == module:
            return f"blk.{index}.{gguf}.{kind}"
    return None


def gguf_to_hf_name(name: str) -> str | None:
    match = _BLOCK.match(name)
    if match is not None:
        index, module, kind = match.groups()
        hf = _LAYER.get(module)
        return f"model.layers.{index}.{hf}.{kind}" if hf else None
    stem, _, kind = name.rpartition(".")
    hf = _GLOBAL.get(stem)
    return f"{hf}.{kind}" if hf else None


def permute_rows(weight: torch.Tensor, *, heads: int, inverse: bool) -> torch.Tensor:
    """llama.cpp's row order of Llama q/k projections (`inverse`: back to Hugging Face's):
    it stores each head's two rotary halves interleaved."""
    rows = weight.shape[0]
    rest = weight.shape[1:]
    if inverse:
        grouped = weight.reshape(heads, rows // heads // 2, 2, *rest)
    else:
        grouped = weight.reshape(heads, 2, rows // heads // 2, *rest)
    return grouped.transpose(1, 2).reshape(weight.shape)


def read_gguf(path: Path) -> GGUFModel:
    """The model in a GGUF file; ModelLoadError for what the executor cannot run."""
    try:
        header = read_header(path)
    except (HeaderError, OSError, ValueError) as e:
        with path.open("rb") as f:
            gguf_magic = f.read(4) == b"GGUF"
        if gguf_magic:  # a download cut short: the tensor index runs past the end
            raise ModelLoadError(
                f"{path.name} is truncated or damaged: its GGUF header cannot be read "
                f"({e}). Download it again."
            ) from e
        raise ModelLoadError(f"{path} is not a GGUF file ({e}).") from e
    fields = header.fields
    arch = str(fields.get("general.architecture", ""))
    if arch not in GGUF_ARCHITECTURES:
        if arch in GGUF_EMBEDDER_ARCHITECTURES:
            raise ModelLoadError(
                f"{path.name} is an embedding model ({arch}), not a language model: choose "
                "it as the embedder (`ragdoll embedder FILE`, or Model… → Choose a GGUF "
                "embedder file…)."
            )
        raise ModelLoadError(
            f"{path.name} holds a {arch or 'unnamed'} model; RAGDoll runs GGUF models of "
            f"the {', '.join(sorted(GGUF_ARCHITECTURES))} architectures only (the layer-"
            "streaming executor implements those decoder layers)."
        )
    if int(fields.get("split.count") or 1) > 1:
        raise ModelLoadError(
            f"{path.name} is one part of a split GGUF model; RAGDoll reads single-file "
            "GGUF models only (llama.cpp's `llama-gguf-split --merge` joins the parts)."
        )
    size = path.stat().st_size
    config = _config(arch=arch, fields=fields, names={t.name for t in header.tensors})
    embedding = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    if embedding is None:
        raise ModelLoadError(f"{path.name} has no token embedding: not a complete model.")
    config["vocab_size"] = int(embedding.dims[-1])
    rope_freqs = next((t for t in header.tensors if t.name == "rope_freqs.weight"), None)
    if rope_freqs is not None:
        count = math.prod(rope_freqs.dims)
        config["rope_scaling"] = _llama3_rope_scaling(
            factors=np.fromfile(path, dtype=np.float32, count=count, offset=rope_freqs.start)
            .astype(np.float64)
            .reshape(-1),
            base=float(config["rope_theta"]),
            head_dim=int(config["head_dim"]),
            name=path.name,
        )
    heads = int(config["num_attention_heads"])
    kv_heads = int(config["num_key_value_heads"])
    tensors: list[GGUFTensor] = []
    for t in header.tensors:
        hf = gguf_to_hf_name(t.name)
        if hf is None:
            continue  # rope_freqs: its rope_scaling is in the config
        try:
            qtype = GGMLQuantizationType(t.qtype)
        except ValueError:
            qtype = None
        if qtype is None or not decodable(qtype):
            kind = qtype.name if qtype is not None else f"type {t.qtype}"
            raise ModelLoadError(
                f"{path.name}: tensor {t.name} is stored as {kind}, a GGML "
                "type RAGDoll cannot decode yet. Use a file quantized to F16, Q8_0, Q6_K, Q5_K, "
                "Q5_1, Q5_0, Q4_K (Q4_K_M), Q4_1 or Q4_0."
            )
        start = t.start
        end = start + tensor_bytes(qtype=qtype, elements=math.prod(t.dims))
        if end > size:
            raise ModelLoadError(
                f"{path.name} is truncated: tensor {t.name} ends at byte {end} but the file "
                f"has {size} bytes. Download it again."
            )
        permute = 0
        if arch != "qwen2" and t.name.endswith(("attn_q.weight", "attn_k.weight")):
            permute = heads if ".attn_q." in t.name else kv_heads
        tensors.append(
            GGUFTensor(
                name=hf,
                gguf_name=t.name,
                qtype=qtype,
                shape=tuple(int(d) for d in reversed(t.dims)),
                start=start,
                end=end,
                permute_heads=permute,
            )
        )
    template = fields.get("tokenizer.chat_template")
    return GGUFModel(
        path=path,
        architecture=arch,
        config=config,
        tensors=tuple(tensors),
        chat_template=str(template) if template else None,
        stop_ids=_stop_ids(fields),
        sentencepiece_prefix=sentencepiece_prefix(fields),
    )


def read_exactly(file: Any, view: memoryview, *, start: int, what: str) -> None:
    """Fill `view` from byte `start` of an open binary file (readinto may return
    less than asked); a file that ends first is an error naming `what`."""
    file.seek(start)
    got = 0
    while got < len(view):
        n = file.readinto(view[got:])
        if not n:
            raise OSError(f"{file.name} ends inside tensor {what}")
        got += n


def read_tensor(file: Any, tensor: GGUFTensor, *, dtype: torch.dtype) -> torch.Tensor:
    """One tensor's values in `dtype`, read from an open binary file by byte range."""
    raw = torch.empty(tensor.end - tensor.start, dtype=torch.uint8)
    read_exactly(file, memoryview(raw.numpy()), start=tensor.start, what=tensor.gguf_name)
    values = dequantize(raw, qtype=tensor.qtype, shape=tensor.shape)
    if tensor.permute_heads:
        values = permute_rows(values, heads=tensor.permute_heads, inverse=True)
    return values.to(dtype)


def companion_folder(*, gguf_path: Path, cache: Path) -> Path:
    """The model folder standing for `gguf_path` (config, tokenizer, a pointer to the
    file), made on first use and reused while the file is unchanged."""
    gguf_path = gguf_path.resolve()
    folder = cache / "gguf" / companion_name(gguf_path)
    if (folder / SOURCE_FILE).is_file():
        return folder
    model = read_gguf(gguf_path)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(model.config, indent=2), encoding="utf-8")
    write_tokenizer(
        gguf_path=gguf_path,
        folder=tmp,
        model_type=model.config["model_type"],
        template=model.chat_template,
        sentencepiece_prefix=model.sentencepiece_prefix,
    )
    if model.stop_ids:
        (tmp / "generation_config.json").write_text(
            json.dumps({"eos_token_id": list(model.stop_ids)}), encoding="utf-8"
        )
    (tmp / SOURCE_FILE).write_text(
        json.dumps({"file": str(gguf_path), "architecture": model.architecture}),
        encoding="utf-8",
    )
    with contextlib.suppress(OSError):  # another process made it first
        tmp.rename(folder)
    return folder


def companion_name(gguf_path: Path) -> str:
    """A companion folder's name: the file's stem and a key of its path, size and
    time, so that a changed file gets a new folder."""
    stat = gguf_path.stat()
    key = hashlib.sha256(f"{gguf_path}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return f"{gguf_path.stem}-{key[:12]}"


def gguf_source(folder: Path) -> Path | None:
    """The GGUF file a companion folder stands for (None for an ordinary folder)."""
    pointer = folder / SOURCE_FILE
    if not pointer.is_file():
        return None
    return Path(json.loads(pointer.read_text(encoding="utf-8"))["file"])


def gguf_fields(path: Path) -> dict[str, Any]:
    """A GGUF file's metadata as Python values."""
    return read_header(path).fields


def sentencepiece_prefix(fields: dict[str, Any]) -> bool:
    """Whether the file's vocabulary is SentencePiece's, putting "▁" before text."""
    return fields.get("tokenizer.ggml.model") == "llama" and bool(
        fields.get("tokenizer.ggml.add_space_prefix", True)
    )


def write_tokenizer(
    *,
    gguf_path: Path,
    folder: Path,
    model_type: str,
    template: str | None,
    sentencepiece_prefix: bool,
) -> None:
    from tokenizers import normalizers

    try:
        tokenizer = _tokenizer_class(model_type).from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, local_files_only=True
        )
    except Exception as e:
        raise ModelLoadError(
            f"Could not rebuild the tokenizer of {gguf_path.name} from its metadata: {e}"
        ) from e
    if template and not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = template
    if sentencepiece_prefix:
        # transformers rebuilds a SentencePiece vocabulary with a Metaspace pre-tokenizer,
        # which adds no "▁" before text that starts with a space (" Hello" loses a token
        # against the model's own tokenizer). The Hugging Face tokenizer.json of these
        # models (Llama 2, Mistral) prepends it in the normalizer instead: do the same.
        # Checked on llama.cpp's ggml-vocab-llama-spm.gguf: 47 of its 47 test strings give
        # the ids of the Hugging Face tokenizer (docs/executor.md), 32 before.
        backend = tokenizer.backend_tokenizer
        backend.normalizer = normalizers.Sequence(
            [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
        )
        backend.pre_tokenizer = None
    tokenizer.save_pretrained(folder)


def _tokenizer_class(model_type: str) -> Any:
    """The class AutoTokenizer picks for a GGUF file of this model type (the one
    transformers registers for the type, else its generic backend): a GGUF file has no
    tokenizer_config naming one. Named here because AutoTokenizer first rebuilds the
    whole config from the file with gguf's reader, which decodes every vocabulary
    string: a first open of SmolLM2-135M's file made its folder in 4.0-5.7 CPU-s that
    way and 0.4 this way, Qwen2.5-0.5B's in 10-12 against 1.2; the files written are
    the same (tests/engine/runtime/models/test_gguf_file.py)."""
    from transformers import TokenizersBackend
    from transformers.models.auto.tokenization_auto import (
        TOKENIZER_MAPPING_NAMES,
        tokenizer_class_from_name,
    )

    name = TOKENIZER_MAPPING_NAMES.get(model_type)
    return (tokenizer_class_from_name(name) if name else None) or TokenizersBackend


# End-of-turn tokens of common chat formats, which llama.cpp also treats as the end of
# generation though a file's eos names another token (Llama 3: <|end_of_text|>).
_END_OF_TURN = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>")


def _stop_ids(fields: dict[str, Any]) -> tuple[int, ...]:
    ids = {
        int(fields[key])
        for key in (
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.eot_token_id",
            "tokenizer.ggml.eom_token_id",
        )
        if fields.get(key) is not None
    }
    tokens = fields.get("tokenizer.ggml.tokens") or []
    ids.update(i for i, text in enumerate(tokens) if text in _END_OF_TURN)
    return tuple(sorted(ids))


def field_value(field: Any) -> Any:
    kinds = field.types
    if not kinds:
        return None
    if kinds[0] == GGUFValueType.ARRAY:
        if len(kinds) > 1 and kinds[1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if kinds[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    return field.parts[field.data[0]].tolist()[0]


# Llama 3.1's rope_scaling besides its factor (Llama 3.2 shares them): llama.cpp stores
# only the per-frequency factors these give, so they are checked against the file.
_LLAMA3_ROPE = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original": 8192}


def _llama3_rope_scaling(
    *, factors: np.ndarray, base: float, head_dim: int, name: str
) -> dict[str, Any]:
    """transformers' "llama3" rope_scaling that gives llama.cpp's `rope_freqs` factors
    (its convert_hf_to_gguf.py computes them from the same formula)."""
    factor = float(factors.max())
    low, high = _LLAMA3_ROPE["low_freq_factor"], _LLAMA3_ROPE["high_freq_factor"]
    original = _LLAMA3_ROPE["original"]
    freqs = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / freqs
    smooth = (original / wavelen - low) / (high - low)
    expected = np.where(
        wavelen < original / high,
        1.0,
        np.where(wavelen > original / low, factor, 1 / ((1 - smooth) / factor + smooth)),
    )
    if expected.shape != factors.shape or not np.allclose(expected, factors, rtol=1e-4):
        raise ModelLoadError(
            f"{name} scales its rotary frequencies in a way RAGDoll does not recognise "
            "(only Llama 3's rope scaling is supported)."
        )
    return {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": original,
    }


def _config(*, arch: str, fields: dict[str, Any], names: set[str]) -> dict[str, Any]:
    def key(name: str, default: Any = None) -> Any:
        return fields.get(f"{arch}.{name}", default)

    missing = [
        k for k in ("embedding_length", "block_count", "attention.head_count") if key(k) is None
    ]
    if missing:
        raise ModelLoadError(f"the GGUF metadata lacks {arch}.{missing[0]}")
    hidden = int(key("embedding_length"))
    heads = int(key("attention.head_count"))
    config: dict[str, Any] = {
        "architectures": [GGUF_ARCHITECTURES[arch]],
        "model_type": arch,
        "hidden_size": hidden,
        "intermediate_size": int(key("feed_forward_length", 4 * hidden)),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(key("attention.head_count_kv", heads)),
        "head_dim": int(key("attention.key_length", hidden // heads)),
        "max_position_embeddings": int(key("context_length", 2048)),
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(key("rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in names,
        "hidden_act": "silu",
        # Decoded blocks are float32; bf16 is the compute dtype on a GPU (a CPU computes
        # float32, see ModelFiles.compute_dtype).
        "torch_dtype": "bfloat16",
    }
    if arch == "llama":
        config["attention_bias"] = "blk.0.attn_q.bias" in names
    for name in ("bos", "eos", "padding"):
        value = fields.get(f"tokenizer.ggml.{name}_token_id")
        if value is not None:
            config[f"{'pad' if name == 'padding' else name}_token_id"] = int(value)
    return config
