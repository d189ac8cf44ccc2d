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

A language's rarer inflections are in no list, or in its own alone below the lead's
floor ("impedisco", "съединят", "prestavím", "cliquable"), and read as unknown: the
blind set's answerable questions were refused for them. Such a word is the question's
language's own (`inflects_own`) when it and one of that language's own words differ only
in their last few letters, as refusal.py's `another_form` reads an inflection
("impedisco" / "impediscono", "съединят" / "съединява"), and no two lists hold the word
itself: a name or a term is listed alike by many ("docker", "chicago", "macbook") and
many languages inflect it ("docked", "chicagoan", "macbooku"). The question's language
is the identifier's; a word's other forms are looked for in that language's words only.

The table is made once per machine, by a child process (the lists take ~1 GB of memory
as Python objects) in the background, started by the engine's warm-up over any collection
(else by the first question that asks), and kept in the cache folder, memory-mapped: in
one file, the sorted 64-bit hashes of every language's own words (about 3 million), of the
words two or more lists hold, of the words some list uses at `COMMON_ZIPF` or more, and of
each language's own words' stems (the language with the word cut by up to `ENDING`
letters, at least `MIN_STEM` left). Until it is there `is_own` and `inflects_own` say
False, so the gate reads a word as it did without it; a question never waits for it
(`wait` is for benchmarks and tests).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.rag.child_module import run_module
from engine.rag.ingest.language import text_language

log = logging.getLogger(__name__)

LEAD = 1.0  # Zipf: the own language uses the word at least ten times as often
LIST_FLOOR = 1.0  # Zipf: wordfreq's large lists list no rarer word
# Zipf: a word some list uses this often is a word of the language, a small collection's
# gate reads (`common`): "birds" 4.6, "belong" 4.4 in English; a term most lists hold
# rarely, "kubernetes" 2.3, "nftables" none.
COMMON_ZIPF = 3.0
MIN_ZIPF = LIST_FLOOR + LEAD
# An inflection differs from its other forms in at most this many final letters, the
# rest (at least MIN_STEM letters) shared (refusal.py reads passages' words alike).
ENDING = 3
MIN_STEM = 5
# 2: a word two languages share is their own; 3: the shared words and own stems too.
_TABLE_VERSION = 4
_TIMEOUT_S = 600
# The identifier's codes where wordfreq's lists name the language otherwise.
_LIST_CODES = {"no": "nb", "tl": "fil", "hr": "sh", "sr": "sh", "bs": "sh"}


def word_key(word: str) -> int:
    """The 64-bit key of `word` as the frequency lists write it (NFC, case-folded)."""
    return _key(folded(word))


def folded(word: str) -> str:
    return unicodedata.normalize("NFC", word).casefold()


def stem_key(*, language: str, stem: str) -> int:
    """The key of a stem (`folded`) of `language`'s own words (wordfreq's code)."""
    return _key(f"{language}:{stem}")


def _key(text: str) -> int:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def stems(word: str) -> list[str]:
    """`word` cut by 0 to ENDING final letters, MIN_STEM letters at least left."""
    return [word[: len(word) - k] for k in range(ENDING + 1) if len(word) - k >= MIN_STEM]


