"""Which languages a document is written in, from its text (py3langid, BSD-3: a naive
Bayes over byte n-grams for 97 languages, numpy only).

A document's languages are stored with it (`DocumentRecord.languages`: ISO 639-1 codes,
the most text first). The collection's languages follow: the window offers a
multilingual embedder when they are not English, and the full-text index stems
with the collection's language (engine/rag/store/fulltext.py, `collection_languages`).
A question's language, when the guess is confident, is named in the prompt
(engine/rag/answer/prompt_turns.py): a small model asked in German by an English prompt
otherwise often answers in English.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from typing import Any

# Pages read for a guess: spread over the document, each cut to a sample; a long
# book's language shows in twenty of its pages, and a guess costs ~1 ms per page.
SAMPLE_PAGES = 20
SAMPLE_CHARS = 3000
# A sample classified below this probability (code, tables, a few words) does not vote.
MIN_CONFIDENCE = 0.8
# A language holding less of the confident text than this is not the document's
# (a quotation, a name, a misread page).
MIN_SHARE = 0.2
MIN_LETTERS = 40
# A question's guess short of MIN_CONFIDENCE still names the language when it is more
# likely than all the others together and the sources beside it are in that language:
# a short question splits its probability among close varieties ("¿Cómo se firma un
# paquete con debsign?": Spanish 0.52, Galician 0.19, Aragonese 0.15).
LIKELY = 0.5


def detect_languages(pages: Sequence[str]) -> tuple[str, ...]:
    """The languages of a document's pages, most text first; () when no page says."""
    chosen = _spread(pages)
    votes: Counter[str] = Counter()
    for text in chosen:
        sample = text[:SAMPLE_CHARS]
        if sum(ch.isalpha() for ch in sample) < MIN_LETTERS:
            continue
        language, probability = _identifier().classify(sample)
        if probability >= MIN_CONFIDENCE:
            votes[str(language)] += len(sample)
    total = sum(votes.values())
    if not total:
        return ()
    return tuple(lang for lang, n in votes.most_common() if n / total >= MIN_SHARE)


def text_language(text: str) -> str | None:
    """The language of a short text (a question), or None unless the guess is as
    confident as a document page's vote must be (MIN_CONFIDENCE)."""
    language, probability = _guess(text)
    return language if probability >= MIN_CONFIDENCE else None


def question_language(question: str, *, sources: Sequence[str]) -> str | None:
    """The language of a question asked about `sources`: `text_language`'s confident
    guess, or a likely one (LIKELY) that some source is confidently written in. The
    sources are evidence of what the asker reads, never a guess of their own: an
    English follow-up the identifier half reads as Nigerian Pidgin ("how do i get it
    changed?", 0.69) is named nothing over English sources, as before."""
    language, probability = _guess(question)
    if probability >= MIN_CONFIDENCE:
        return language
    if probability >= LIKELY and any(text_language(s) == language for s in sources):
        return language
    return None


def _guess(text: str) -> tuple[str, float]:
    """The identifier's language and probability for `text`; probability 0 without a
    letter to read."""
    if not any(ch.isalpha() for ch in text):
        return "", 0.0
    language, probability = _identifier().classify(text)
    return str(language), float(probability)


def preload() -> None:
    """Load the identifier now (~1 s; the engine's warm-up), not at the first question."""
    _identifier()


def language_name(code: str) -> str | None:
    """The English name of a language the identifier tells apart ("de" → "German")."""
    return _names().get(code)


@functools.cache
def _names() -> dict[str, str]:
    """resources/language_names.json (tools/make_language_names.py, from iso-codes)."""
    text = resources.files("resources").joinpath("language_names.json").read_text("utf-8")
    return dict(json.loads(text))


def _spread(pages: Sequence[str]) -> list[str]:
    if len(pages) <= SAMPLE_PAGES:
        return list(pages)
    step = len(pages) / SAMPLE_PAGES
    return [pages[int(i * step)] for i in range(SAMPLE_PAGES)]


@functools.cache
def _identifier() -> Any:
    """The model, loaded once per process (~4 s; it never changes)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
