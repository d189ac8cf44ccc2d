"""A real sentence-transformers model with random weights, written locally: a small
BERT, mean pooling and L2 normalisation saved the way sentence-transformers saves
a model folder, so that tests load it through the code users run. Nothing is
downloaded."""

from __future__ import annotations

from pathlib import Path

WORDS = (
    "the a of to and is in it for on with as by how what do i git bisect exit code "
    "owls ferns canals hunt night grow shade boats locks water record archive mentions "
    "amber basil cedar delta ember fjord garnet harbor indigo"
)


def write_random_embedder(
    folder: Path, *, hidden: int = 32, layers: int = 2, seed: int = 0
) -> Path:
    """Save the model under `folder` and return it; `hidden` is its vector size."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import BertConfig, BertModel, BertTokenizerFast

    raw = folder.parent / f"{folder.name}-bert"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS.split()))]
    vocab += [chr(c) for c in range(ord("a"), ord("z") + 1) if chr(c) not in vocab]
    vocab += [f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)]
    vocab += [str(d) for d in range(10)] + [f"##{d}" for d in range(10)]
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(raw / "vocab.txt")).save_pretrained(raw)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden * 2,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(raw)
    transformer = Transformer(str(raw), max_seq_length=128)
    pooling = Pooling(hidden, pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu").save(str(folder))
    return folder
