"""A question asked in a language the collection is not written in is translated first
(engine/rag/answer/translation.py): when, into what, and what of the model's reply is
searched."""

from __future__ import annotations

import pytest

from engine.rag.answer.translation import instructions, searched_translation, translation_target

GERMAN = "Wie sorge ich dafür, dass Sicherheitsupdates automatisch installiert werden?"
ENGLISH = "How do I keep a package at its current version so apt does not upgrade it?"


def test_a_question_in_a_language_no_document_is_in_goes_to_the_main_one() -> None:
    assert translation_target(question=ENGLISH, shares={"de": 533}) == "de"
    assert translation_target(question=GERMAN, shares={"en": 700, "fr": 300}) == "en"


def test_a_question_in_a_language_some_document_is_in_is_searched_as_asked() -> None:
    assert translation_target(question=GERMAN, shares={"en": 900, "de": 12}) is None
    assert translation_target(question=ENGLISH, shares={"en": 1}) is None


def test_a_collection_of_many_languages_none_of_them_most_is_not_translated_into() -> None:
    # The blind corpus: Indonesian holds the most, a fifth; an answer is as likely in
    # any of the others.
    shares = {"id": 1054, "fr": 654, "es": 590, "de": 533, "pt": 321, "bg": 223}
    assert translation_target(question=ENGLISH, shares=shares) is None
    assert translation_target(question=ENGLISH, shares={"de": 500, "fr": 500}) is None


@pytest.mark.parametrize("question", ["pump?", "42", "apt-mark"])
def test_a_question_whose_language_is_not_sure_is_not_translated(question: str) -> None:
    assert translation_target(question=question, shares={"de": 533}) is None


def test_nothing_is_translated_for_a_collection_of_no_known_language() -> None:
    assert translation_target(question=ENGLISH, shares={}) is None
    assert translation_target(question=ENGLISH, shares={"xx": 40}) is None


def test_the_instructions_name_the_language() -> None:
    assert "into German." in instructions(language="de")


def test_the_search_text_is_the_replys_first_line_unquoted() -> None:
    reply = "„Wie halte ich ein Paket auf seiner Version?“\nDas heißt: apt-mark hold."
    assert searched_translation(question=ENGLISH, text=reply) == (
        "Wie halte ich ein Paket auf seiner Version?"
    )
    assert searched_translation(question=ENGLISH, text='"Wie halte ich es?"') == "Wie halte ich es?"


def test_a_failed_empty_unchanged_or_answering_reply_searches_nothing_more() -> None:
    assert searched_translation(question=ENGLISH, text=None) == ""
    assert searched_translation(question=ENGLISH, text=" \n ") == ""
    assert searched_translation(question=ENGLISH, text=ENGLISH) == ""
    answer = "Um ein Paket zu halten, " + "verwenden Sie apt-mark hold und prüfen Sie " * 10
    assert searched_translation(question=ENGLISH, text=answer) == ""
    # A statement where the question asks is an answer, however short.
    said = "Um ein PDF in EPS umzuwandeln, verwenden Sie pdftops."
    assert searched_translation(question="¿Cómo convierto un PDF en EPS?", text=said) == ""
    assert searched_translation(question="Πώς κάνω εγκατάσταση;", text="How do I install?")
    assert searched_translation(question="pdf to eps", text="PDF in EPS") == "PDF in EPS"
