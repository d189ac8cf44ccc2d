"""Refusing near-topic questions: the question names something the collection never mentions.

The extractive answerer's sentence score (semantic + lexical) is the gate's main
signal, but a near-topic question shares most of its words with the manuals
("How do I set up replication slots in PostgreSQL?" over the Debian reference,
which mentions PostgreSQL) and its best sentence scores like an answer. What gives
it away is a word the question hinges on that no chunk holds at all ("slots",
"WireGuard", "Kubernetes"): the answer sentence then needs `UNKNOWN_WORD_PENALTY`
more score to pass. Paraphrased answerable questions have such words too
("vouch", "payload"), which is why an unknown word raises the bar instead of
refusing outright. Set on the quality benchmark's tune split
(`ragdoll bench quality`).

A word counts as unknown only when no retrieved passage holds it and the full-text index
finds it neither in the retrieved passages' documents nor in SPREAD documents of the
collection (`holds`, with `held` over the store's `word_documents`); words so common
that the index drops them are never asked; and only in a collection of at least
MIN_CHUNKS chunks. A term one other manual mentions in passing ("Docker" in a Debian
reference of 266 pages) says nothing about the documents the answer comes from: with
the whole collection as the measure, adding that manual let through 7 of the 51
near-topic questions the gate had refused. A word several documents use is part of
the collection's own vocabulary, as a question's paraphrase ("pick", "rid") may be.

A word the passages hold in another form is not unknown either, in any language: an
inflection (it and a passage's word differ only in their last few letters: "configuro" /
"configurar", "installiert" / "installieren") or a compound whose parts the passages
hold ("Sicherheitsupdates": "Sicherheit" and "Updates", with or without the linking
"s"), or a word sharing most of its letters in one run with a passage's word, where a
language changes a word's front or middle ("nenastavím" / "nastaví", "унаследован" /
"пронаследован"; blind set: 4 fewer answerable questions refused, no unanswerable one
answered). Nor is a word the collection holds in another form (`holds_form`, with `held` over
the store's `form_documents`: the full-text index finds a word that shares all but its
last letter, "borro" / "borrar", "compruebo" / "comprueba"): a collection of several
languages is indexed with English stemming rules, which know no Spanish or German
inflection. Without that, a German or Spanish question's ordinary words read as unknown
and refused answerable questions; the check needs no word list of any language.

An ordinary word of some language is never unknown (`ordinary`): its absence from the
collection says nothing about the question, which asks in the asker's own words, or in
another language than the documents'. The engine's test (word_languages.py,
`either_ordinary`) takes a word one language uses ten times as often as any other
("nachsehen", "cuántos", "segno", "powieściach": wordfreq's frequencies of 42 languages),
or an inflection of such a word of the question's language that no two lists hold
("impedisco" / "impediscono", "съединят" / "съединява"; blind set: 5 more answerable
questions answered, one unanswerable Polish one let through), or one that the embedder's
vocabulary holds whole where that is a multilingual SentencePiece model
(multilingual-e5, bge-m3: "tengo", "combien", "eigentlich"), or one the language
identifier reads alone as a language, as sure as a page's vote must be
("пересоздаётся", "zeichnungsrahmen": forms no frequency list holds). Names
and terms the question hinges on ("Docker", "pybuild", "nftables", "Flatpak", "Kosovo")
are used alike in many languages or not at all, and the vocabulary cuts them into pieces.

A name of several capitalised words ("Arch User Repository", "Secure Boot",
"Raspberry Pi") counts the same way as a whole: each of its words may occur in the
manuals ("arch", "user", "repository") while the name never does. It is unknown when
no retrieved passage holds it and `holds_phrase` (the store's) finds no chunk that
does. A sentence's first word has its capital from where it stands, and a language
that writes every noun with a capital (German) gives one to its ordinary words: neither
is part of a name ("Setelah Alt-SysRq", "LuaLaTeX Probleme" refused answerable
questions of the blind set).

A script written without spaces (Chinese, Japanese, Thai) has no words to look up:
a run of it is a phrase, and the check stays silent on it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from engine.rag.answer.content_words import content_words, stem
from engine.rag.answer.sentences import UNSPACED
from engine.rag.answer.word_languages import ENDING, HANGUL, MIN_STEM, Ordinary
from engine.rag.ingest.language import text_language
from engine.rag.store.search import plain_words

UNKNOWN_WORD_PENALTY = 0.3  # tune split, PDFium index: 0.25-0.3 refuse 0.80, 0.02
# Absence is evidence with the gate's own test only in a collection large enough to
# use a paraphrase's ordinary words: over a few files most of a question's words are
# missing (the project's 33-question test on generated manuals lost 9 answers to the
# penalty); the benchmark's manuals are 6,129 chunks. A smaller collection is read with
# a looser test (word_languages.py, `small_collection_ordinary`), and not at all
# without one.
MIN_CHUNKS = 1000
# A word in this many documents of the collection is its own vocabulary, held whichever
# documents the answer comes from (3: the English set's answerable questions all still
# answered, 9 more of the blind set's 75 unanswerable ones refused; docs/benchmarks.md).
SPREAD = 3


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# English function words (the usual full-text stop list): an index that drops them
# finds no chunk for them, which says nothing about the collection.
COMMON_WORDS = _words(
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his "
    "himself she her hers herself it its itself they them their theirs themselves what "
    "which who whom this that these those am is are was were be been being have has had "
    "having do does did doing a an the and but if or because as until while of at by for "
    "with about against between into through during before after above below to from up "
    "down in out on off over under again further then once here there when where why how "
    "all any both each few more most other some such no nor not only own same so than too "
    "very s t can will just don should now mine"
)
# A negated auxiliary ("isn't", "haven’t", typed with either apostrophe) splits into
# "isn" and "t" at the apostrophe; the first half is no subject, and a collection whose
# full-text index keeps "isn't" whole finds no chunk with "isn", which read as an
# unknown word refused answerable follow-ups ("What if the machine isn't on all day?").
_NEGATED = re.compile(r"\w+n['’]t\b", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
_MIN_LETTERS = 3
# Words with a capital and a lower-case letter ("Secure", "LaTeX", "IPv4"; not
# "SQL", "NULL", whose runs are code), two or more in a row.
# A name's word may hold a dot ("Node.js") but not end in one: that is a sentence's end
# ("Ich verwende Stable. Wie wechsle ich …" names nothing called "Stable Wie").
_NAME_WORD = r"[A-Z][\w+#.-]*[a-z](?:[\w+#.-]*[\w+#-])?"
_NAME = re.compile(rf"(?<![\w-]){_NAME_WORD}(?:\s+{_NAME_WORD})+(?![\w-])")
# Where a sentence ends and the next, capitalised whatever its first word is, begins.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
# The identifier's codes of the languages that capitalise every noun.
_CAPITALISED_NOUNS = frozenset({"de", "lb"})


def unknown_words(
    *,
    question: str,
    texts: Sequence[str],
    holds: Callable[[str], bool],
    holds_form: Callable[[str, int], bool] | None = None,
    holds_phrase: Callable[[str], bool] | None = None,
    ordinary: Ordinary | None = None,
) -> list[str]:
    """The question's words that none of `texts` holds and `holds` says no chunk does
    (nor, with `holds_form(word, fixed)`, a word sharing its first `fixed` letters),
    then its names of several words that none of `texts` holds and `holds_phrase`
    says no chunk does. `ordinary(word, the question's language)`: whether a word is an
    ordinary word of some language (never unknown)."""
    out = _unknown_single(question=question, texts=texts, holds=holds, holds_form=holds_form)
    language = text_language(question) if ordinary is not None else None
    if ordinary is not None and out:
        out = [w for w in out if not ordinary(w, language)]
    if holds_phrase is not None:
        nouns = (
            (lambda word: ordinary(word, language))
            if ordinary is not None and capitalises_nouns(language)
            else None
        )
        out += _unknown_names(
            question=question, texts=texts, holds_phrase=holds_phrase, ordinary=nouns
        )
    return out


def held(documents: frozenset[str] | None, *, answering: frozenset[str]) -> bool:
    """Whether a word the full-text index finds in `documents` (None: not known to be
    absent) counts as held for an answer from the documents `answering`."""
    return documents is None or bool(documents & answering) or len(documents) >= SPREAD


def names(question: str, *, ordinary: Callable[[str], bool] | None = None) -> list[str]:
    """The names of several capitalised words in `question`. A sentence's first word is
    left out (a sentence starts with a capital whatever it is), and where `ordinary` is
    given, every word it says is an ordinary word: the question's language capitalises
    its nouns (`capitalises_nouns`), so their capital names nothing."""
    found: list[str] = []
    for sentence in _SENTENCE_END.split(question):
        words = sentence.split(maxsplit=1)
        rest = words[1] if len(words) > 1 else ""
        for run in _NAME.findall(rest):
            found += _named_parts(run.split(), ordinary=ordinary)
    return list(dict.fromkeys(found))


def _named_parts(words: list[str], *, ordinary: Callable[[str], bool] | None) -> list[str]:
    """The runs of two or more of `words` that `ordinary` does not cut."""
    if ordinary is None:
        return [" ".join(words)]
    parts: list[str] = []
    run: list[str] = []
    for word in [*words, ""]:
        if word and not ordinary(word.lower()):
            run.append(word)
            continue
        if len(run) > 1:
            parts.append(" ".join(run))
        run = []
    return parts


def capitalises_nouns(language: str | None) -> bool:
    """Whether `language` (the identifier's code) writes every noun with a capital, as
    German and Luxembourgish do: a German question's "Probleme", "Warnung" or "Name" is
    no part of a name ("LuaLaTeX Probleme" never occurs in a German manual, and read as
    one refused the question that asked for it)."""
    return language in _CAPITALISED_NOUNS


def _unknown_names(
    *,
    question: str,
    texts: Sequence[str],
    holds_phrase: Callable[[str], bool],
    ordinary: Callable[[str], bool] | None,
) -> list[str]:
    joined = f" {' '.join(plain_words(t) for t in texts)} "
    return [
        n
        for n in names(question, ordinary=ordinary)
        if f" {plain_words(n)} " not in joined and not holds_phrase(n)
    ]


def _unknown_single(
    *,
    question: str,
    texts: Sequence[str],
    holds: Callable[[str], bool],
    holds_form: Callable[[str, int], bool] | None,
) -> list[str]:
    seen: set[str] = set()
    raw: set[str] = set()
    for text in texts:
        seen.update(content_words(text))
        raw.update(w for w in _WORD.findall(text.lower()) if len(w) >= _MIN_PART)
    out = []
    for word in dict.fromkeys(_question_words(question)):
        if UNSPACED.search(word):
            continue  # a run of Chinese or Japanese is a phrase, not a word: no verdict
        if len(word) < _MIN_LETTERS or word in COMMON_WORDS or not content_words(word):
            continue
        if stem(word) in seen or another_form(word, raw) or holds(word):
            continue
        # In the whole collection, only the last letter may change (and up to two be
        # added): "borro" / "borrar", "compruebo" / "comprueba". A looser match found
        # other words ("perforce" / "perform") and let through a question it should refuse.
        if holds_form is not None and len(word) > _MIN_PART and holds_form(word, len(word) - 1):
            continue
        out.append(word)
    return out


# Korean writes a particle right after a foreign term ("XCF로", "GIMP를"): where a word
# turns from another script to Hangul, the term ends.
_INTO_HANGUL = re.compile(f"(?<=[^\\W{HANGUL}])(?=[{HANGUL}])")


def _question_words(question: str) -> list[str]:
    words = _WORD.findall(_NEGATED.sub(" ", question.lower()))
    return [part for w in words for part in _INTO_HANGUL.split(w)]


# An inflection differs from its other forms in at most ENDING final letters, the rest
# (at least MIN_STEM letters) shared; a compound's parts have _MIN_PART at least.
_MIN_PART = 4
# A run of letters shared with a passage's word, to count as the same word in another
# form: at least this many letters, and this share of the question's word.
_MIN_RUN = 7
_MOST = 0.6


def another_form(word: str, words: set[str]) -> bool:
    """Whether `words` (lower-case) hold `word` inflected or its parts as a compound."""
    head = word[:MIN_STEM]
    for w in words:
        if len(word) > MIN_STEM and w.startswith(head):
            shared = _shared_prefix(word, w)
            if len(word) - shared <= ENDING and len(w) - shared <= ENDING:
                return True
    return _compound(word, words) or _shares_most(word, words)


def _shares_most(word: str, words: set[str]) -> bool:
    """Whether one of `words` holds a run of `word`'s letters that is most of it and at
    least _MIN_RUN long: the same word with a prefix or an infix ("nenastavím" /
    "nastaví", "унаследован" / "пронаследован", "mengonfigurasinya" /
    "mengkonfigurasinya") or a compound that shares its longer part ("släktdatabasen" /
    "databasen"), in a language whose forms change at the front as well as at the end."""
    run = max(_MIN_RUN, math.ceil(_MOST * len(word)))
    if len(word) < run:
        return False
    joined = " ".join(w for w in words if len(w) >= run)
    return any(word[i : i + run] in joined for i in range(len(word) - run + 1))


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _compound(word: str, words: set[str]) -> bool:
    for cut in range(_MIN_PART, len(word) - _MIN_PART + 1):
        left, right = word[:cut], word[cut:]
        if not _near(right, words):
            continue
        if _near(left, words) or (left.endswith("s") and _near(left[:-1], words)):
            return True
    return False


def _near(part: str, words: set[str]) -> bool:
    """`part` is one of `words`, or one of them with a short ending ("update"/"updates")."""
    if len(part) < _MIN_PART:
        return False
    return part in words or any(
        w.startswith(part) and len(w) - len(part) <= 2 for w in words if len(w) > len(part)
    )


def refused(*, score: float, unknown: Sequence[str], min_score: float) -> bool:
    """The gate's verdict on an answer sentence of relevance `score`."""
    return score - (UNKNOWN_WORD_PENALTY if unknown else 0.0) < min_score
