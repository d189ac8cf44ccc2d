"""The collection's words and languages, as the full-text index and the documents journal
know them: which documents hold a word (the relevance gate's lookups), which column
full-text search reads, and which languages the documents and the questions are in.

Kept apart from LanceStore, which owns the tables: this part holds only what it read
from them once (the index's stored config; the documents' languages per journal
version) and asks the tables through the store's callables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.rag.store import fulltext
from engine.rag.store import search as _search


class WordIndex:
    """Not thread-safe in its caches, which hold values that are the same whoever reads
    them first (a race reads a file or a table twice)."""

    def __init__(
        self,
        *,
        chunks: Callable[[], Any | None],
        documents: Callable[[], Any],
        config_file: Callable[[], Path | None],
    ) -> None:
        """`chunks`: the chunks table (None before an embedder made one); `documents`:
        the journal; `config_file`: where the index's config is kept (None: no table)."""
        self._chunks = chunks
        self._documents = documents
        self._config_file = config_file
        # (documents version, their languages): read again when the documents change.
        self._languages: tuple[int, fulltext.DocumentLanguages] | None = None
        # The full-text index's stored config, read once (False: none built yet).
        self._fulltext: fulltext.FulltextConfig | bool | None = None

    def forget_config(self) -> None:
        """The index was (re)built: its config is read again at the next lookup."""
        self._fulltext = None

    def config(self) -> fulltext.FulltextConfig | None:
        """The config the full-text index was built with; None when none was built."""
        if self._fulltext is None:
            file = self._config_file()
            if file is not None:
                self._fulltext = fulltext.stored_config(file) or False
        return self._fulltext or None

    def column(self) -> str | None:
        """The column whose full-text index search reads (None: no index yet)."""
        config = self.config()
        if config is None:
            return None
        return "words" if config.cut else "text"

    def word_documents(self, word: str) -> frozenset[str] | None:
        """The documents (paths) whose chunks hold `word` (`search.word_documents`);
        None when not known to be absent: no index to ask, or a word the index leaves
        out (a common word of some language)."""
        table = self._chunks()
        if table is None:
            return frozenset()
        config = self.config()
        if config is None or word.lower() in config.left_out():
            return None
        return _search.word_documents(table, word=word)

    def form_documents(self, word: str, *, fixed: int) -> frozenset[str] | None:
        """The documents whose chunks hold another form of `word`
        (`search.form_documents`); None when the index cannot be asked."""
        table = self._chunks()
        if table is None:
            return frozenset()
        if self.config() is None:
            return None
        return _search.form_documents(table, word=word, fixed=fixed)

    def holds_phrase(self, phrase: str) -> bool:
        """Whether a chunk holds `phrase`'s words in a row (`search.holds_phrase`)."""
        table = self._chunks()
        if table is None:
            return False
        return self.config() is None or _search.holds_phrase(table, phrase=phrase)

    def languages(self) -> fulltext.DocumentLanguages:
        """Read again only when the documents table changed (the window asks every few
        seconds, and every search batch asks)."""
        documents = self._documents()
        version = documents.version
        cached = self._languages
        if cached is None or cached[0] != version:
            cached = (version, fulltext.languages_of(documents))
            self._languages = cached
        return cached[1]

    def asked(self, texts: Sequence[str]) -> _search.Asked | None:
        """The questions' languages and the documents' (`search.Asked`); None while no
        document's language is known."""
        written = self.languages().by_document
        if not any(written.values()):
            return None
        from engine.rag.ingest.language import text_language

        return _search.Asked(languages=tuple(text_language(t) for t in texts), written_in=written)

    def asked_across(self, *, question: str, doc_ids: Sequence[str]) -> bool:
        """Whether `question` is asked in another language than every one of the
        documents `doc_ids` is written in (`search.Asked.across`)."""
        asked = self.asked([question])
        rows = [{"doc_id": d} for d in doc_ids]
        return asked is not None and asked.across(0, best=rows)