@dataclass(frozen=True, kw_only=True)
class WordTables:
    """The table's four sorted key arrays."""

    own: np.ndarray  # every language's own words
    shared: np.ndarray  # the words two or more lists hold
    stems: np.ndarray  # (language, stem) of each language's own words
    common: np.ndarray  # the words some list uses at COMMON_ZIPF or more

    def to_array(self) -> np.ndarray:
        """One array, as the file holds it: the four lengths, then each part."""
        parts = [self.own, self.shared, self.stems, self.common]
        head = np.array([len(p) for p in parts], np.uint64)
        return np.concatenate([head, *parts]).astype(np.uint64)

    @classmethod
    def from_array(cls, array: np.ndarray) -> WordTables | None:
        """The parts of `to_array`'s array (None: not such an array)."""
        if array.dtype != np.uint64 or array.ndim != 1 or len(array) < 4:
            return None
        lengths = [int(n) for n in array[:4]]
        if 4 + sum(lengths) != len(array):
            return None
        ends = np.cumsum([4, *lengths])
        own, shared, stems, common = (array[a:b] for a, b in itertools.pairwise(ends))
        return cls(own=own, shared=shared, stems=stems, common=common)


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
        self._tables: WordTables | None = None
        self._making: threading.Thread | None = None
        self._failed = self._file is None

    def is_own(self, word: str) -> bool:
        """Whether `word` is an ordinary word of one language rather than a name or a
        term (False while the table is being made, or where it cannot be). A Korean word
        is read as the Korean list counts words: by its stem (`korean_stem`)."""
        tables = self._tables if self._tables is not None else self._start()
        if tables is None:
            return False
        if _listed(tables.own, word_key(word)):
            return True
        stem = korean_stem(word)
        return stem is not None and _listed(tables.own, word_key(stem))

    def common(self, word: str) -> bool:
        """Whether `word` is one language's own or some list uses it at `COMMON_ZIPF`
        or more: a word of some language, name or not. True while the table is not
        there (being made, or not to be made here): a small collection's test
        (`small_collection_ordinary`) then holds no absent word against a question, as
        before there was a table."""
        tables = self._tables if self._tables is not None else self._start()
        if tables is None:
            return True
        return self.is_own(word) or _listed(tables.common, word_key(word))

    def inflects_own(self, word: str, *, language: str) -> bool:
        """Whether `word` is an inflection of an own word of `language` (the identifier's
        code) that no two lists hold (see the module's docstring; False while the table
        is being made, or where it cannot be)."""
        tables = self._tables if self._tables is not None else self._start()
        if tables is None or _listed(tables.shared, word_key(word)):
            return False
        code = _LIST_CODES.get(language, language)
        forms = stems(folded(word))
        return any(_listed(tables.stems, stem_key(language=code, stem=s)) for s in forms)

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

    def _start(self) -> WordTables | None:
        with self._lock:
            if self._tables is not None or self._failed:
                return self._tables
            file = self._file
            assert file is not None
            if file.exists():
                self._tables = _read(file)
                if self._tables is not None:
                    return self._tables
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
            return
        # A table of another version or wordfreq release is never read again.
        for old in file.parent.glob("own-words-wordfreq*.npy"):
            if old != file:
                old.unlink(missing_ok=True)


def _listed(keys: np.ndarray, key: int) -> bool:
    at = int(np.searchsorted(keys, np.uint64(key)))
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


def _read(file: Path) -> WordTables | None:
    try:
        array = np.load(file, mmap_mode="r")
    except (OSError, ValueError) as e:
        log.warning("the word-language table %s is unreadable (%s): making it again", file, e)
        return None
    tables = WordTables.from_array(array)
    if tables is None:
        log.warning("the word-language table %s is not a table: making it again", file)
    return tables


# The gate's test of a word, given the question's language (None: not sure of it).
Ordinary = Callable[[str, "str | None"], bool]


def either_ordinary(*, words: WordLanguages, embedder: Callable[[str], bool]) -> Ordinary:
    """The gate's test of a word of some language (refusal.py, `ordinary`): one language's
    own word (`words`), an inflection of one of the question's language's own words
    (`inflects_own`), one the embedder's multilingual vocabulary holds whole
    (`Embedder.ordinary_word`), or one the language identifier reads, alone, as a language
    with the confidence a page's vote needs (`text_language`). Each finds words the others
    miss: wordfreq's lists are cut at a frequency, the vocabulary knows only the commonest
    forms, and the identifier's letter n-grams know a language's rarer inflections
    ("пересоздаётся", "zeichnungsrahmen"), where a name or a term reads as no language
    ("nftables", "docker": 0.13 at most on the blind set's unknown names)."""

    def ordinary(word: str, language: str | None) -> bool:
        return (
            words.is_own(word)
            or (language is not None and words.inflects_own(word, language=language))
            or embedder(word)
            or text_language(word) is not None
        )

    return ordinary


