"""How the full-text index reads words: with the collection's language's stemmer.

LanceDB's FTS index takes one language per index (its stemmer and stop words). The
collection's languages come from its documents (`DocumentRecord.languages`, weighed by
their chunks): where one language holds DOMINANT of the text and the index knows it, its
stemmer and stop words ("Sicherheitsaktualisierung" finds "Sicherheitsaktualisierungen",
"actualización" finds "actualizaciones"). A collection read before languages were
detected keeps the English stemmer, as before: its rules are mild (plural -s, -ed,
-ing), so "paquet" still finds "paquets", where an index without a stemmer finds no
inflected form at all.

Words break by ICU's rules, then again at spaces and punctuation ("icu/split"): a run of
Chinese, Japanese or Thai becomes its words wherever it stands, even in a collection
that is mostly English, and "file.txt" still finds "file".

A collection with no dominant language, or whose language has no stemmer here (Czech,
Polish, Ukrainian, Bulgarian…), is searched over its words cut to their first CUT letters
(`cut_words`, the `words` column, indexed apart): "nainštalovaných" and "nainštalovať"
meet at "nainš", "перенести" and "переносить" at "перен". Cutting words to a few letters
is a stemmer that needs no language (McNamee, Nicholas and Mayfield, "Addressing
morphological variation in alphabetic languages", SIGIR 2009, measured it beside
Snowball's). The `text` index stays, uncut, for the gate's word lookups: a word's first
letters are no evidence that the collection names it ("powershell", "power").

The choice is kept beside the tables (one file per chunks table) so that the index is
built again when the collection's language (or the way words break) changes.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.json_file import write_json
from engine.rag.answer.sentences import UNSPACED
from engine.rag.answer.word_languages import HANGUL
from engine.rag.store.records import DocumentRecord

# Tantivy's stemmers (LanceDB's FTS `language`), by ISO 639-1 code.
STEMMERS = {
    "ar": "Arabic",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "hu": "Hungarian",
    "it": "Italian",
    "nb": "Norwegian",
    "nl": "Dutch",
    "no": "Norwegian",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "ta": "Tamil",
    "tr": "Turkish",
}
DOMINANT = 0.8


@dataclass(frozen=True, kw_only=True)
class FulltextConfig:
    language: str = "English"  # the stemmer's and stop list's
    stem: bool = True
    remove_stop_words: bool = True
    # Where words break: "simple" at spaces and punctuation (a run of Chinese is one
    # token no question matches); "icu" by Unicode's rules, with dictionaries for the
    # scripts written without spaces (Chinese, Japanese, Thai…), but "file.txt",
    # "foo_bar" and "3.5" stay one word; "icu/split" breaks ICU's words again where
    # "simple" would. The default is what an index built before the field was recorded
    # used.
    tokenizer: str = "simple"
    # True: the index leaves out the most frequent words of every language
    # (`common_words`), in place of `language`'s own stop list. False: an index built
    # before, which leaves out only `language`'s.
    every_language: bool = False
    # True: the search reads the `words` column's index (`cut_words`) in place of the
    # stemmed `text` one (a collection of several languages, or of one with no stemmer).
    cut: bool = False

    def fts(self) -> object:
        from lancedb.index import FTS

        stop = sorted(common_words()) if self.every_language else None
        return FTS(
            base_tokenizer=self.tokenizer,
            language=self.language,
            stem=self.stem,
            remove_stop_words=self.remove_stop_words,
            custom_stop_words=stop,
        )

    def words_fts(self) -> object:
        """The `words` column's index: cut words, unstemmed, without the common words
        (cut as the words are)."""
        from lancedb.index import FTS

        return FTS(
            base_tokenizer=self.tokenizer,
            language=self.language,
            stem=False,
            remove_stop_words=True,
            custom_stop_words=sorted({cut_words(w) for w in common_words()}),
        )

    def left_out(self) -> frozenset[str]:
        """The words this index leaves out, where known (every language's common ones);
        a search for one finds nothing, which says nothing about the collection."""
        return common_words() if self.every_language else frozenset()


# Letters ASCII folding spells with others, where Unicode gives no decomposition
# (tantivy's AsciiFoldingFilter, after Lucene's).
_FOLDED_LETTERS = str.maketrans(
    {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ı": "i"}
)


def ascii_folded(word: str) -> str:
    """`word` (lower-case) as the index stores it (LanceDB's FTS folds to ASCII by
    default): a Latin letter loses its accent ("pripojím" -> "pripojim", "größe" ->
    "grosse"); other scripts are kept ("перенести"). A query the index does not analyse
    (a fuzzy match) must be folded so to meet the stored words."""
    out = []
    for char in unicodedata.normalize("NFC", word).translate(_FOLDED_LETTERS):
        parts = unicodedata.normalize("NFKD", char)
        base = "".join(c for c in parts if not unicodedata.combining(c))
        out.append(base if base.isascii() and base else char)
    return "".join(out)


def common_words() -> frozenset[str]:
    """resources/common_words.json (tools/make_common_words.py, from wordfreq): the 50
    most frequent words of each of 42 languages. Left out of the full-text index, so that
    in a collection of several languages a question's "wie", "der" or "les" no longer
    ranks every chunk of its own language above the answer written in another."""
    from importlib import resources

    text = resources.files("resources").joinpath("common_words.json").read_text("utf-8")
    return frozenset(json.loads(text)["words"])


# Every index since 2026-12-04 breaks words with ICU, split as "simple" splits. ICU alone
# ranked worse on the English quality set (held3 first 0.62 -> 0.53); split, it gives
# the English set's figures within one question, and a Chinese question over a mixed
# collection finds its words (docs/benchmarks-history.md, "ICU word breaks, split").
ENGLISH = FulltextConfig(every_language=True, tokenizer="icu/split")


# Letters a word keeps in the `words` column (McNamee and Mayfield's five, taken before
# any measurement here and not tuned).
CUT = 5
_WORD = re.compile(r"\w+", re.UNICODE)
_WHOLE = re.compile(f"{UNSPACED.pattern}|[{HANGUL}]")


def cut_words(text: str) -> str:
    """`text` in lower case with each word cut to its first CUT letters; a word of a
    script written without spaces (a run of many words) or of Hangul (a stem with its
    particles, often shorter than CUT) is kept whole."""
    return _WORD.sub(
        lambda m: m.group() if _WHOLE.search(m.group()) else m.group()[:CUT], text.lower()
    )


def language_shares(documents: Iterable[DocumentRecord]) -> dict[str, int]:
    """Chunks per language, each document's counted for its first (main) language."""
    shares: Counter[str] = Counter()
    for doc in documents:
        if doc.status == "indexed" and doc.languages:
            shares[doc.languages.split(",")[0]] += max(1, doc.chunks)
    return dict(shares)


# A language holding less of the collection's chunks than this is not one of its own.
MIN_SHARE = 0.2


def collection_languages(shares: dict[str, int]) -> tuple[str, ...]:
    """Languages by the chunks their documents hold, most first, each over MIN_SHARE."""
    total = sum(shares.values())
    if not total:
        return ()
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    return tuple(lang for lang, n in ranked if n / total >= MIN_SHARE)


def fulltext_config(shares: dict[str, int]) -> FulltextConfig:
    total = sum(shares.values())
    if not total:
        return ENGLISH
    language, count = max(shares.items(), key=lambda kv: kv[1])
    if count / total >= DOMINANT and language in STEMMERS:
        return replace(ENGLISH, language=STEMMERS[language])
    return replace(ENGLISH, cut=True)


def config_file(folder: Path, table: str) -> Path:
    return folder / f"fulltext-{table}.json"


def stored_config(file: Path) -> FulltextConfig | None:
    """The config the index in `file`'s table was last built with; None when unknown."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return FulltextConfig(**data)
    except (OSError, ValueError, TypeError):
        return None


def remember_config(file: Path, config: FulltextConfig) -> None:
    write_json(file=file, data=asdict(config))


def refresh_index(*, table: Any, file: Path, config: FulltextConfig, force: bool) -> None:
    """(Re)build `table`'s BM25 index over chunk text as `config` says (the collection's
    `fulltext_config`; for a collection searched over cut words, the `words` column's
    index too), when it is missing, was built with another config, has unindexed rows,
    or `force`; the config it was built with is kept in `file`."""
    wanted = {"text_idx", "words_idx"} if config.cut else {"text_idx"}
    stale = force or not wanted <= _built(table)
    stale = stale or stored_config(file) not in (None, config)
    if not stale:
        stale = any(_unindexed(table, name) for name in wanted)
    if stale and table.count_rows() > 0:
        table.create_index("text", config=config.fts(), replace=True)
        if config.cut:
            table.create_index("words", config=config.words_fts(), replace=True)
        remember_config(file, config)


def words_missing(*, table: Any, file: Path, config: FulltextConfig) -> bool:
    """Whether `config` searches cut words that the table may not hold yet: its `words`
    index is not built, or was built with another config (an index written before the
    column). Rows written since hold their words."""
    return config.cut and ("words_idx" not in _built(table) or stored_config(file) != config)


def _built(table: Any) -> set[str]:
    return {i.name for i in table.list_indices() if i.index_type == "FTS"}


def _unindexed(table: Any, name: str) -> bool:
    stats = table.index_stats(name)
    return bool(stats and stats.num_unindexed_rows > 0)


# Chunks given their cut words per write (`fill_words`).
_FILL_BATCH = 4096


def fill_words(table: Any) -> int:
    """Give the chunks of a table written before the `words` column their cut words;
    how many were filled. Call under the store's write lock: a chunk rewritten
    meanwhile would get its old text's words."""
    rows = (
        table.search()
        .where("(words IS NULL OR words = '') AND text != ''")
        .select(["chunk_id", "text"])
        .limit(None)
        .to_arrow()
    )
    ids, texts = rows.column("chunk_id").to_pylist(), rows.column("text").to_pylist()
    for start in range(0, len(ids), _FILL_BATCH):
        part = slice(start, start + _FILL_BATCH)
        words = [cut_words(t) for t in texts[part]]
        batch = pa.table({"chunk_id": ids[part], "words": words})
        table.merge_insert("chunk_id").when_matched_update_all().execute(batch)
    return len(ids)


