"""A language's own words told from names and terms (engine/rag/answer/word_languages.py)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.rag.answer import word_languages
from engine.rag.answer.refusal import unknown_words
from engine.rag.answer.word_languages import (
    Ordinary,
    WordLanguages,
    WordTables,
    either_ordinary,
    korean_stem,
    main,
    small_collection_ordinary,
    stem_key,
    table_file,
    word_key,
    word_tables,
)


def _buckets(words: dict[str, float]) -> list[list[str]]:
    """A cBpack list: bucket i holds the words of Zipf 9 - i/100."""
    out: list[list[str]] = [[] for _ in range(801)]
    for word, zipf in words.items():
        out[round((9 - zipf) * 100)].append(word)
    return out


def test_a_word_one_language_uses_ten_times_as_often_is_its_own() -> None:
    lists = [
        ("de", _buckets({"nachsehen": 3.6, "docker": 2.8, "seltenwort": 1.8, "gleich": 3.0})),
        ("en", _buckets({"docker": 3.0, "lookup": 3.5, "gleich": 2.0})),
        ("es", _buckets({"docker": 2.2, "cuántos": 4.4, "lookup": 2.6})),
        ("fr", _buckets({"lookup": 1.8})),
    ]
    keys = word_tables(iter(lists)).own
    own = {w for w in ("nachsehen", "cuántos", "lookup", "gleich") if word_key(w) in keys}
    # docker: within 1 of another language; seltenwort: too rare for the other lists'
    # cut-off to show a tenfold share; lookup: only 0.9 ahead of Spanish, which is only
    # 0.8 ahead of French.
    assert own == {"nachsehen", "cuántos", "gleich"}
    assert list(keys) == sorted(keys)


def test_a_word_two_close_languages_share_is_their_own() -> None:
    """Czech and Slovak write many forms alike: neither leads, both lead the rest."""
    lists = [
        ("cs", _buckets({"vyslovuje": 3.53, "docker": 2.7, "nechám": 4.49})),
        ("en", _buckets({"docker": 3.0})),
        ("pl", _buckets({"docker": 2.6, "vyslovuje": 2.6})),
        ("sk", _buckets({"vyslovuje": 3.54, "docker": 2.7, "nechám": 4.09})),
    ]
    tables = word_tables(iter(lists))
    own = {w for w in ("vyslovuje", "docker", "nechám") if word_key(w) in tables.own}
    # vyslovuje: Polish within 1 of the pair; docker: four lists alike.
    assert own == {"nechám"}
    # An own word of two languages is both languages' to inflect.
    for language in ("cs", "sk"):
        assert stem_key(language=language, stem="nechá") in tables.stems
    assert stem_key(language="pl", stem="nechá") not in tables.stems


def test_the_table_holds_the_words_several_lists_hold_and_each_languages_own_stems() -> None:
    lists = [
        ("de", _buckets({"nachsehen": 3.6, "docker": 2.8, "dockers": 1.5})),
        ("en", _buckets({"docker": 3.0, "docked": 3.2})),
        ("it", _buckets({"impediscono": 2.4, "docked": 1.1, "docker": 2.2})),
    ]
    tables = word_tables(iter(lists))
    listed = ("docker", "docked", "dockers", "nachsehen")
    assert {w for w in listed if word_key(w) in tables.shared} == {"docker", "docked"}
    # Used at Zipf 3 or more by some list: words of a language, for a small collection.
    assert {w for w in listed if word_key(w) in tables.common} == {"docker", "docked", "nachsehen"}
    expected = {
        stem_key(language=language, stem=stem)
        for language, word in (("de", "nachsehen"), ("en", "docked"), ("it", "impediscono"))
        for stem in (word, word[:-1], word[:-2], word[:-3])
        if len(stem) >= 5
    }
    assert set(tables.stems.tolist()) == expected
    array = tables.to_array()
    back = WordTables.from_array(array)
    assert back is not None and back.stems.tolist() == tables.stems.tolist()
    assert back.common.tolist() == tables.common.tolist()
    assert WordTables.from_array(array[:-1]) is None
    assert WordTables.from_array(np.array([word_key("cuántos")], np.uint64)) is None


def _table(*, own: list[str]) -> np.ndarray:
    keys = np.sort(np.array([word_key(w) for w in own], np.uint64))
    empty = np.zeros(0, np.uint64)
    return WordTables(own=keys, shared=empty, stems=empty, common=empty).to_array()


def test_the_key_reads_a_word_as_the_lists_write_it() -> None:
    assert word_key("Größe") == word_key("grösse")  # case-folded: ß is ss
    assert word_key("cuántos") == word_key("cua\u0301ntos")  # NFC
    assert word_key("Docker") == word_key("docker")


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table from wordfreq's real lists of six languages (all 42: ~35 s)."""
    cache = tmp_path_factory.mktemp("word-languages")
    file = table_file(cache)
    assert file is not None, "wordfreq is a dependency of the engine"
    assert main(["--out", str(file), "--languages", "de,en,es,fr,it,ko"]) == 0
    return cache


