"""The gate's sentence vectors kept between answers (engine/rag/answer/sentence_memo.py)."""

from __future__ import annotations

import numpy as np

from engine.rag.answer.extractive import ExtractiveAnswerer
from engine.rag.answer.passages import Passage
from engine.rag.answer.sentence_memo import SentenceMemo


class _CountingEmbed:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        out = np.array([[len(t), t.count("e") + 1.0, 1.0] for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_kept_sentences_are_not_embedded_again_and_vectors_are_the_same() -> None:
    embed = _CountingEmbed()
    memo = SentenceMemo(size=10)
    first = memo.embed(first="q1", texts=["alpha one", "beta two"], embed=embed)
    assert embed.texts == ["q1", "alpha one", "beta two"]
    again = memo.embed(first="q2", texts=["beta two", "gamma three"], embed=embed)
    # Only the question and the sentence not seen before are embedded.
    assert embed.texts[3:] == ["q2", "gamma three"]
    assert np.allclose(again[1], first[2])
    assert np.allclose(again, embed(["q2", "beta two", "gamma three"]))
    assert (memo.hits, memo.misses) == (1, 3)


def test_rows_alone_embed_only_what_is_not_kept_and_nothing_when_all_are() -> None:
    embed = _CountingEmbed()
    memo = SentenceMemo(size=10)
    memo.embed(first="q1", texts=["alpha one"], embed=embed)
    embed.texts.clear()
    rows = memo.rows(texts=["alpha one", "beta two"], embed=embed)
    assert embed.texts == ["beta two"]
    assert np.allclose(rows, embed(["alpha one", "beta two"]))
    embed.texts.clear()
    memo.rows(texts=["beta two", "alpha one"], embed=embed)
    assert embed.texts == []


def test_the_oldest_go_first_and_another_embedder_empties_it() -> None:
    embed = _CountingEmbed()
    owner = ["minilm"]
    memo = SentenceMemo(size=2, key=lambda: owner[0])
    memo.embed(first="q", texts=["a", "b"], embed=embed)
    memo.embed(first="q", texts=["a"], embed=embed)  # "a" used last: "b" is the oldest
    memo.embed(first="q", texts=["c"], embed=embed)
    assert len(memo) == 2
    embed.texts.clear()
    memo.embed(first="q", texts=["a", "b"], embed=embed)
    assert embed.texts == ["q", "b"]
    owner[0] = "bge"
    embed.texts.clear()
    memo.embed(first="q", texts=["a"], embed=embed)
    assert embed.texts == ["q", "a"]


def test_an_extractive_answer_with_the_memo_is_the_same_answer() -> None:
    passages = [
        Passage(
            index=1,
            text="The bisect command finds the commit that introduced a bug. "
            "Use git bisect start to begin a session. Mark commits good or bad.",
            path="/d/git.txt",
            page=None,
        )
    ]
    embed = _CountingEmbed()
    plain = ExtractiveAnswerer(embed=embed).answer(question="How do I begin?", passages=passages)
    memo = SentenceMemo()
    kept = ExtractiveAnswerer(embed=embed, memo=memo)
    once = kept.answer(question="How do I begin?", passages=passages)
    embed.texts.clear()
    twice = kept.answer(question="How do I begin?", passages=passages)
    assert once == plain and twice == plain
    assert embed.texts == ["How do I begin?"]
