"""The sentence choice's features and weights, as the extractive answerer reads them."""

from __future__ import annotations

import numpy as np

from engine.rag.answer.extractive import ExtractiveAnswerer, score_sentences
from engine.rag.answer.sentence_choice import (
    CHOICE_WEIGHTS,
    FEATURES,
    HAND_WEIGHTS,
    RELEVANCE,
    ChoiceWeights,
)
from tests.engine.rag.answer.test_extractive import FILTER, WARRANTY, bag_of_words, passage


def test_weights_are_read_in_the_order_of_the_features() -> None:
    values = np.arange(len(FEATURES), dtype=np.float32)
    weights = ChoiceWeights.of(values)

    assert weights.lexical == 1.0 and weights.asked == len(FEATURES) - 1
    assert np.array_equal(weights.vector(), values)


def test_the_gates_relevance_leaves_out_what_only_the_choice_reads() -> None:
    # An unanswerable question's sentences must not pass the gate for sitting in the
    # first passage or holding a path: those count for the choice alone.
    for name in ("neighbour", "rank", "asked"):
        assert getattr(RELEVANCE, name) == 0.0
        assert getattr(HAND_WEIGHTS, name) > 0.0
    for name in ("semantic", "lexical", "code", "number", "heading", "fragment"):
        assert getattr(RELEVANCE, name) == getattr(HAND_WEIGHTS, name)


def test_the_table_holds_each_scored_sentence_with_the_gates_relevance() -> None:
    question = "How often is the air filter cleaned?"
    table = ExtractiveAnswerer(embed=bag_of_words).table(
        question=question, passages=[WARRANTY, FILTER]
    )
    assert table is not None
    texts = [c.text for c in table.candidates]
    assert table.features.shape == (len(texts), len(FEATURES))
    vectors = bag_of_words([question, *texts])
    expected = score_sentences(
        question=question, sentences=texts, semantic=vectors[1:] @ vectors[0]
    )
    assert np.allclose(table.relevance, expected, atol=1e-5)  # no fragment here
    assert np.allclose(table.relevance, table.features @ RELEVANCE.vector(), atol=1e-6)
    # The first passage's sentences rank higher than the second's.
    rank = table.features[:, FEATURES.index("rank")]
    assert rank[0] > rank[-1]


def test_what_a_candidate_would_show_is_what_the_answer_shows_when_it_is_chosen() -> None:
    answerer = ExtractiveAnswerer(embed=bag_of_words)
    question = "How often is the air filter cleaned?"
    table = answerer.table(question=question, passages=[WARRANTY, FILTER])
    assert table is not None
    best = int(np.argmax(table.features @ CHOICE_WEIGHTS.vector()))

    answer = answerer.answer(question=question, passages=[WARRANTY, FILTER], max_sentences=1)
    assert table.shown(best) == answer.text


def test_the_weights_given_decide_which_sentence_answers() -> None:
    passages = [
        passage(1, "Filters are part of the unit. The unit has a filter and a pump inside."),
        passage(2, "Clean the filter every month with water and soap, then let it dry."),
    ]
    question = "How often do I clean the filter?"
    first_passage_only = ChoiceWeights.of([1.0 if name == "rank" else 0.0 for name in FEATURES])

    def key(weights: ChoiceWeights) -> str:
        answerer = ExtractiveAnswerer(embed=bag_of_words, weights=weights, min_score=-1.0)
        return answerer.answer(question=question, passages=passages, max_sentences=1).key

    assert key(CHOICE_WEIGHTS).startswith("Clean the filter every month")
    assert key(first_passage_only).startswith("Filters are part of the unit")
