"""Words of one language: whether a question's word is an ordinary word of some language.

The relevance gate holds a question's word against it when no chunk of the collection
holds it (engine/rag/answer/refusal.py). That is evidence for a name or a term the
question hinges on ("nftables", "Flatpak", "Kosovo"), and none for the asker's own words:
"nachsehen", "cuántos", "segno" are how a German, Spanish or Italian user says what the
manual says otherwise, and a question in one language about documents in another holds
nothing but such words.

The two differ in how languages use them. Word frequencies of 42 languages (wordfreq,
code Apache-2.0, data CC BY-SA 4.0: Wikipedia, subtitles, news, books, web text) show a
language's own word used far more often in it than in any other ("cuántos": Spanish 4.4
on the Zipf scale, no other language lists it), and a name or a term used alike in many
("docker": English 3.0, German 2.8, French 2.8; "kosovo", "ipad", "chicago" within 1 of
each other). A word is a language's own (`is_own`) when that language uses it at least
ten times (`LEAD`, 1 on the Zipf scale) as often as any other list, and often enough
(`MIN_ZIPF`) that the other lists' cut-off (1.0: a word below it is not listed) cannot
hide a tenfold share. Or when two languages do, together: close languages share their
forms ("vyslovuje": Slovak 3.54, Czech 3.53; "перенести": Russian 4.12, Ukrainian 4.07;
"milímetros": Portuguese and Spanish; "jeg": Danish and Norwegian), so neither leads the
other, yet both use the word ten times as often as any third list. A name or a term is
used alike by more than two ("docker": French 2.78, German 2.75). A language whose
list is short (wordfreq's "small" lists stop at 3.0) hides its rarer words: a word
shared with it may pass as another language's own. None of this is a list of any
language's words: it holds for every language the frequencies cover, and a word they do
not cover stays as refusal.py reads it.

The table is made once per machine, by a child process (the lists take ~1 GB of memory
as Python objects) in the background, started by the engine's warm-up over a collection
large enough for the gate to ask (else by the first question that asks), and kept in the
cache folder: the sorted 64-bit
hashes of every language's own words (about 4 million, 32 MB), memory-mapped. Until it is
there `is_own` says False, so the gate reads a word as it did without it; a question
never waits for it (`wait` is for benchmarks and tests).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from engine.rag.child_module import run_module
from engine.rag.ingest.language import text_language

log = logging.getLogger(__name__)

LEAD = 1.0  # Zipf: the own language uses the word at least ten times as often
LIST_FLOOR = 1.0  # Zipf: wordfreq's large lists list no rarer word
MIN_ZIPF = LIST_FLOOR + LEAD
_TABLE_VERSION = 2  # 2: a word two languages share is their own
_TIMEOUT_S = 600


def word_key(word: str) -> int:
    """The 64-bit key of `word` as the frequency lists write it (NFC, case-folded)."""
    text = unicodedata.normalize("NFC", word).casefold().encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def table_file(cache: Path) -> Path | None:
    """Where this machine's table lives, named for the installed wordfreq's version;
    None without wordfreq."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        release = version("wordfreq")
    except PackageNotFoundError:
        return None
    return cache / "word-languages" / f"own-words-wordfreq{release}-v{_TABLE_VERSION}.npy"


class WordLanguages:
    """The table of every language's own words, made in the background (`start`, or the
    first `is_own`), then read from the cache folder."""

    def __init__(self, *, cache: Path) -> None:
        self._file = table_file(cache)
        self._lock = threading.Lock()
        self._keys: np.ndarray | None = None
        self._making: threading.Thread | None = None
        self._failed = self._file is None

    def is_own(self, word: str) -> bool:
        """Whether `word` is an ordinary word of one language rather than a name or a
        term (False while the table is being made, or where it cannot be). A Korean word
        is read as the Korean list counts words: by its stem (`korean_stem`)."""
        keys = self._keys if self._keys is not None else self._start()
        if keys is None:
            return False
        if _listed(keys, word):
            return True
        stem = korean_stem(word)
        return stem is not None and _listed(keys, stem)

    def start(self) -> None:
        """Start making the table, unless it is made or under way (the engine's warm-up
        over a collection large enough for the gate to ask)."""
        self._start()

    def wait(self, *, timeout_s: float | None = None) -> bool:
        """Make the table now (or wait for the making under way); whether it is ready."""
        self._start()
        making = self._making
        if making is not None:
            making.join(timeout_s)
        return self._start() is not None

    def _start(self) -> np.ndarray | None:
        with self._lock:
            if self._keys is not None or self._failed:
                return self._keys
            file = self._file
            assert file is not None
            if file.exists():
                self._keys = _read(file)
                if self._keys is not None:
                    return self._keys
                # Unreadable (a damaged cache): made again, once.
                file.unlink(missing_ok=True)
            if self._making is None or not self._making.is_alive():
                if self._making is not None:  # it ended without a file
                    self._failed = True
                    return None
                self._making = threading.Thread(
                    target=self._make, args=(file,), name="ragdoll-word-languages", daemon=True
                )
                self._making.start()
            return None

    def _make(self, file: Path) -> None:
        try:
            make_in_child(out=file)
        except Exception as e:
            log.warning("the word-language table could not be made (%s)", e)


def _listed(keys: np.ndarray, word: str) -> bool:
    key = np.uint64(word_key(word))
    at = int(np.searchsorted(keys, key))
    return at < len(keys) and bool(keys[at] == key)


