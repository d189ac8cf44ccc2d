"""Which languages a document is written in: real pages in German, French and Spanish
(the blind corpus, bench/blind_docs.py) and a page mixing two languages."""

from __future__ import annotations

import pytest

from bench.blind_docs import find_blind_docs
from engine.rag.ingest.language import (
    detect_languages,
    language_name,
    question_language,
    text_language,
)
from engine.rag.ingest.parsers import parse_file


@pytest.mark.parametrize(
    ("name", "language"),
    [
        ("faq-de-uptodate.html", "de"),
        ("live-manual.fr.epub", "fr"),
        ("maint-guide.es.pdf", "es"),
        ("tugboat-babelbib.pdf", "en"),
    ],
)
def test_a_real_document_is_found_in_its_language(name: str, language: str) -> None:
    corpus = find_blind_docs()
    if corpus is None:
        pytest.skip("the blind documents are not fetched: python -m bench.blind_docs")
    pages = [p.text for p in parse_file(path=corpus / name).pages]
    assert detect_languages(pages)[0] == language


def test_two_languages_are_both_named_most_text_first() -> None:
    german = (
        "Pakete können direkt aktualisiert werden, sogar in laufenden Systemen. Debian "
        "verfügt über ein Programm, das laufende Prozesse anhält und wieder startet. "
    ) * 4
    french = "Il suffit d'installer live-build comme n'importe quel autre paquet. " * 8
    assert detect_languages([german, french, german]) == ("de", "fr")


def test_pages_without_words_say_nothing() -> None:
    assert detect_languages(["12 34 56", "", "--- | --- |"]) == ()


@pytest.mark.parametrize(
    ("question", "language"),
    [
        ("Mit welchem Paket fließt der Text um ein Bild herum?", "de"),
        ("Quel raccourci clavier lance la composition dans TeXworks ?", "fr"),
        ("¿Cuál es la forma más fácil de poner interlineado doble?", "es"),
        ("Jak zainstalować pakiet z pliku?", "pl"),
        ("How do I stop a script when a command fails?", "en"),
    ],
)
def test_a_question_is_told_in_its_language(question: str, language: str) -> None:
    assert text_language(question) == language


def test_a_text_too_short_to_tell_names_no_language() -> None:
    assert text_language("12 + 4 = ?") is None
    assert text_language("") is None
    assert text_language("pst-eucl?") is None


def test_every_language_the_identifier_tells_has_an_english_name() -> None:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    codes = set(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes) - {"zxx"}
    assert {c for c in codes if not language_name(c)} == set()
    assert (language_name("de"), language_name("uk")) == ("German", "Ukrainian")


_SPANISH = (
    "Para firmar el paquete, ejecuta debsign con el nombre del fichero de cambios; la "
    "orden te pedirá la frase de contraseña de tu clave GPG dos veces."
)
_ENGLISH = (
    "To sign the package, run debsign with the name of the changes file; it asks for "
    "the passphrase of your GPG key twice."
)


def test_a_short_question_is_told_by_the_sources_it_reads() -> None:
    # Spanish 0.52 beside Galician and Aragonese: below a page's confidence alone.
    question = "¿Cómo se firma un paquete con debsign?"
    assert text_language(question) is None
    assert question_language(question, sources=[_ENGLISH, _SPANISH]) == "es"
    assert question_language(question, sources=[_ENGLISH]) is None
    assert question_language(question, sources=[]) is None


def test_sources_never_name_a_language_the_question_is_unlikely_in() -> None:
    assert question_language("Wie signiere ich ein Paket?", sources=[_ENGLISH]) == "de"
    # Read as Nigerian Pidgin at 0.69: English sources do not make it that.
    assert question_language("how do i get it changed?", sources=[_ENGLISH]) is None
    assert question_language("dh_make?", sources=[_SPANISH]) is None
    assert question_language("42 ?", sources=[_SPANISH]) is None