def test_real_frequencies_tell_the_askers_words_from_names(real_cache: Path) -> None:
    words = WordLanguages(cache=real_cache)
    assert words.wait(timeout_s=5)
    for word in ("nachsehen", "cuántos", "segno", "débutant", "Sicherheitsupdates"):
        assert words.is_own(word), word
    for word in ("docker", "Kosovo", "nftables", "pybuild", "flatpak", "chicago"):
        assert not words.is_own(word), word


def test_a_rare_inflection_of_the_questions_language_is_its_own(real_cache: Path) -> None:
    """No list holds these forms as own (blind set: the answerable questions they were
    refused for), but each differs from an own word of its language in its last letters;
    a name is held by many lists, and its inflections do not make it a word."""
    words = WordLanguages(cache=real_cache)
    assert words.wait(timeout_s=5)
    for word, language in (("impedisco", "it"), ("puntinate", "it"), ("cliquable", "fr")):
        assert not words.is_own(word), word
        assert words.inflects_own(word, language=language), word
    # Another language's words are not looked in.
    assert not words.inflects_own("impedisco", language="fr")
    for word in ("docker", "chicago", "kosovo", "macbook", "nftables", "flatpak"):
        for language in ("en", "de", "es"):
            assert not words.inflects_own(word, language=language), (word, language)


def test_a_korean_word_is_read_by_its_stem_as_the_korean_list_counts_words(
    real_cache: Path,
) -> None:
    """The Korean list holds morphemes ("윈도우", "에서"), a question whole words with
    their particles and endings ("윈도우에서 쓰는데 떴어요": 'I use it on Windows and
    it showed up')."""
    words = WordLanguages(cache=real_cache)
    assert words.wait(timeout_s=5)
    assert korean_stem("윈도우에서") == "윈도우" and korean_stem("docker") is None
    for word in ("윈도우에서", "쓰는데", "떴어요", "컴퓨터라면", "하나요"):
        assert words.is_own(word), word
    # A term's stem is no Korean word: "gif를" ('the GIF', object) still counts.
    assert not words.is_own("gif를") and not words.is_own("nftables를")


def test_the_gate_holds_no_ordinary_word_against_a_question(real_cache: Path) -> None:
    """A question in another language than the documents ("hago" over French pages)
    holds its asker's own words; the name it hinges on still counts."""
    words = WordLanguages(cache=real_cache)
    passages = ["Pour construire l'image, lancez lb build dans le dossier de configuration."]
    # What the full-text index of a mixed collection holds.
    held = {"qué", "para", "construir", "imagen", "con"}
    question = "¿Qué hago para construir la imagen con nftables?"

    def unknown(ordinary: Ordinary | None) -> list[str]:
        return unknown_words(
            question=question, texts=passages, holds=held.__contains__, ordinary=ordinary
        )

    assert unknown(None) == ["hago", "nftables"]
    assert unknown(either_ordinary(words=words, embedder=lambda word: False)) == ["nftables"]
    assert unknown(either_ordinary(words=words, embedder=lambda word: word == "nftables")) == []


def test_a_small_collection_takes_any_word_the_lists_know_as_ordinary(real_cache: Path) -> None:
    """Common English words that other languages' web text uses too are no language's
    own ("birds", "belong"); in a collection of a few files their absence says nothing.
    A term no two lists hold still counts."""
    words = WordLanguages(cache=real_cache)
    assert words.wait(timeout_s=5)
    small = small_collection_ordinary(words=words, embedder=lambda word: False)
    for word in ("birds", "belong", "vacation"):
        assert small(word, "en") and words.common(word), word
    for word in ("nftables", "pybuild", "wireguard", "kubernetes"):
        assert not small(word, "en") and not words.common(word), word


