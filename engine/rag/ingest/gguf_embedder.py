"""A GGUF embedding model (llama.cpp's format) as a sentence-transformers folder.

Embedders people download for llama.cpp-based apps come as GGUF files (GPT4All ships
nomic-embed-text-v1.5 as one). The embedder reads sentence-transformers folders
(engine/rag/ingest/embedder.py), so a GGUF embedder gets a companion folder in the cache,
made once and reused while the file is unchanged: the weights decoded to float32
safetensors under transformers' names, config.json, the WordPiece vocabulary rebuilt
from the file's metadata, mean pooling, and the model's query / document prompts. From
there every back-end of the embedder applies to it as to any folder (ONNX, OpenVINO,
bf16), each checked against torch as usual.

Architectures: "nomic-bert" (transformers' NomicBertModel: rotary positions, SwiGLU,
no biases; nomic-embed-text) and "bert" (BertModel: all-MiniLM, bge, e5 converted by
llama.cpp's convert_hf_to_gguf.py, mean or CLS pooling as the file says). Others are
refused with an EmbedderError that names the architecture.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EmbedderError

log = logging.getLogger(__name__)

# The task prefixes nomic-embed-text was trained with (its model card): a question
# is embedded as a search query, a chunk as a document.
NOMIC_PROMPTS = {"query": "search_query: ", "document": "search_document: "}
# A chunk is a few hundred word pieces; the model reads 2,048 but costs grow with length.
MAX_TOKENS = 512
_DONE = "gguf_embedder.json"
_NOMIC_LAYER = {
    "attn_output": "self_attn.o_proj",
    "attn_output_norm": "post_attention_layernorm",
    "ffn_up": "mlp.up_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_down": "mlp.down_proj",
    "layer_output_norm": "post_mlp_layernorm",
}
_NOMIC_GLOBAL = {
    "token_embd": "embeddings.word_embeddings",
    "token_types": "embeddings.token_type_embeddings",
    "token_embd_norm": "embeddings.LayerNorm",
}
_BERT_LAYER = {
    "attn_q": "attention.self.query",
    "attn_k": "attention.self.key",
    "attn_v": "attention.self.value",
    "attn_output": "attention.output.dense",
    "attn_output_norm": "attention.output.LayerNorm",
    "ffn_up": "intermediate.dense",
    "ffn_down": "output.dense",
    "layer_output_norm": "output.LayerNorm",
}
_BERT_GLOBAL = {
    "token_embd": "embeddings.word_embeddings",
    "position_embd": "embeddings.position_embeddings",
    "token_types": "embeddings.token_type_embeddings",
    "token_embd_norm": "embeddings.LayerNorm",
}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


@dataclass(frozen=True, kw_only=True)
class _Arch:
    """How one GGUF architecture maps onto a transformers model."""

    model_class: str
    model_type: str
    layer_prefix: str  # where a layer's modules sit in the state dict
    layers: dict[str, str]
    globals: dict[str, str]
    global_tensors: int
    per_layer: int
    hidden_act: str
    prompts: dict[str, str]


_ARCHS = {
    "nomic-bert": _Arch(
        model_class="NomicBertModel",
        model_type="nomic_bert",
        layer_prefix="layers",
        layers=_NOMIC_LAYER,
        globals=_NOMIC_GLOBAL,
        global_tensors=4,  # word and type embeddings, their LayerNorm's two
        per_layer=11,
        hidden_act="silu",
        prompts=NOMIC_PROMPTS,
    ),
    "bert": _Arch(
        model_class="BertModel",
        model_type="bert",
        layer_prefix="encoder.layer",
        layers=_BERT_LAYER,
        globals=_BERT_GLOBAL,
        global_tensors=5,  # and learned positions
        per_layer=16,
        hidden_act="gelu",
        prompts={},
    ),
}


def is_gguf_file(model: str) -> bool:
    path = Path(model).expanduser()
    return path.suffix.lower() == ".gguf" and path.is_file()


def gguf_embedder_folder(*, gguf_path: Path, cache: Path) -> Path:
    """The sentence-transformers folder standing for `gguf_path`, made on first use
    (written to a temporary folder and renamed: an interrupted conversion leaves
    nothing half made)."""
    from engine.runtime.models.gguf_file import companion_name

    gguf_path = gguf_path.expanduser().resolve()
    try:
        folder = cache / "gguf-embedders" / companion_name(gguf_path)
    except OSError as e:
        raise EmbedderError(f"cannot read {gguf_path.name}: {e}") from e
    if (folder / _DONE).is_file():
        return folder
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        _write_folder(gguf_path=gguf_path, folder=tmp)
        with contextlib.suppress(OSError):  # another process made it first
            tmp.rename(folder)
    except OSError as e:  # a full disk, the file gone mid-read
        raise EmbedderError(f"could not convert {gguf_path.name} for the embedder: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _write_folder(*, gguf_path: Path, folder: Path) -> None:
    from gguf import GGUFReader

    from engine.runtime.models.gguf_file import GGUF_ARCHITECTURES, field_value

    try:
        reader = GGUFReader(gguf_path)
    except Exception as e:  # the reader raises ValueError/IndexError/KeyError on bad bytes
        log.warning("reading %s: %s", gguf_path, e)
        raise EmbedderError(
            f"{gguf_path.name} is not a readable GGUF file: it may be truncated or damaged"
        ) from e
    fields = {name: field_value(field) for name, field in reader.fields.items()}
    arch_name = str(fields.get("general.architecture"))
    arch = _ARCHS.get(arch_name)
    if arch_name in GGUF_ARCHITECTURES:
        raise EmbedderError(
            f"{gguf_path.name} is a language model ({arch_name}), not an embedder: choose "
            "it as the model (`ragdoll model FILE`, or Model… → Choose a GGUF model file…)"
        )
    if arch is None:
        raise EmbedderError(
            f"{gguf_path.name} holds a {arch_name!r} model; GGUF embedders of the "
            "'nomic-bert' (nomic-embed-text) and 'bert' (MiniLM, bge, e5) architectures "
            "can be used"
        )
    if fields.get("tokenizer.ggml.model") != "bert":
        raise EmbedderError(f"{gguf_path.name} has no WordPiece (BERT) vocabulary")
    tokens = list(fields["tokenizer.ggml.tokens"])
    config = _config(arch=arch, arch_name=arch_name, fields=fields, vocab=len(tokens))
    weights = _weights(reader=reader, arch=arch, layers=config["num_hidden_layers"], path=gguf_path)
    if arch is _ARCHS["bert"]:
        types = weights["embeddings.token_type_embeddings.weight"]
        config["type_vocab_size"] = int(types.shape[0])
        # BertModel has a pooler llama.cpp does not keep; mean or CLS pooling never
        # reads it, and without it transformers logs its weights as "newly initialized".
        hidden = int(config["hidden_size"])
        weights["pooler.dense.weight"] = types.new_zeros((hidden, hidden))
        weights["pooler.dense.bias"] = types.new_zeros((hidden,))
    from safetensors.torch import save_file

    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    _write_tokenizer(folder=folder, tokens=tokens, fields=fields)
    # llama.cpp's pooling types: 1 mean, 2 CLS.
    cls = int(fields.get(f"{arch_name}.pooling_type") or 1) == 2
    _write_sentence_transformers(
        folder=folder, dimension=config["hidden_size"], cls=cls, prompts=arch.prompts
    )
    (folder / _DONE).write_text(
        json.dumps({"file": str(gguf_path), "architecture": arch_name}), encoding="utf-8"
    )


def _config(*, arch: _Arch, arch_name: str, fields: dict[str, Any], vocab: int) -> dict[str, Any]:
    def key(name: str) -> Any:
        value = fields.get(f"{arch_name}.{name}")
        if value is None:
            raise EmbedderError(f"the GGUF file lacks {arch_name}.{name}")
        return value

    config = {
        "architectures": [arch.model_class],
        "model_type": arch.model_type,
        "vocab_size": vocab,
        "hidden_size": int(key("embedding_length")),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": int(key("attention.head_count")),
        "intermediate_size": int(key("feed_forward_length")),
        "max_position_embeddings": int(key("context_length")),
        "layer_norm_eps": float(key("attention.layer_norm_epsilon")),
        "hidden_act": arch.hidden_act,
        "type_vocab_size": 2,
        "pad_token_id": int(fields.get("tokenizer.ggml.padding_token_id") or 0),
        "dtype": "float32",
    }
    if arch.model_type == "nomic_bert":
        theta = float(key("rope.freq_base"))
        config["rope_parameters"] = {"rope_theta": theta, "rope_type": "default"}
    return config


def _weights(*, reader: Any, arch: _Arch, layers: int, path: Path) -> dict[str, Any]:
    """The transformers model's state dict, float32, from the file's tensors
    (nomic-bert: llama.cpp stores q, k and v as one matrix, in transformers' row order)."""
    import torch
    from gguf.quants import dequantize

    out: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        try:
            flat = dequantize(np.asarray(tensor.data), tensor.tensor_type)
        except NotImplementedError as e:
            raise EmbedderError(
                f"{path.name}: tensor {tensor.name} is of type {tensor.tensor_type.name}, "
                "which cannot be decoded here"
            ) from e
        shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
        values = torch.from_numpy(np.array(flat, dtype=np.float32).reshape(shape))
        match = _BLOCK.match(tensor.name)
        if match is not None:
            index, module, kind = match.groups()
            if module == "attn_qkv":
                for part, chunk in zip(("q", "k", "v"), values.chunk(3, dim=0), strict=True):
                    out[f"{arch.layer_prefix}.{index}.self_attn.{part}_proj.{kind}"] = chunk.clone()
                continue
            hf = arch.layers.get(module)
            hf = f"{arch.layer_prefix}.{index}.{hf}" if hf else None
        else:
            stem, _, kind = tensor.name.rpartition(".")
            hf = arch.globals.get(stem)
        if hf is None:
            raise EmbedderError(f"{path.name}: unexpected tensor {tensor.name}")
        out[f"{hf}.{kind}"] = values
    if len(out) != arch.global_tensors + arch.per_layer * layers:
        raise EmbedderError(f"{path.name}: {len(out)} tensors, not a whole {arch.model_class}")
    return out


def _write_tokenizer(*, folder: Path, tokens: list[str], fields: dict[str, Any]) -> None:
    """bert-base-uncased's WordPiece, from llama.cpp's form of it: llama.cpp marks a
    word's first piece with "▁" and keeps continuations bare, WordPiece the other way
    round ("##" before continuations)."""
    from transformers import BertTokenizerFast

    vocab = [_wordpiece(token) for token in tokens]
    tokenizer = BertTokenizerFast(
        vocab={piece: i for i, piece in enumerate(vocab)},
        # Older files (nomic's) do not say; uncased vocabularies are the common case.
        do_lower_case=bool(fields.get("tokenizer.ggml.normalizer.lowercase", True)),
        model_max_length=MAX_TOKENS,
    )
    for key, token in (
        ("tokenizer.ggml.unknown_token_id", "[UNK]"),
        ("tokenizer.ggml.seperator_token_id", "[SEP]"),
        ("tokenizer.ggml.padding_token_id", "[PAD]"),
        ("tokenizer.ggml.bos_token_id", "[CLS]"),
    ):
        at = fields.get(key)
        if at is not None and vocab[int(at)] != token:
            raise EmbedderError(f"the GGUF vocabulary has {vocab[int(at)]!r} where {token} goes")
    tokenizer.save_pretrained(str(folder))


def _wordpiece(token: str) -> str:
    if token.startswith("\u2581"):
        return token[1:]
    if token.startswith("[") and token.endswith("]"):
        return token
    return f"##{token}"


def _write_sentence_transformers(
    *, folder: Path, dimension: int, cls: bool, prompts: dict[str, str]
) -> None:
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": MAX_TOKENS, "do_lower_case": False}), encoding="utf-8"
    )
    (folder / "1_Pooling").mkdir()
    pooling = {
        "word_embedding_dimension": dimension,
        "pooling_mode_cls_token": cls,
        "pooling_mode_mean_tokens": not cls,
    }
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling), encoding="utf-8")
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": prompts, "default_prompt_name": None}), encoding="utf-8"
    )
