"""The full-text index's language: the collection's stemmer where one language holds
most of the text, English otherwise; built again when the language changes."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pyarrow as pa
import pytest

from engine.rag.store.fulltext import (
    ENGLISH,
    FulltextConfig,
    collection_languages,
    config_file,
    fulltext_config,
    language_shares,
    remember_config,
    stored_config,
)
from engine.rag.store.records import DocumentRecord


def _doc(languages: str, chunks: int, status: str = "indexed") -> DocumentRecord:
    return DocumentRecord(
        doc_id=languages + str(chunks),
        path="/x",
        size=1,
        mtime=0.0,
        content_hash="h",
        status=status,
        error=None,
        pages=1,
        chunks=chunks,
        languages=languages,
    )


def test_one_language_holding_most_chunks_chooses_its_stemmer() -> None:
    shares = language_shares([_doc("de", 90), _doc("de,en", 5), _doc("en", 5)])
    assert shares == {"de": 95, "en": 5}
    assert fulltext_config(shares) == FulltextConfig(language="German")


def test_mixed_or_unknown_or_unstemmable_collections_keep_english() -> None:
    assert fulltext_config({"de": 50, "fr": 50}) == ENGLISH
    assert fulltext_config({}) == ENGLISH
    assert fulltext_config({"ja": 100}) == ENGLISH
    assert language_shares([_doc("", 10), _doc("fr", 3, status="error")]) == {}


def test_collection_languages_by_their_share_of_chunks() -> None:
    assert collection_languages({"de": 900, "en": 100}) == ("de",)
    assert collection_languages({"de": 500, "fr": 400, "en": 100}) == ("de", "fr")
    assert collection_languages({}) == ()


def test_the_chosen_config_is_kept_beside_the_table(tmp_path: Path) -> None:
    file = config_file(tmp_path, "chunks_x")
    assert stored_config(file) is None
    remember_config(file, FulltextConfig(language="French"))
    assert stored_config(file) == FulltextConfig(language="French")


TEXTS = [
    "Die Sicherheitsaktualisierungen werden automatisch installiert.",
    "Les paquets installés sont mis à jour chaque nuit.",
    "Las actualizaciones de los paquetes se descargan una vez.",
]


@pytest.mark.parametrize(
    ("config", "word", "found"),
    [
        (FulltextConfig(language="German"), "Sicherheitsaktualisierung", True),
        (ENGLISH, "Sicherheitsaktualisierung", False),
        (FulltextConfig(language="Spanish"), "actualización", True),
        (FulltextConfig(language="French"), "installé", True),
    ],
)
def test_stemming_per_language(
    tmp_path: Path, config: FulltextConfig, word: str, found: bool
) -> None:
    table = lancedb.connect(str(tmp_path)).create_table(
        "t", pa.table({"id": ["1", "2", "3"], "text": TEXTS})
    )
    table.create_index("text", config=config.fts(), replace=True)
    hits = table.search(word, query_type="fts").limit(3).to_arrow().num_rows
    assert (hits > 0) is found