@dataclass(frozen=True, kw_only=True)
class DocumentLanguages:
    """The languages of a documents table: each document's (by its id; empty: not
    detected), and the chunks each language's documents hold (`language_shares`), of
    the whole table (`shares`) or of the documents at the paths a search may reach
    (`shares_of`)."""

    documents: tuple[DocumentRecord, ...] = ()  # path, status, chunks, languages read

    @functools.cached_property
    def by_document(self) -> dict[str, frozenset[str]]:
        return {d.doc_id: frozenset(filter(None, d.languages.split(","))) for d in self.documents}

    @functools.cached_property
    def shares(self) -> dict[str, int]:
        return language_shares(self.documents)

    def shares_of(self, reached: Callable[[str], bool]) -> dict[str, int]:
        """The shares of the documents whose path `reached` accepts."""
        return language_shares(d for d in self.documents if reached(d.path))

    @property
    def collection(self) -> tuple[str, ...]:
        """The collection's languages, most text first (`collection_languages`)."""
        return collection_languages(self.shares)


def languages_of(documents: Any) -> DocumentLanguages:
    """The languages of a documents table, reading only the columns they come from."""
    columns = ["doc_id", "path", "languages", "chunks", "status"]
    rows = documents.search().select(columns).limit(None).to_list()
    return DocumentLanguages(
        documents=tuple(
            DocumentRecord(
                doc_id=r["doc_id"],
                path=r["path"],
                size=0,
                mtime=0.0,
                content_hash="",
                status=r["status"],
                error=None,
                pages=None,
                chunks=r["chunks"] or 0,
                languages=r["languages"] or "",
            )
            for r in rows
        )
    )
