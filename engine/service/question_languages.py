"""The languages the person asks in, as the engine has heard them since it started.

The window offers the multilingual embedder for a collection not written in English
(engine/rag/ingest/embedder_offer.py). A person who asks in German about English
documents needs it as much: the bundled embedder reads English only, so their
questions find pages by the names they share with them, and the check of a written
answer's markers cannot read a German sentence against an English page. The
questions' languages (the identifier's, where it is sure) are counted here for the
offer; nothing of them is kept beyond the process.
"""

from __future__ import annotations

import threading
from collections import Counter

from engine.rag.ingest.language import text_language


class QuestionLanguages:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def note(self, question: str) -> None:
        """Count `question`'s language, where the identifier is sure of it."""
        language = text_language(question)
        if language is not None:
            with self._lock:
                self._counts[language] += 1

    def heard(self) -> list[str]:
        """The languages questions were asked in, most asked first."""
        with self._lock:
            return [language for language, _ in self._counts.most_common()]
