"""The cross-encoder reranker: the blend on fixed scores, then a real cross-encoder
architecture with random weights, written locally, through the loading code users run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.errors import ModelLoadError
from engine.rag.answer.reranker import Reranker, focus, rerank_hits
from engine.rag.store.records import ChunkRecord, SearchHit


def hit(n: int, text: str = "") -> SearchHit:
    chunk = ChunkRecord(
        chunk_id=f"d:{n}",
        doc_id="d",
        path="/docs/manual.pdf",
        ordinal=n,
        page=n + 1,
        char_start=0,
        char_end=len(text),
        text=text or f"passage number {n}",
        text_hash=str(n),
    )
    return SearchHit(chunk=chunk, similarity=0.5, fused=1.0 / (n + 1))


def test_a_clear_cross_encoder_winner_moves_up_and_the_rest_keeps_retrieval_order() -> None:
    hits = [hit(i) for i in range(6)]
    scores = np.array([0.1, 0.0, -1.0, -2.0, 5.0, -3.0], dtype=np.float32)
    out = rerank_hits(hits=hits, scores=scores, k=3)
    assert [h.chunk.ordinal for h in out] == [0, 4, 1]
    assert out[0].fused >= out[1].fused >= out[2].fused


def test_no_hits_no_work() -> None:
    assert rerank_hits(hits=[], scores=np.zeros(0), k=5) == []


def write_random_cross_encoder(folder: Path, *, layers: int = 2, hidden: int = 32) -> Path:
    """A BERT sequence classifier (the architecture of the ms-marco cross-encoders) with
    random weights and a small word-piece vocabulary, saved as a model folder."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = "the a of to and is in it for on with as by how what do i git bisect exit code"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words.split()))]
    vocab += [chr(c) for c in range(ord("a"), ord("z") + 1) if chr(c) not in vocab]
    vocab += [f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden * 4,
        max_position_embeddings=512,
        num_labels=1,
    )
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def random_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_cross_encoder(tmp_path_factory.mktemp("reranker") / "tiny-cross-encoder")


def test_a_local_cross_encoder_loads_and_reorders_the_candidates(
    random_cross_encoder: Path,
) -> None:
    reranker = Reranker(model=str(random_cross_encoder))
    texts = ["git bisect exit code", "the a of to", "how do i bisect", "code for it"]
    scores = reranker.scores(question="what exit code do i use", texts=texts)
    assert scores.shape == (4,) and np.isfinite(scores).all()
    # One pass is deterministic: the same pairs score the same.
    again = reranker.scores(question="what exit code do i use", texts=texts)
    np.testing.assert_allclose(scores, again, rtol=1e-5)

    hits = [hit(i, t) for i, t in enumerate(texts)]
    out = reranker.rerank(question="what exit code do i use", hits=hits, k=2)
    assert len(out) == 2 and {h.chunk.chunk_id for h in out} <= {h.chunk.chunk_id for h in hits}
    assert out[0].chunk.ordinal == int(np.argmax(-(0.7 * _ranks(-scores) + 0.3 * np.arange(4))))
    assert reranker.scores(question="q", texts=[]).shape == (0,)


def _ranks(values: np.ndarray) -> np.ndarray:
    out = np.empty(len(values))
    out[np.argsort(values, kind="stable")] = np.arange(len(values))
    return out


def test_a_missing_reranker_says_where_it_looks(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="Recommended models"):
        Reranker(model=str(tmp_path / "no-such-reranker"))


def test_on_a_cpu_the_linear_layers_run_as_int8_and_score_close_to_fp32(
    random_cross_encoder: Path,
) -> None:
    import torch

    fast = Reranker(model=str(random_cross_encoder))
    exact = Reranker(model=str(random_cross_encoder), quantize=False)
    assert fast.quantized and not exact.quantized
    kinds = {type(m).__module__ for m in fast._model.modules()}
    assert any("quantized" in k for k in kinds)
    assert not any(type(m) is torch.nn.Linear for m in fast._model.modules())
    texts = ["git bisect exit code", "the a of to", "how do i bisect", "code for it"]
    a = fast.scores(question="what exit code do i use", texts=texts)
    b = exact.scores(question="what exit code do i use", texts=texts)
    assert np.isfinite(a).all()
    np.testing.assert_allclose(a, b, atol=0.05 * (np.abs(b).max() + 1e-3) + 0.02)


def test_the_cross_encoder_reads_the_sentences_around_the_one_sharing_the_questions_words() -> None:
    filler = [
        f"Filler sentence number {i} talks about printers and paper trays." for i in range(12)
    ]
    fact = "The bisect run script exits with code 125 when a commit cannot be tested."
    after = "Any other code above 127 aborts the bisect session."
    text = " ".join([*filler[:6], fact, after, *filler[6:]])
    out = focus(
        question="Which exit code skips an untestable commit in bisect?", text=text, words=40
    )
    assert fact in out and after in out
    assert len(out.split()) <= 40
    assert out.startswith(("Filler", "The")) and out.endswith(".")  # whole sentences
    short = "git bisect skip marks a commit as untestable."
    assert focus(question="skip a commit", text=short, words=40) == short


def test_the_focus_makes_the_pairs_shorter_through_the_loading_code(
    random_cross_encoder: Path,
) -> None:
    reranker = Reranker(model=str(random_cross_encoder), focus_words=40)
    whole = Reranker(model=str(random_cross_encoder), focus_words=None)
    assert reranker.focus_words is not None and whole.focus_words is None
    long = " ".join(["The a of to and is in it for on with as by."] * 40)
    hits = [hit(i, long + (" git bisect exit code." if i == 2 else "")) for i in range(4)]
    question = "git bisect exit code"
    out = reranker.rerank(question=question, hits=hits, k=4)
    read = [focus(question=question, text=h.chunk.text, words=40) for h in hits]
    assert read[2].endswith("git bisect exit code.") and len(read[2].split()) <= 40
    expected = rerank_hits(hits=hits, scores=reranker.scores(question=question, texts=read), k=4)
    assert [h.chunk.ordinal for h in out] == [h.chunk.ordinal for h in expected]
    assert reranker._model.max_seq_length < whole._model.max_seq_length
