"""The collection's words and languages (engine/rag/store/word_index.py): what it says
before any table or index exists, and when it reads the index's config again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.rag.store import fulltext
from engine.rag.store.word_index import WordIndex


def _words(*, config_file: Path | None) -> WordIndex:
    return WordIndex(chunks=lambda: None, documents=lambda: None, config_file=lambda: config_file)


def test_without_a_chunks_table_no_word_is_held_and_no_phrase() -> None:
    words = _words(config_file=None)
    assert words.word_documents("pump") == frozenset()
    assert words.form_documents("pumpe", fixed=4) == frozenset()
    assert words.holds_phrase("Secure Boot") is False
    assert words.config() is None and words.column() is None


def test_the_index_config_is_read_once_until_the_index_is_built_again(tmp_path: Path) -> None:
    file = tmp_path / "fulltext-chunks.json"
    words = _words(config_file=file)
    assert words.column() is None  # no index built yet
    fulltext.remember_config(file, fulltext.ENGLISH)
    assert words.column() is None  # still what was read
    words.forget_config()
    assert words.column() == "text"
    fulltext.remember_config(file, replace(fulltext.ENGLISH, cut=True))
    words.forget_config()
    assert words.column() == "words"