def small_collection_ordinary(*, words: WordLanguages, embedder: Callable[[str], bool]) -> Ordinary:
    """The gate's test in a collection of fewer than refusal.py's MIN_CHUNKS chunks: a
    few files miss most of a paraphrase's ordinary words, and wordfreq's own words leave
    out many common English ones ("birds", "belong", "vacation": Filipino, Malay or
    Finnish web text uses them a fifth as often), so any word the lists know counts as
    ordinary there (`common`); what still counts against a question is a term no two
    lists hold ("nftables", "pybuild") or a word none does."""
    ordinary = either_ordinary(words=words, embedder=embedder)

    def small(word: str, language: str | None) -> bool:
        return words.common(word) or ordinary(word, language)

    return small


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


def word_tables(lists: Iterator[tuple[str, list[list[str]]]]) -> WordTables:
    """The table from `lists`: each language's frequency list, as wordfreq's cBpack files
    hold it (list i holds the words of frequency -i centibels). Own: the words one list,
    or two together, use `LEAD` more (Zipf) than every other and at least `MIN_ZIPF`;
    shared: the words two lists or more hold; stems: each own word's `stems` under the
    language (or two) it is the own word of."""
    floor, lead = round(MIN_ZIPF * 100), round(LEAD * 100)
    languages: list[str] = []
    frequent: list[list[str]] = []  # each list's words of MIN_ZIPF at least: own ones' pool
    keys: list[np.ndarray] = []
    zipfs: list[np.ndarray] = []
    for language, buckets in lists:
        words = [(w, 900 - i) for i, bucket in enumerate(buckets) for w in bucket]
        keys.append(np.fromiter((word_key(w) for w, _ in words), np.uint64, len(words)))
        zipfs.append(np.fromiter((z for _, z in words), np.int16, len(words)))
        languages.append(language)
        # A list runs from its most frequent word down: its own words are at its start.
        frequent.append([w for w, z in words if z >= floor])
        del words
    empty = np.zeros(0, np.uint64)
    if not keys:
        return WordTables(own=empty, shared=empty, stems=empty, common=empty)
    which = np.concatenate([np.full(len(k), i, np.int16) for i, k in enumerate(keys)])
    key = np.concatenate(keys)
    zipf = np.concatenate(zipfs)
    del zipfs
    order = np.lexsort((-zipf, key))  # by key, the most frequent language first
    key, zipf, which = key[order], zipf[order], which[order]
    del order
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    best = zipf[starts]
    second = _next_language(first=first, zipf=zipf, at=starts + 1)
    third = _next_language(first=first, zipf=zipf, at=starts + 2, before=second > 0)
    alone = (best >= floor) & (best - second >= lead)
    pair = (second >= floor) & (second - third >= lead)
    lists_holding = np.diff(np.append(starts, len(key)))
    shared = np.sort(key[starts[lists_holding >= 2]])
    own = np.sort(key[starts[alone | pair]])
    common = np.sort(key[starts[best >= round(COMMON_ZIPF * 100)]])
    del first, zipf
    # Each own word under the language(s) it is the own word of: the leading list, and
    # the second where two lead together.
    leaders = np.concatenate([starts[alone | pair], starts[pair] + 1])
    stem_keys = [
        _stem_keys(
            language=language,
            words=words,
            keys=firsts[: len(words)],
            own=np.sort(key[leaders[which[leaders] == i]]),
        )
        for i, (language, words, firsts) in enumerate(zip(languages, frequent, keys, strict=True))
    ]
    stems_all = np.unique(np.concatenate(stem_keys)) if stem_keys else empty
    return WordTables(own=own, shared=shared, stems=stems_all, common=common)


def _stem_keys(*, language: str, words: list[str], keys: np.ndarray, own: np.ndarray) -> np.ndarray:
    """The stem keys of those of `words` (one language's, `keys` theirs) that `own` holds."""
    found = [
        stem_key(language=language, stem=s)
        for w, m in zip(words, np.isin(keys, own), strict=True)
        if m and w.isalpha()
        for s in stems(folded(w))
    ]
    return np.array(found, np.uint64)


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
    chosen = [x for x in args.languages.split(",") if x]
    table = word_tables(wordfreq_lists(chosen)).to_array()
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
