"""A question's translation as a stage of the pipeline (workers.py, follow_up.py
`after_translation`): submitted with `translate_to`, the question is a generation row
first, and retrieval then has the question as asked with the model's translation
beside it; the reader hears the translation (`Translated`) before the search. A
translation that fails searches the question as asked."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from engine.rag.pipeline.requests import Finished, Piece, Question, Retrieved, Translated
from engine.rag.pipeline.stages import DONE, GenerationJob, RowFailed, Stages
from engine.rag.pipeline.workers import Pipeline

WAIT_S = 10.0
ASKED = "How do I keep a package at its current version?"
GERMAN = "Wie halte ich ein Paket auf seiner aktuellen Version?"


class Fakes:
    def __init__(self, *, reply: str | RowFailed) -> None:
        self.reply = reply
        self.searched: list[tuple[str, str]] = []  # (text, translated) per question
        self.rows: list[str] = []

    def retrieve(self, questions: Sequence[Question]) -> list[str]:
        self.searched += [(q.text, q.translated) for q in questions]
        return [f"hits({q.text}|{q.translated})" for q in questions]

    def generate(self, jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, object]]:
        for j in jobs:
            if j.question.translate_to:
                self.rows.append(f"translate:{j.question.translate_to}")
                assert j.hits is None  # a translation reads no passages
                if isinstance(self.reply, RowFailed):
                    yield j.request_id, self.reply
                    continue
                yield j.request_id, Piece(text=self.reply, tokens=9)
            else:
                self.rows.append("answer")
                yield j.request_id, Piece(text=f"answer({j.hits})", tokens=2)
            yield j.request_id, DONE


def test_a_question_is_translated_then_searched_as_asked_and_as_translated() -> None:
    fakes = Fakes(reply=f"{GERMAN}\n(translated from English)")
    pipe = Pipeline(stages=Stages(retrieve=fakes.retrieve, generate=fakes.generate), start=False)
    handle = pipe.submit(question=ASKED, translate_to="de")
    assert not pipe.retrieval.run_once()  # nothing to search before the translation
    assert pipe.generation.run_once()
    assert pipe.retrieval.run_once() and pipe.generation.run_once()
    events = list(handle.events(timeout=WAIT_S))
    assert fakes.rows == ["translate:de", "answer"]
    assert fakes.searched == [(ASKED, GERMAN)]
    assert [type(e) for e in events] == [Translated, Retrieved, Piece, Finished]
    translated = events[0]
    assert isinstance(translated, Translated) and translated.text == GERMAN
    assert handle.question.translate_to is None and handle.question.text == ASKED
    assert handle.tokens == 2  # the translation's tokens are nobody's answer


@pytest.mark.parametrize("reply", [RowFailed(message="server gone"), ""])
def test_a_translation_that_fails_searches_the_question_as_asked(reply: str | RowFailed) -> None:
    fakes = Fakes(reply=reply)
    pipe = Pipeline(stages=Stages(retrieve=fakes.retrieve, generate=fakes.generate), start=False)
    handle = pipe.submit(question=ASKED, translate_to="de")
    assert pipe.generation.run_once()
    assert pipe.retrieval.run_once() and pipe.generation.run_once()
    events = list(handle.events(timeout=WAIT_S))
    assert fakes.searched == [(ASKED, "")]
    assert [type(e) for e in events] == [Retrieved, Piece, Finished]


def test_a_rewritten_follow_up_is_not_translated_too() -> None:
    from engine.rag.answer.conversation import resolve
    from engine.rag.pipeline.requests import new_question
    from engine.wire import Turn

    history = (Turn(question="How do I hold a package?", answer="apt-mark hold."),)
    follow = resolve(question="and undo it?", history=history)
    with pytest.raises(ValueError, match="not translated"):
        new_question(text=ASKED, conversation=follow, rewrite=True, translate_to="de")


def test_without_a_model_a_translation_row_fails_and_the_question_is_searched_as_asked() -> None:
    """A row handed over to the extractive pipelines (the model was turned off meanwhile)."""
    import threading

    import numpy as np

    from engine.rag.pipeline.adapters import extractive_generate_batch

    generate = extractive_generate_batch(embed=lambda texts: np.ones((len(texts), 2), np.float32))
    job = GenerationJob(
        request_id="t",
        question=Question(request_id="t", text=ASKED, translate_to="de"),
        hits=None,
        cancel=threading.Event(),
    )
    ((request_id, piece),) = list(generate([job]))
    assert request_id == "t" and isinstance(piece, RowFailed)
