"""GGUF tokenizers as RAGDoll rebuilds them, against the Hugging Face ids llama.cpp
recorded for its test strings.

llama.cpp's source (e.g. the llama-cpp-python sdist's vendor/llama.cpp/models) holds
vocabulary-only GGUF files of real models' tokenizers, `ggml-vocab-NAME.gguf`, with test
strings (`.inp`) and the ids the model's Hugging Face tokenizer gives them (`.out`):

    python tools/gguf_vocab_check.py MODELS_DIR qwen2 llama-bpe llama-spm
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from transformers import AutoTokenizer

from engine.runtime.models.gguf_file import gguf_fields, sentencepiece_prefix, write_tokenizer

SEPARATOR = "\n__ggml_vocab_test__\n"


def check(*, models: Path, name: str) -> tuple[int, int, list[str]]:
    """(identical, strings, the first few that differ) for one vocabulary."""
    path = models / f"ggml-vocab-{name}.gguf"
    texts = (models / f"{path.name}.inp").read_text(encoding="utf-8").split(SEPARATOR)
    expected = (models / f"{path.name}.out").read_text(encoding="utf-8").split("\n")
    with tempfile.TemporaryDirectory() as folder:
        write_tokenizer(
            gguf_path=path,
            folder=Path(folder),
            template=None,
            sentencepiece_prefix=sentencepiece_prefix(gguf_fields(path)),
        )
        tokenizer = AutoTokenizer.from_pretrained(folder)
    pairs = list(zip(texts, expected, strict=False))
    differ = [
        repr(text[:40])
        for text, ids in pairs
        if tokenizer(text, add_special_tokens=False).input_ids != [int(i) for i in ids.split()]
    ]
    return len(pairs) - len(differ), len(pairs), differ[:3]


def main(argv: list[str]) -> int:
    models = Path(argv[0])
    for name in argv[1:]:
        same, total, differ = check(models=models, name=name)
        print(f"{name}: {same} of {total} identical" + (f"; differ: {differ}" if differ else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
