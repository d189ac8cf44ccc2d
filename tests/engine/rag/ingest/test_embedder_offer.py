"""engine/rag/ingest/embedder_offer.py: the multilingual embedder is offered for a
collection not in English, and for questions asked in another language than English,
while the embedder in force reads English only."""

from __future__ import annotations

from engine.rag.ingest.embedder_offer import NAME, across_note, embedder_offer

ENGLISH_ONLY = "all-MiniLM-L6-v2"


def test_a_collection_not_in_english_is_offered_the_multilingual_embedder() -> None:
    offer = embedder_offer(languages=["de", "en"], embedder=ENGLISH_ONLY)
    assert offer is not None and offer.name == NAME
    assert offer.languages == ["de", "en"] and offer.asked == []


def test_questions_in_another_language_than_english_are_offered_it_too() -> None:
    """German questions about English documents: the bundled embedder reads neither the
    questions nor, for the marker check, the answers written in German."""
    assert embedder_offer(languages=["en"], embedder=ENGLISH_ONLY, asked=["en"]) is None
    offer = embedder_offer(languages=["en"], embedder=ENGLISH_ONLY, asked=["en", "de", "fr"])
    assert offer is not None
    assert offer.languages == ["en"] and offer.asked == ["de", "fr"]


def test_nothing_is_offered_to_a_multilingual_embedder_or_an_empty_collection() -> None:
    multilingual = "/models/intfloat--multilingual-e5-small"
    assert embedder_offer(languages=["de"], embedder=multilingual, asked=["de"]) is None
    assert embedder_offer(languages=[], embedder=ENGLISH_ONLY, asked=["de"]) is None


def test_a_refusal_says_when_the_embedder_cannot_read_the_questions_language() -> None:
    german = "Wie sorge ich dafür, dass Sicherheitsupdates automatisch installiert werden?"
    note = across_note(question=german, documents=["en"], embedder=ENGLISH_ONLY)
    assert note is not None
    assert note.startswith("Your question is in German and your documents in English:")
    assert NAME in note
    # Not when the documents are in the question's language, the embedder is another
    # (multilingual, or one whose reach its name does not tell), or the question's
    # language is not sure.
    assert across_note(question=german, documents=["de", "en"], embedder=ENGLISH_ONLY) is None
    for other in ("/models/intfloat--multilingual-e5-small", "server:nomic@http://box"):
        assert across_note(question=german, documents=["en"], embedder=other) is None
    assert across_note(question="ok?", documents=["en"], embedder=ENGLISH_ONLY) is None
    assert across_note(question=german, documents=[], embedder=ENGLISH_ONLY) is None
