"""Which languages a document is written in, from its text (py3langid, BSD-3: a naive
Bayes over byte n-grams for 97 languages, numpy only).

A document's languages are stored with it (`DocumentRecord.languages`: ISO 639-1 codes,
the most text first). The collection's languages follow: the window offers a
multilingual embedder when they are not English, and the full-text index stems
with the collection's language (engine/rag/store/fulltext.py, `collection_languages`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
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
