"""Fitting the sentence choice and the gate: replay, labels, the fits, on made-up records."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from bench.sentence_fit import (
    Candidates,
    Record,
    candidates,
    dump,
    load_records,
    replay,
    totals,
)
from bench.sentence_fit_model import fit_choice, fit_gate, gated, report
from engine.rag.answer.passages import Passage
from engine.rag.answer.sentence_choice import FEATURES, HAND_WEIGHTS
from tests.engine.rag.answer.test_extractive import bag_of_words

FILTER = (
    "Regular maintenance keeps the unit efficient. The air filter is cleaned every month "
    "with warm water. The pump needs no maintenance at all."
)
WARRANTY = (
    "The warranty covers parts and labour for two years. Keep the receipt as proof of "
    "purchase. Damage caused by misuse is not covered by the warranty."
)


def record(
    question: str, answer: str, *, split: str = "tune", texts: tuple[str, ...] = (FILTER, WARRANTY)
) -> Record:
    from engine.rag.answer.extractive import ExtractiveAnswerer

    passages = tuple(
        Passage(index=i + 1, text=t, path="doc.pdf", page=1) for i, t in enumerate(texts)
    )
    seen: dict[str, np.ndarray] = {}

    def embed(batch: list[str]) -> np.ndarray:
        rows = bag_of_words(batch)
        seen.update(zip(batch, rows, strict=True))
        return rows

    ExtractiveAnswerer(embed=embed).answer(question=question, passages=list(passages))
    return Record(
        id=question,
        split=split,
        question=question,
        answer=answer,
        passages=passages,
        similarity=0.8,
        checked=True,
        unknown=(),
        vectors=seen,
    )


def test_a_replay_gives_the_products_answer_from_the_kept_vectors() -> None:
    records = [
        record("How often is the air filter cleaned?", "every month"),
        record("How long does the warranty cover parts?", "two years"),
        record("What is the capital of France?", ""),
    ]
    replayed = replay(records)

    assert [x.contains for x in replayed] == [True, True, False]
    assert replayed[2].refused
    assert totals(replayed) == {
        "answerable": 2,
        "contains": 2,
        "answerable_refused": 0,
        "unanswerable": 1,
        "unanswerable_refused": 1,
    }
    # A gate that refuses everything refuses the answerable ones too.
    assert totals(replay(records, gate=lambda r, score: True))["answerable_refused"] == 2


def test_each_candidate_is_labelled_by_what_the_answer_would_show(tmp_path: Path) -> None:
    (c,) = candidates([record("How often is the air filter cleaned?", "every month")])

    assert c.features.shape[1] == len(FEATURES)
    # The answer sentence and the sentences whose quotation reaches it hold the string;
    # the warranty's sentences do not.
    assert c.labels.any() and not c.labels.all()
    assert not c.labels[-1]
    out = tmp_path / "dump.csv"
    assert dump([record("How often is the air filter cleaned?", "every month")], out=out) == len(
        c.labels
    )
    header = out.read_text().splitlines()[0].split(",")
    assert header == ["id", "split", "sentence", *FEATURES, "label"]


def test_records_load_back(tmp_path: Path) -> None:
    records = [record("How often is the air filter cleaned?", "every month")]
    path = tmp_path / "records.pkl"
    path.write_bytes(pickle.dumps(records))

    (back,) = load_records(path)
    assert back.question == records[0].question and back.passages == records[0].passages


def test_the_choice_fit_weighs_the_feature_that_marks_the_answer() -> None:
    rng = np.random.default_rng(0)
    made_up = []
    for _ in range(40):
        x = rng.normal(size=(12, len(FEATURES))).astype(np.float32)
        x[:, 0] = np.abs(x[:, 0])  # cosine similarity: the fit's scale is set by it
        labels = np.zeros(12, dtype=bool)
        labels[int(np.argmax(x[:, 0] + 2.0 * x[:, 1]))] = True
        made_up.append(Candidates(record=None, features=x, labels=labels))  # type: ignore[arg-type]
    weights = fit_choice(made_up)

    assert weights.semantic == 1.0
    assert weights.lexical > 0.5
    assert abs(weights.code) < weights.lexical


def test_the_fitted_gate_refuses_no_more_answerable_questions_than_allowed() -> None:
    answerable = record("How often is the air filter cleaned?", "month")
    unanswerable = record("What is the warranty on a filter pump in France?", "")
    gate = fit_gate([answerable] * 5 + [unanswerable] * 3, weights=HAND_WEIGHTS, refused_share=0)
    refuses = gated(gate, weights=HAND_WEIGHTS)

    assert not refuses(answerable, 0.0)
    assert refuses(unanswerable, 0.0)


def test_held_questions_are_never_fitted_on() -> None:
    with pytest.raises(AssertionError):
        report([record("How often is the air filter cleaned?", "month", split="held")])
