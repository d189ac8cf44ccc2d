"""A GGUF embedding model (llama.cpp's format) as a sentence-transformers folder.

Embedders people download for llama.cpp-based apps come as GGUF files (GPT4All ships
nomic-embed-text-v1.5 as one). The embedder reads sentence-transformers folders
(engine/ingest/embedder.py), so a GGUF embedder gets a companion folder in the cache,
made once and reused while the file is unchanged: the weights decoded to float32
safetensors under transformers' names, config.json, the WordPiece vocabulary rebuilt
from the file's metadata, mean pooling, and the model's query / document prompts. From
there every back-end of the embedder applies to it as to any folder (ONNX, OpenVINO,
bf16), each checked against torch as usual.

Architectures: "nomic-bert" (transformers' NomicBertModel: rotary positions, SwiGLU,
no biases). Others are refused with an EmbedderError that names the architecture.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
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
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


def is_gguf_file(model: str) -> bool:
    path = Path(model).expanduser()
    return path.suffix.lower() == ".gguf" and path.is_file()


def gguf_embedder_folder(*, gguf_path: Path, cache: Path) -> Path:
    """The sentence-transformers folder standing for `gguf_path`, made on first use
    (written to a temporary folder and renamed: an interrupted conversion leaves
    nothing half made)."""
    from engine.models.gguf_file import companion_name

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

    from engine.models.gguf_file import field_value

    try:
        reader = GGUFReader(gguf_path)
    except Exception as e:  # the reader raises ValueError/IndexError/KeyError on bad bytes
        log.warning("reading %s: %s", gguf_path, e)
        raise EmbedderError(
            f"{gguf_path.name} is not a readable GGUF file: it may be truncated or damaged"
        ) from e
    fields = {name: field_value(field) for name, field in reader.fields.items()}
    arch = fields.get("general.architecture")
    if arch != "nomic-bert":
        raise EmbedderError(
            f"{gguf_path.name} holds a {arch!r} model; GGUF embedders of the "
            "'nomic-bert' architecture (nomic-embed-text) can be used"
        )
    if fields.get("tokenizer.ggml.model") != "bert":
        raise EmbedderError(f"{gguf_path.name} has no WordPiece (BERT) vocabulary")
    tokens = list(fields["tokenizer.ggml.tokens"])
    config = _nomic_config(fields=fields, vocab=len(tokens))
    weights = _nomic_weights(reader=reader, layers=config["num_hidden_layers"], name=gguf_path)
    from safetensors.torch import save_file

    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    _write_tokenizer(folder=folder, tokens=tokens, fields=fields)
    _write_sentence_transformers(folder=folder, dimension=config["hidden_size"])
    (folder / _DONE).write_text(
        json.dumps({"file": str(gguf_path), "architecture": arch}), encoding="utf-8"
    )


def _nomic_config(*, fields: dict[str, Any], vocab: int) -> dict[str, Any]:
    def key(name: str) -> Any:
        value = fields.get(f"nomic-bert.{name}")
        if value is None:
            raise EmbedderError(f"the GGUF file lacks nomic-bert.{name}")
        return value

    return {
        "architectures": ["NomicBertModel"],
        "model_type": "nomic_bert",
        "vocab_size": vocab,
        "hidden_size": int(key("embedding_length")),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": int(key("attention.head_count")),
        "intermediate_size": int(key("feed_forward_length")),
        "max_position_embeddings": int(key("context_length")),
        "layer_norm_eps": float(key("attention.layer_norm_epsilon")),
        "rope_parameters": {"rope_theta": float(key("rope.freq_base")), "rope_type": "default"},
        "hidden_act": "silu",
        "type_vocab_size": 2,
        "pad_token_id": int(fields.get("tokenizer.ggml.padding_token_id") or 0),
        "dtype": "float32",
    }


def _nomic_weights(*, reader: Any, layers: int, name: Path) -> dict[str, Any]:
    """transformers' NomicBertModel state dict, float32, from the file's tensors
    (llama.cpp stores q, k and v as one matrix; its row order is transformers')."""
    import torch
    from gguf.quants import dequantize

    out: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        try:
            flat = dequantize(np.asarray(tensor.data), tensor.tensor_type)
        except NotImplementedError as e:
            raise EmbedderError(
                f"{name.name}: tensor {tensor.name} is of type {tensor.tensor_type.name}, "
                "which cannot be decoded here"
            ) from e
        shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
        values = torch.from_numpy(np.array(flat, dtype=np.float32).reshape(shape))
        match = _BLOCK.match(tensor.name)
        if match is not None:
            index, module, kind = match.groups()
            if module == "attn_qkv":
                for part, chunk in zip(("q", "k", "v"), values.chunk(3, dim=0), strict=True):
                    out[f"layers.{index}.self_attn.{part}_proj.{kind}"] = chunk.clone()
                continue
            hf = _NOMIC_LAYER.get(module)
            hf = f"layers.{index}.{hf}" if hf else None
        else:
            stem, _, kind = tensor.name.rpartition(".")
            hf = _NOMIC_GLOBAL.get(stem)
        if hf is None:
            raise EmbedderError(f"{name.name}: unexpected tensor {tensor.name}")
        out[f"{hf}.{kind}"] = values
    # Word and type embeddings and their LayerNorm's two; 11 tensors a layer.
    if len(out) != 4 + 11 * layers:
        raise EmbedderError(f"{name.name}: {len(out)} tensors, not a whole nomic-bert model")
    return out


def _write_tokenizer(*, folder: Path, tokens: list[str], fields: dict[str, Any]) -> None:
    """bert-base-uncased's WordPiece, from llama.cpp's form of it: llama.cpp marks a
    word's first piece with "▁" and keeps continuations bare, WordPiece the other way
    round ("##" before continuations)."""
    from transformers import BertTokenizerFast

    vocab = [_wordpiece(token) for token in tokens]
    tokenizer = BertTokenizerFast(
        vocab={piece: i for i, piece in enumerate(vocab)},
        do_lower_case=True,
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


def _write_sentence_transformers(*, folder: Path, dimension: int) -> None:
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
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": dimension, "pooling_mode_mean_tokens": True}),
        encoding="utf-8",
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": NOMIC_PROMPTS, "default_prompt_name": None}), encoding="utf-8"
    )
