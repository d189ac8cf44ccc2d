"""A model's answer made final: a bare-marker answer gives way to the sources' best
sentences with a note; any other keeps its words, its markers checked."""

from __future__ import annotations

import numpy as np
import pytest

from engine.rag.answer.written_answer import finish_written
from engine.rag.ingest.embedder import Embedder

PASSAGES = [
    "CREATE TABLE IF NOT EXISTS: if a table of the same name already exists, the "
    "statement has no effect and no error is raised.",
    "The shopt builtin toggles the values of settings controlling optional shell behavior.",
]
EXTRACT = (
    "If a table of the same name already exists, the statement has no effect and no error "
    "is raised."
)


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    model = Embedder()
    return lambda texts: np.asarray(model.embed(texts))


@pytest.mark.parametrize("reply", ["[2]", "Yes, [2]", "[1], …, [2]", ""])
def test_a_bare_marker_answer_shows_the_sources_sentences_and_says_so(embed, reply: str) -> None:  # type: ignore[no-untyped-def]
    got = finish_written(answer=reply, passages=PASSAGES, embed=embed, fallback=EXTRACT)
    assert got.text == EXTRACT[:-1] + " [1]."
    assert got.note is not None and "closest to the question" in got.note
    assert (reply.split(",")[0] or "nothing") in got.note


def test_an_answer_with_words_keeps_them_and_loses_a_wrong_marker(embed) -> None:  # type: ignore[no-untyped-def]
    reply = "If the table already exists, the statement does nothing and raises no error [2]."
    got = finish_written(answer=reply, passages=PASSAGES, embed=embed, fallback=EXTRACT)
    assert got.note is None
    assert got.text == reply.replace("[2]", "[1]")


def test_a_bare_answer_without_a_fallback_stays_what_it_was_less_its_markers(embed) -> None:  # type: ignore[no-untyped-def]
    got = finish_written(answer="Yes, [2]", passages=PASSAGES, embed=embed, fallback=None)
    assert got.text == "Yes," and got.note is None and got.markers.bare
