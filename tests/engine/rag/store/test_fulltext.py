"""The full-text index's language: the collection's stemmer where one language holds
most of the text, English otherwise; built again when the language changes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import lancedb
import pyarrow as pa
import pytest

from engine.rag.store.fulltext import (
    ENGLISH,
    FulltextConfig,
    ascii_folded,
    collection_languages,
    config_file,
    cut_words,
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
    assert fulltext_config(shares) == replace(ENGLISH, language="German")


def test_mixed_or_unstemmable_collections_are_searched_over_cut_words() -> None:
    assert fulltext_config({"de": 50, "fr": 50}) == replace(ENGLISH, cut=True)
    assert fulltext_config({"cs": 100}) == replace(ENGLISH, cut=True)  # no Czech stemmer
    # Languages not known (read before they were detected): the English stemmer, as before.
    assert fulltext_config({}) == ENGLISH
    assert language_shares([_doc("", 10), _doc("fr", 3, status="error")]) == {}
    # A config file written before the field was recorded reads as what it built.
    assert FulltextConfig(language="French").cut is False


def test_words_are_cut_where_a_script_spaces_its_words() -> None:
    assert cut_words("Nainštalovaných balíčkov") == "nainš balíč"
    assert cut_words("перенести и переносить") == "перен и перен"
    assert cut_words("dh_make file.txt v2.10") == "dh_ma file.txt v2.10"
    # A run of Chinese is many words, a Korean word a stem with its particles: whole.
    assert cut_words("安装软件包的命令 윈도우에서 XCF로") == "安装软件包的命令 윈도우에서 xcf로"


def test_every_collection_breaks_words_by_icu_and_at_punctuation() -> None:
    for shares in ({"zh": 100}, {"ja": 5, "de": 95}, {"en": 100}, {}):
        assert fulltext_config(shares).tokenizer == "icu/split", shares
    # A config file written before either field was recorded reads as what it built.
    assert FulltextConfig(language="French") == FulltextConfig(
        language="French", tokenizer="simple", every_language=False
    )


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


def test_every_language_s_common_words_are_left_out_of_the_index(tmp_path: Path) -> None:
    # A German question's "wie" and "der" matched every German chunk and outranked the
    # French page that answers it.
    texts = ["Wie der Drucker eingerichtet wird", "Configurer l'imprimante réseau"]
    table = lancedb.connect(str(tmp_path)).create_table(
        "t", pa.table({"id": ["de", "fr"], "text": texts})
    )
    table.create_index("text", config=ENGLISH.fts(), replace=True)
    assert table.search("wie der", query_type="fts").limit(2).to_arrow().num_rows == 0
    assert table.search("imprimante", query_type="fts").limit(2).to_arrow().num_rows == 1
    assert {"wie", "der", "les", "the", "của"} <= ENGLISH.left_out()
    assert FulltextConfig().left_out() == frozenset()  # an older index: not known


CHINESE = ["要更新软件包列表，请运行 apt update 命令。", "本手册介绍 Debian 系统的历史和社区。"]


@pytest.mark.parametrize(
    ("tokenizer", "found"), [("icu/split", True), ("icu", True), ("simple", False)]
)
def test_chinese_words_are_found_with_icu_word_breaks(
    tmp_path: Path, tokenizer: str, found: bool
) -> None:
    table = lancedb.connect(str(tmp_path)).create_table(
        "t", pa.table({"id": ["1", "2"], "text": CHINESE})
    )
    table.create_index("text", config=FulltextConfig(tokenizer=tokenizer).fts(), replace=True)
    ids = table.search("软件包", query_type="fts").limit(2).to_arrow().column("id").to_pylist()
    assert (ids == ["1"]) is found


@pytest.mark.parametrize(("tokenizer", "found"), [("icu/split", True), ("icu", False)])
def test_icu_words_are_split_again_at_punctuation(
    tmp_path: Path, tokenizer: str, found: bool
) -> None:
    """ICU keeps "apt.conf" and "foo_bar" whole: a question's "conf" or "bar" finds them
    only when they are split again, as the "simple" tokenizer splits them."""
    text = ["edit apt.conf, then run foo_bar", "unrelated words here"]
    rows = pa.table({"id": ["1", "2"], "text": text})
    table = lancedb.connect(str(tmp_path)).create_table("t", rows)
    table.create_index("text", config=FulltextConfig(tokenizer=tokenizer).fts(), replace=True)
    for word in ("conf", "bar"):
        ids = table.search(word, query_type="fts").limit(2).to_arrow().column("id").to_pylist()
        assert (ids == ["1"]) is found, word


def test_a_word_is_folded_to_ascii_as_the_index_folds_it() -> None:
    assert ascii_folded("pripojím") == "pripojim"
    assert ascii_folded("straße") == "strasse" and ascii_folded("łódź") == "lodz"
    assert ascii_folded("c\u0327a") == "ca"  # a decomposed accent too
    assert ascii_folded("перенести") == "перенести"  # only Latin letters fold
    assert ascii_folded("й") == "й"