def test_until_the_table_is_made_every_word_is_common(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    monkeypatch.setattr(word_languages, "make_in_child", lambda *, out: release.wait(10))
    words = WordLanguages(cache=tmp_path)
    assert words.common("nftables")  # a small collection's gate stays as it was
    release.set()


def test_nothing_is_own_until_the_table_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first question does not wait: the table is made in the background."""
    release = threading.Event()
    made: list[Path] = []

    def make(*, out: Path) -> None:
        made.append(out)
        release.wait(10)
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, _table(own=["cuántos"]))

    monkeypatch.setattr(word_languages, "make_in_child", make)
    # The table of an earlier version, left by an older engine.
    current = table_file(tmp_path)
    assert current is not None
    old = current.with_name("own-words-wordfreq3.1.1-v2.npy")
    old.parent.mkdir(parents=True)
    np.save(old, np.array([word_key("cuántos")], np.uint64))
    words = WordLanguages(cache=tmp_path)
    assert not words.is_own("cuántos")
    assert not words.wait(timeout_s=0.05)
    assert not words.is_own("cuántos")
    release.set()
    assert words.wait(timeout_s=10)
    assert words.is_own("cuántos") and not words.is_own("docker")
    assert len(made) == 1
    assert list(old.parent.iterdir()) == [made[0]]  # the older table is gone
    # Another engine start reads the file and makes nothing.
    assert WordLanguages(cache=tmp_path).is_own("cuántos")
    assert len(made) == 1


def test_a_table_that_cannot_be_made_leaves_the_gate_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[Path] = []

    def fail(*, out: Path) -> None:
        calls.append(out)
        raise RuntimeError("the child ended with 1: MemoryError")

    monkeypatch.setattr(word_languages, "make_in_child", fail)
    words = WordLanguages(cache=tmp_path)
    with caplog.at_level(logging.WARNING):
        assert not words.wait(timeout_s=10)
    assert "MemoryError" in caplog.text
    assert not words.is_own("cuántos")
    assert len(calls) == 1  # not tried again at every question


@pytest.mark.parametrize("damage", [b"not a table", "floats", "version 2"])
def test_a_damaged_table_is_reported_and_made_again(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    damage: bytes | str,
) -> None:
    file = table_file(tmp_path)
    assert file is not None
    file.parent.mkdir(parents=True)
    if isinstance(damage, bytes):
        file.write_bytes(damage)
    elif damage == "floats":
        np.save(file, np.zeros(3))
    else:  # the own words alone, as the table's second version held them
        np.save(file, np.array([word_key("cuántos")], np.uint64))
    made: list[Path] = []

    def make(*, out: Path) -> None:
        made.append(out)
        np.save(out, _table(own=["cuántos"]))

    monkeypatch.setattr(word_languages, "make_in_child", make)
    words = WordLanguages(cache=tmp_path)
    with caplog.at_level(logging.WARNING):
        assert words.wait(timeout_s=10)
    assert "making it again" in caplog.text
    assert made == [file]
    assert words.is_own("cuántos")


def test_without_wordfreq_no_word_is_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_languages, "table_file", lambda cache: None)
    words = WordLanguages(cache=tmp_path)
    assert not words.is_own("cuántos")
    assert not words.wait(timeout_s=1)


def test_a_full_disk_leaves_no_half_written_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "own.npy"

    def full(file: object, table: object) -> None:
        Path(str(file)).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(word_languages.np, "save", full)
    with pytest.raises(OSError, match="No space"):
        main(["--out", str(out), "--languages", "sv"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_child_makes_the_table_of_every_language(tmp_path: Path) -> None:
    """The engine's way: a child process over all 42 lists (~35 s, ~0.8 GB)."""
    words = WordLanguages(cache=tmp_path)
    assert words.wait(timeout_s=300)
    assert words.is_own("powieściach") and words.is_own("cuántos")
    assert not words.is_own("docker")


def test_a_word_the_language_identifier_reads_is_ordinary_without_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rarer inflections and compounds that no frequency list holds read, alone, as their
    language; names and terms read as none."""
    monkeypatch.setattr(word_languages, "make_in_child", lambda *, out: None)
    words = WordLanguages(cache=tmp_path)  # no table: is_own says False
    ordinary = either_ordinary(words=words, embedder=lambda word: False)
    for word in ("пересоздаётся", "світлотінь", "zeichnungsrahmen", "되돌리는"):
        assert ordinary(word, None), word
    for word in ("nftables", "docker", "wireguard", "flatpak", "pybuild", "nextcloud"):
        assert not ordinary(word, "en"), word
