"""A plain sentence-transformers model (a Transformer, then mean or CLS pooling, then an
optional Normalize) as the ONNX and OpenVINO paths need it: its pooling, token limit,
dimension and tokenizer.

Read from the model folder's own files (`read_plain_model`), so that an engine whose
export is already made starts without importing sentence_transformers, which took
11 s of a loaded 2-core machine at every engine start; or from a model the library
has loaded (`plain_model_of`), for models whose files say more than is read here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The modules' class names; their packages moved between library versions.
_PLAIN_MODULES = (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"])
# What a version 6 Transformer module of a text encoder says it computes.
_PLAIN_TASK = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
}
# Pooling flags of the library's config files; only one of mean and CLS may be set.
_OTHER_POOLING_FLAGS = (
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


@dataclass(frozen=True, kw_only=True)
class PlainModel:
    location: str  # the model folder
    tokenizer_folder: str  # the Transformer module's folder (usually the model's)
    pooling: str  # "mean" or "cls"
    max_tokens: int
    dimension: int
    prompts: tuple[tuple[str, str], ...] = ()  # the library's named prompts (task prefixes)


def read_plain_model(location: str) -> PlainModel | None:
    """The model in `location` read from its files, or None when it is not plain, has a
    default prompt, or a file is missing or asks for something not read here (such a
    model goes through the library, as before)."""
    folder = Path(location)
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        if [str(m["type"]).rsplit(".", 1)[-1] for m in modules] not in _PLAIN_MODULES:
            return None
        transformer = folder / modules[0]["path"]
        pooling_config = _read(folder / modules[1]["path"] / "config.json")
        pooling = _pooling_mode(pooling_config)
        dimension = pooling_config.get(
            "word_embedding_dimension", pooling_config.get("embedding_dimension")
        )
        bert = _read(transformer / "sentence_bert_config.json")
        library = _read(folder / "config_sentence_transformers.json", missing_ok=True)
        # The library's limit: the one its config names, else the tokenizer's own.
        max_tokens = bert.get("max_seq_length") or _read(
            transformer / "tokenizer_config.json", missing_ok=True
        ).get("model_max_length")
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    # Arguments the library would hand the tokenizer or model, or a prompt it would
    # prepend: only the library itself applies them as it does.
    asks_more = bert.get("do_lower_case") or any(
        bert.get(key) for key in ("tokenizer_args", "model_args", "config_args")
    )
    asks_more = asks_more or any(
        key in bert and bert[key] != value for key, value in _PLAIN_TASK.items()
    )
    prompts = library.get("prompts") or {}
    if pooling is None or asks_more or library.get("default_prompt_name"):
        return None
    if not isinstance(prompts, dict):
        return None
    if not isinstance(max_tokens, int) or not isinstance(dimension, int):
        return None
    return PlainModel(
        location=location,
        tokenizer_folder=str(transformer),
        pooling=pooling,
        max_tokens=max_tokens,
        dimension=dimension,
        prompts=tuple((str(k), str(v)) for k, v in dict(prompts).items()),
    )


def plain_model_of(model: Any, *, location: str) -> PlainModel | None:
    """`model` (a loaded SentenceTransformer) when it is plain enough to export."""
    if getattr(model, "default_prompt_name", None):
        return None
    pooling = onnx_plan(model)
    if pooling is None:
        return None
    return PlainModel(
        location=location,
        tokenizer_folder=location,
        pooling=pooling,
        max_tokens=int(model.max_seq_length),
        dimension=int(model.get_embedding_dimension() or 0),
        prompts=tuple((str(k), str(v)) for k, v in dict(model.prompts or {}).items()),
    )


def onnx_plan(model: Any) -> str | None:
    """The pooling mode when `model` (a SentenceTransformer) is plain enough to
    export, else None."""
    modules = list(model)
    if len(modules) not in (2, 3):
        return None
    names = [type(m).__name__ for m in modules]
    if names[0] != "Transformer" or names[1] != "Pooling":
        return None
    if len(modules) == 3 and names[2] != "Normalize":
        return None
    mode = getattr(modules[1], "pooling_mode", None)
    if mode is None:  # older sentence-transformers: flags
        mode = _pooling_mode(modules[1].get_config_dict())
    return mode if mode in ("mean", "cls") else None


def load_tokenizer(plain: PlainModel) -> Any:
    """The tokenizer the library would load for the model's Transformer module: its
    folder's, its length limit the module's (the library hands it so)."""
    folder = Path(plain.tokenizer_folder)
    named = _named_fast_tokenizer(folder)
    if named is not None:
        return named.from_pretrained(folder, model_max_length=plain.max_tokens)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, model_max_length=plain.max_tokens)


def _named_fast_tokenizer(folder: Path) -> Any:
    """The fast tokenizer class the folder's tokenizer_config.json names, the one
    AutoTokenizer would choose, or None where the folder does not name one or has no
    tokenizer.json. Imported by name because AutoTokenizer imports the models'
    configuration classes and with them torch: about 1.4 CPU-seconds and a few hundred
    MB of an engine's warm-up on the ONNX and OpenVINO paths, which need no torch."""
    if not (folder / "tokenizer.json").is_file():
        return None
    name = _read(folder / "tokenizer_config.json", missing_ok=True).get("tokenizer_class")
    if not isinstance(name, str) or not name.isidentifier():
        return None
    import transformers

    fast = name if name.endswith("Fast") else f"{name}Fast"
    try:
        return getattr(transformers, fast)
    except (AttributeError, ImportError):
        return None


def _pooling_mode(config: dict[str, Any]) -> str | None:
    mode = config.get("pooling_mode")
    if mode is not None:
        return mode if mode in ("mean", "cls") else None
    if any(config.get(flag) for flag in _OTHER_POOLING_FLAGS):
        return None
    mean = bool(config.get("pooling_mode_mean_tokens"))
    cls = bool(config.get("pooling_mode_cls_token"))
    if mean == cls:
        return None
    return "mean" if mean else "cls"


def _read(file: Path, *, missing_ok: bool = False) -> dict[str, Any]:
    if missing_ok and not file.is_file():
        return {}
    data = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{file} is not a JSON object")
    return data