# Hangul syllables, as a character class's range.
HANGUL = r"\uac00-\ud7a3"
_HANGUL = re.compile(f"[{HANGUL}]")


def korean_stem(word: str) -> str | None:
    """The first morpheme of a Korean word of several ("윈도우에서" -> "윈도우", "되나요" ->
    "되"): the stem its particles and endings attach to. wordfreq's Korean list counts
    morphemes, as MeCab splits them (its `tokenize`), so a word as a question writes it
    is seldom listed whole, and read whole every Korean question's own words were "never
    mentioned". None for any other word, or without MeCab's Korean dictionary."""
    if not _HANGUL.search(word):
        return None
    try:
        from wordfreq import tokenize

        parts = tokenize(word, "ko")
    except (ImportError, RuntimeError, OSError) as e:
        log.debug("no Korean morphemes (%s)", e)
        return None
    return parts[0] if len(parts) > 1 else None


def _read(file: Path) -> np.ndarray | None:
    try:
        keys = np.load(file, mmap_mode="r")
    except (OSError, ValueError) as e:
        log.warning("the word-language table %s is unreadable (%s): making it again", file, e)
        return None
    if keys.dtype != np.uint64 or keys.ndim != 1:
        log.warning("the word-language table %s is not a table: making it again", file)
        return None
    return keys


def either_ordinary(
    *, words: WordLanguages, embedder: Callable[[str], bool]
) -> Callable[[str], bool]:
    """The gate's test of a word of some language (refusal.py, `ordinary`): one language's
    own word (`words`), one the embedder's multilingual vocabulary holds whole
    (`Embedder.ordinary_word`), or one the language identifier reads, alone, as a language
    with the confidence a page's vote needs (`text_language`). Each finds words the others
    miss: wordfreq's lists are cut at a frequency, the vocabulary knows only the commonest
    forms, and the identifier's letter n-grams know a language's rarer inflections
    ("пересоздаётся", "zeichnungsrahmen"), where a name or a term reads as no language
    ("nftables", "docker": 0.13 at most on the blind set's unknown names)."""

    def ordinary(word: str) -> bool:
        return words.is_own(word) or embedder(word) or text_language(word) is not None

    return ordinary


def make_in_child(*, out: Path) -> None:
    """Runs this module in a child process (its lists' memory goes with it); raises
    with the child's last words when it fails, is killed or hangs."""
    run_module(
        module="engine.rag.answer.word_languages",
        args=[f"--out={out}"],
        timeout_s=_TIMEOUT_S,
        what="making the word-language table",
    )
    if not out.exists():
        raise RuntimeError("the child wrote no table")


def own_word_keys(lists: Iterator[tuple[str, list[list[str]]]]) -> np.ndarray:
    """The sorted keys of the words one list, or two together, use `LEAD` more (Zipf)
    than every other and at least `MIN_ZIPF`. `lists`: each language's frequency list, as
    wordfreq's cBpack files hold it (list i holds the words of frequency -i centibels)."""
    keys: list[np.ndarray] = []
    zipfs: list[np.ndarray] = []
    for _language, buckets in lists:
        words = [(w, 900 - i) for i, bucket in enumerate(buckets) for w in bucket]
        keys.append(np.fromiter((word_key(w) for w, _ in words), np.uint64, len(words)))
        zipfs.append(np.fromiter((z for _, z in words), np.int16, len(words)))
        del words
    if not keys:
        return np.zeros(0, np.uint64)
    key = np.concatenate(keys)
    zipf = np.concatenate(zipfs)
    del keys, zipfs
    order = np.lexsort((-zipf, key))  # by key, the most frequent language first
    key, zipf = key[order], zipf[order]
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    best = zipf[starts]
    second = _next_language(first=first, zipf=zipf, at=starts + 1)
    third = _next_language(first=first, zipf=zipf, at=starts + 2, before=second > 0)
    floor, lead = round(MIN_ZIPF * 100), round(LEAD * 100)
    alone = (best >= floor) & (best - second >= lead)
    pair = (second >= floor) & (second - third >= lead)
    return np.sort(key[starts[alone | pair]])


def _next_language(
    *, first: np.ndarray, zipf: np.ndarray, at: np.ndarray, before: np.ndarray | None = None
) -> np.ndarray:
    """The Zipf at each of `at` where it still holds the word that started before it
    (`first` marks each word's first row; 0 where the word's rows ended: no such list).
    `before`: where the row before `at` held it too."""
    out = np.zeros(len(at), np.int16)
    held = at < len(zipf)
    held[held] = ~first[at[held]]
    if before is not None:
        held &= before
    out[held] = zipf[at[held]]
    return out


def wordfreq_lists(languages: Sequence[str] = ()) -> Iterator[tuple[str, list[list[str]]]]:
    """Each language's longest list (all of them, or `languages`), read straight from
    wordfreq's files (its own readers keep every list in a cache)."""
    from wordfreq import available_languages, read_cBpack

    for language, path in sorted(available_languages("best").items()):
        if not languages or language in languages:
            yield language, read_cBpack(path)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="make the table of languages' own words")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--languages", default="", help="only these lists (comma-separated)")
    args = parser.parse_args(argv)
    out: Path = args.out
    table = own_word_keys(wordfreq_lists([x for x in args.languages.split(",") if x]))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{out.stem}.{os.getpid()}.partial.npy")
    try:
        np.save(partial, table)
        os.replace(partial, out)
    finally:  # a full disk leaves no half-written table behind
        partial.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
