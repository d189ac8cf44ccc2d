"""A sentence read with the one before it (engine/rag/answer/sentence_pairs.py)."""

from __future__ import annotations

import numpy as np

from engine.rag.answer.sentence_pairs import PairedCosines, paired_cosines, previous_in_passage


def _unit(*values: float) -> np.ndarray:
    row = np.asarray(values, dtype=np.float32)
    return row / np.linalg.norm(row)


class _Table:
    """An embedder that knows each text's vector by name, and counts what it embeds."""

    def __init__(self, rows: dict[str, np.ndarray]) -> None:
        self.rows = rows
        self.asked: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.asked.extend(texts)
        return np.stack([self.rows[t] for t in texts])


QUESTION = _unit(1, 1, 0)


def _two(*, vectors: np.ndarray, texts: list[str], embed: _Table) -> PairedCosines:
    """Two sentences of one passage, read against QUESTION."""
    return paired_cosines(
        question=QUESTION, vectors=vectors, texts=texts, before=[-1, 0], embed=embed
    )


def test_the_sentence_before_is_the_previous_one_in_the_same_passage() -> None:
    first, second = object(), object()
    assert previous_in_passage([first, first, first, second, second]) == [-1, 0, 1, -1, 3]
    assert previous_in_passage([]) == []


def test_a_pair_that_says_what_neither_sentence_does_lifts_the_second() -> None:
    # "A configuration file is read at start." names the subject; "It is called
    # .linesrc." holds the fact: together they answer what neither does alone.
    vectors = np.stack([_unit(1, 0, 1), _unit(0, 1, 1)])
    embed = _Table({"names the subject holds the fact": _unit(1, 1, 0.2)})
    read = _two(vectors=vectors, texts=["names the subject", "holds the fact"], embed=embed)
    own = vectors @ QUESTION
    assert read.cosines[0] == own[0]
    assert read.cosines[1] > max(own)
    assert read.paired.tolist() == [False, True]
    assert embed.asked == ["names the subject holds the fact"]


def test_a_pair_that_only_carries_its_first_sentence_lifts_nothing() -> None:
    # The first sentence answers; the second is about something else. The pair reads
    # closer than the second alone, but not than the first: the second keeps its own.
    vectors = np.stack([_unit(1, 1, 0.1), _unit(0, 0, 1)])
    embed = _Table({"answers unrelated": _unit(1, 1, 0.8)})
    read = _two(vectors=vectors, texts=["answers", "unrelated"], embed=embed)
    assert np.array_equal(read.cosines, vectors @ QUESTION)
    assert not read.paired.any()


def test_only_the_most_promising_pairs_are_embedded() -> None:
    # Three pairs; the sum of its sentences' vectors says which promise most.
    texts = ["a", "b", "c", "d"]
    vectors = np.stack([_unit(1, 0, 0), _unit(0, 1, 0), _unit(0, 0, 1), _unit(0, 0.1, 1)])
    rows = {"a b": _unit(1, 1, 0), "b c": _unit(0, 1, 1), "c d": _unit(0, 0, 1)}
    embed = _Table(rows)
    read = paired_cosines(
        question=QUESTION, vectors=vectors, texts=texts, before=[-1, 0, 1, 2], embed=embed, read=1
    )
    assert embed.asked == ["a b"]
    assert read.paired.tolist() == [False, True, False, False]


def test_first_sentences_alone_call_no_embedder() -> None:
    embed = _Table({})
    vectors = np.stack([_unit(1, 0, 0), _unit(0, 1, 0)])
    read = paired_cosines(
        question=QUESTION, vectors=vectors, texts=["a", "b"], before=[-1, -1], embed=embed
    )
    assert embed.asked == []
    assert np.array_equal(read.cosines, vectors @ QUESTION)
