"""A question asked in a language the collection is not written in, translated by the
model in use into the collection's language and searched in it too.

The multilingual embedder finds a page across languages, if less well than in its own
language, and the full-text search finds nothing: a question shares no words with a page
in another language, save names. With a language model in use, the question is first
translated into the language most of the collection is written in (of the documents
the question may reach: a question asked of a folder reads that folder's; the pipeline's
rewrite stage: a short generation row, as a follow-up's rewrite is), and retrieval
searches the translation too, its ranking fused with the question's own
(engine/rag/pipeline/adapters.py). The answer is still written in the question's
language. The relevance gate reads the question as asked where the embedder reads both
languages, and as translated where it reads one (engine/rag/pipeline/answering.py).
Measured in docs/benchmarks-history.md ("Asked in a language none of the documents is in").
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.rag.ingest.language import language_name, text_language

TRANSLATE_INSTRUCTIONS = (
    "Translate the user's question into {language}. Keep names, commands and file names "
    "as they are. Reply with the translation only."
)
# A model that answers instead of translating writes far more than the question, or
# a statement where the question asks; such a reply is no search text.
_MOST_LONGER = 3.0
_ASKS = ("?", "？", "؟", ";")  # a question's end; Greek writes ";"


def translation_target(*, question: str, shares: Mapping[str, int]) -> str | None:
    """The language to translate `question` into before its search, from the chunks
    each language's documents hold (`shares`): the one that holds most of the
    collection (more than half), when the question is surely in a language no document
    is written in; else None. A collection with no main language (a library of many)
    gives no language to translate into: whichever is chosen, most of the documents
    are in others."""
    total = sum(shares.values())
    if not total:
        return None
    main, held = max(shares.items(), key=lambda kv: kv[1])
    if held * 2 <= total or language_name(main) is None:
        return None
    asked = text_language(question)
    if asked is None or shares.get(asked, 0) > 0:
        return None
    return main


def instructions(*, language: str) -> str:
    """The system message of a translation request into `language` (an ISO 639-1 code)."""
    return TRANSLATE_INSTRUCTIONS.format(language=language_name(language) or language)


def searched_translation(*, question: str, text: str | None) -> str:
    """The search text a translation row wrote (`text`; None when it failed): its first
    line, or "" when there is none or it is no translation: far longer than the
    question, or a statement where the question asks (an answer: "Ja, TeXworks
    unterstützt …" for "TeXworks permet-il … ?")."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0].strip("\"'“”„«»")
    if len(first) > _MOST_LONGER * max(len(question), 20) or first == question:
        return ""
    if question.rstrip().endswith(_ASKS) and not first.rstrip().endswith(_ASKS):
        return ""
    return first
