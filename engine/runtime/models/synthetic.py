"""Real model architectures with random weights, written to disk like a downloaded model.

No weights can be downloaded in tests or on a benchmark machine without internet, yet the
generative path, the planner and the benchmarks need a folder that loads exactly like a
Hugging Face checkpoint: config.json, safetensors weights, generation_config.json and a
tokenizer with a chat template. The text such a model writes is gibberish; its shapes,
memory use and speed are those of the real architecture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    LlamaConfig,
    MistralConfig,
    PretrainedConfig,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from engine.runtime.models.process_wide import one_at_a_time

Architecture = Literal["llama", "qwen2", "mistral"]

BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
# Role markers are single tokens so that a prompt's length in tokens stays predictable.
SPECIAL_TOKENS = [
    PAD_TOKEN,
    BOS_TOKEN,
    EOS_TOKEN,
    UNK_TOKEN,
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)

# Enough varied English for a byte-level BPE to learn common words and sub-words; the
# model's vocabulary size follows from what the trainer makes of it.
_CORPUS = """\
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a
single step. The air filter should be cleaned every month and replaced once a year. Water
boils at one hundred degrees Celsius at sea level. The invoice is due within thirty days of
the date shown on page three. Please read the safety instructions before you use the device.
The report says that sales grew by twelve percent in the second quarter, mostly in Europe.
Our meeting is on Tuesday at ten in the morning; bring the signed contract and your notes.
The warranty covers parts and labour for two years from the date of purchase. Keep the
receipt. Do not expose the battery to heat, fire or direct sunlight. Charge it fully before
first use. The doctor recommended rest, plenty of fluids and a follow-up visit next week.
Questions and answers: What is the deadline? Who signed the agreement? Where is the office?
When does the lease end? How much does the service cost? Why was the payment delayed?
According to the sources, the answer is not stated. I do not know. The document explains
how the system works, which parts it has, and what each part does. See figure 3 and table 2.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 15 20 25 30 50 100 2023 2024 2025 3.5 mm 12 kg 40 %.
Names, places and things: London, Paris, Berlin, Madrid, Rome, Monday, January, December,
engine, pump, valve, screen, button, cable, manual, chapter, section, paragraph, summary.
"""

# Weights go to disk in shards of at most this size: save_pretrained turns one shard at a
# time into bytes, so a large model needs its own size plus one shard of memory, not twice.
_MAX_SHARD_SIZE = "1GB"


def write_random_model(
    *,
    folder: Path,
    architecture: Architecture = "llama",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    vocab_size: int | None = None,
    max_position_embeddings: int = 2048,
    dtype: str = "float32",
    seed: int = 0,
) -> Path:
    """Write a loadable model with random weights into `folder` and return the folder.

    `vocab_size` defaults to the tokenizer's size; a larger one pads the embedding matrix
    (as real models do) so that benchmarks can mimic a real model's embedding cost.
    """
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")
    torch_dtype = _torch_dtype(dtype)
    folder.mkdir(parents=True, exist_ok=True)

    tokenizer = build_tokenizer()
    if vocab_size is None:
        vocab_size = len(tokenizer)
    elif vocab_size < len(tokenizer):
        raise ValueError(
            f"vocab_size {vocab_size} is smaller than the tokenizer ({len(tokenizer)})"
        )

    config = _config(
        architecture=architecture,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    # Built directly in the target dtype: building in float32 and converting would hold
    # both copies at once, which matters for the benchmark-sized models.
    with one_at_a_time():
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    model.save_pretrained(folder, max_shard_size=_MAX_SHARD_SIZE)
    del model
    tokenizer.save_pretrained(folder)
    _name_tokenizer_class(folder=folder)
    return folder


def _name_tokenizer_class(*, folder: Path) -> None:
    # transformers 5 records its internal class name (TokenizersBackend), which older
    # transformers cannot load; PreTrainedTokenizerFast means the same to both.
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained in memory on a built-in text, with a chat template."""
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    # trim_offsets=False keeps offsets honest; the post-processor adds nothing by itself:
    # the chat template writes bos, which keeps tokenised chat prompts free of a double bos.
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        model_max_length=1_000_000,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _config(
    *,
    architecture: Architecture,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    intermediate_size: int,
    vocab_size: int,
    max_position_embeddings: int,
    bos_token_id: int,
    eos_token_id: int,
    pad_token_id: int,
) -> PretrainedConfig:
    common = {
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads,
        "intermediate_size": intermediate_size,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "pad_token_id": pad_token_id,
        "tie_word_embeddings": False,
    }
    if architecture == "llama":
        return LlamaConfig(**common)
    if architecture == "qwen2":
        return Qwen2Config(**common)
    if architecture == "mistral":
        # Mistral's sliding window is what distinguishes it from Llama for the planner.
        return MistralConfig(**common, sliding_window=min(4096, max_position_embeddings))
    raise ValueError(f"unknown architecture {architecture!r}; expected llama, qwen2 or mistral")


def _torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"unknown floating-point dtype {name!r}")
    return dtype
