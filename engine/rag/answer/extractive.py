"""Answers without a language model: the sentence that states the fact, in its passage.

Every sentence of the retrieved passages is scored against the question:
- its embedding's cosine similarity with the question's, or its pair's with the
  sentence before it where the two together read closer than either alone
  (engine/rag/answer/sentence_pairs.py);
- lexical overlap, each question word weighted by how rare it is among the candidate
  sentences (embedders are weak on names, codes and numbers, and a word every sentence
  shares says nothing);
- the code tokens the question names ("--onto", "LINENO", "max_part", "\\def") found
  verbatim;
- a heading or a fragment cut at the passage's edge is marked down: it names the topic
  but states nothing;
- a share of its neighbours' scores, since the fact often sits next to the sentence
  that repeats the question's words;
- a sentence ending in ":" is read with the short lines it introduces (an option
  pair, a command), which are otherwise never scored;

These are the columns of `SentenceTable.features` (engine/rag/answer/sentence_choice.py
names them and holds the weights of the choice and of the gate's relevance);
bench/sentence_fit.py dumps them for the quality benchmark's tuning questions.
The best sentence is the answer. It comes first, with the [n] marker of its passage,
then the passage around it as a quotation (the sentence before and the two after,
whole sentences only, with the short lines between them: option names and command
lines under 4 words, which are never scored) so that a fact stated next to the
sentence that repeats the question's words is not lost; a second passage is
quoted too when its best sentence is nearly as good and says something else; and where
no sentence quoted so far is from the search's first passage, that passage's best
sentence follows when it is relevant enough to answer by itself (the search and the
sentence scores disagree: both are shown). The
text is meant to be shown literally (never as Markdown): `key` is the sentence the
window highlights inside the quotation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.rag.answer.content_words import content_words
from engine.rag.answer.passages import Passage
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.answer.sentence_choice import CHOICE_WEIGHTS, FEATURES, RELEVANCE, ChoiceWeights
from engine.rag.answer.sentence_memo import SentenceMemo
from engine.rag.answer.sentence_pairs import paired_cosines, previous_in_passage
from engine.rag.answer.sentences import asks, split_sentences, word_count

NO_MODEL_NOTE = (
    "No language model is installed, so answers are quoted from your documents. "
    'To get written answers, add one with "ragdoll model /path/to/model" '
    "or the 'Model…' button in the window."
)
LOADING_NOTE = (
    "The language model is still loading, so this answer is quoted from your documents; "
    "ask again in a moment for a written one."
)
FAILED_NOTE = (
    "The chosen language model is not in use ({error}), so answers are quoted from your documents."
)


def quoted_note(*, chosen: bool, error: str | None) -> str:
    """What an answer quoted for want of a model says why: none chosen, the chosen one
    still loading, or the chosen one failed (`error`)."""
    if chosen and error:
        return FAILED_NOTE.format(error=error)
    if chosen:
        return LOADING_NOTE
    return NO_MODEL_NOTE


NOT_FOUND_TEXT = "Your documents do not seem to answer this question."

# The relevance (semantic + lexical) the best sentence needs for an answer, with
# all-MiniLM-L6-v2. The quality benchmark's tune split (bench/quality.py) points
# at 0.60; that refuses a plain question over a one-file collection in the engine's own
# tests, so 0.50.
DEFAULT_MIN_SCORE = 0.5
# A second passage is quoted when its best sentence is at most this much weaker
# (tune split: 0.08 -> 0.16 put the fact in 0.66 -> 0.72 of answers, median answer
# 108 -> 140 words; `ragdoll bench quality`).
_SECOND_MARGIN = 0.16
_MIN_SENTENCE_WORDS = 4  # shorter lines are quoted around an answer, never scored
_AFTER = 2  # whole sentences quoted after the answer sentence (tune split: 1 -> 2 helped)
_MAX_SHORT_AROUND = 3  # lines a quotation reaches past its sentence for short ones
_BEYOND = _AFTER + _MAX_SHORT_AROUND  # lines read past a passage's end, at most
# Characters of the page after a passage that `Passage.after` holds: room for _BEYOND
# lines (two sentences of a manual are 200-400).
BEYOND_CHARS = 800
_DUPLICATE_SIMILARITY = 0.82  # MiniLM: paraphrases score 0.82-0.92, related sentences ~0.65


_TERMINAL = re.compile(r"([.!?…。！？｡؟۔।॥]+)([\"'”’)\]」』）]*)$")
# What a question names exactly: options, paths, identifiers with _ . / $ or digits,
# CamelCase and ALLCAPS words, TeX commands ("\\def").
_CODE_TOKEN = re.compile(
    r"(?<![\w-])(?:\\[A-Za-z]+|--?[A-Za-z][\w-]*|[\w.$/~-]*[_./$~][\w.$/~-]*\w|[A-Z]{2,}\w*|"
    r"[a-z]+[A-Z]\w*|\w*\d\w*)"
)
_SECTION_NUMBER = re.compile(r"^\d+(\.\d+)*\s")
# A short line that is a label and its value ("Version v1.2d, 1999/11/29", "Stand:
# 03.12.2026", "ISBN 978-0-201"): a word of letters, then only tokens that hold a digit.
# Title pages and forms state facts this way (a version, a date, a number) and in no
# sentence; a heading ("1 Introduction"), a bare label ("Version") or a code line
# ("19 \\def\\x{") is not one. Typographic, the same in any language.
_LABEL = re.compile(r"^[^\W\d_]{2,}:?$")
_VALUE = re.compile(r"\d")


@dataclass(frozen=True, kw_only=True)
class ExtractiveAnswer:
    text: str  # the answer sentence with its marker, then the quoted passage(s)
    used_indices: list[int]  # the passages quoted, ascending
    found: bool  # False when no sentence is relevant enough
    key: str = ""  # the answer sentence as it stands in the quotation (to highlight)
    score: float = 0.0  # the answer sentence's relevance (semantic + lexical)
    passage: int = 0  # the index of the answer sentence's passage (0: none)


@dataclass(frozen=True, kw_only=True)
class _Candidate:
    passage: Passage
    rank: int  # the passage's position in the list given (0 = best)
    position: int  # the sentence's position within its passage
    text: str
    fragment: bool  # cut by the passage's edge: never quoted alone
    # Under _MIN_SENTENCE_WORDS: an option name, a command line or a heading. Not
    # scored (it states nothing alone) but quoted when next to the answer sentence,
    # where the fact often is ("--first-parent" above its description). A field
    # (`is_field`: a label and its value) is short too, but scored.
    short: bool = False
    # From the text after the passage on its page (`Passage.after`): quoted where the
    # quotation reaches the passage's end, never scored.
    beyond: bool = False


class ExtractiveAnswerer:
    """Finds the sentence that answers a question and quotes it in its passage.

    `embed` turns texts into L2-normalised rows (as sentence-transformers' encode does
    with normalize_embeddings=True); it is called once per answer.
    """

    def __init__(
        self,
        *,
        embed: Callable[[list[str]], np.ndarray],
        min_score: float = DEFAULT_MIN_SCORE,
        memo: SentenceMemo | None = None,
        weights: ChoiceWeights = CHOICE_WEIGHTS,
        scale: Callable[[], SemanticScale] | None = None,
    ) -> None:
        """`scale`: the scale of the embedder behind `embed` at the call
        (engine/rag/answer/semantic_scale.py; default MiniLM's, the identity)."""
        self._embed = embed
        self._scale = scale or (lambda: IDENTITY)
        self._min_score = min_score
        self._memo = memo  # sentence vectors kept from earlier answers
        self._weights = weights  # the choice's (engine/rag/answer/sentence_choice.py)

    def table(
        self, *, question: str, passages: list[Passage], across: bool = False
    ) -> SentenceTable | None:
        """Every candidate sentence with its features (engine/rag/answer/sentence_choice.py);
        None when there is nothing to score. `across`: the question is asked in another
        language than the passages' (`SemanticScale.across`)."""
        every = _candidates(passages)
        # Scored: whole sentences; `every` also keeps the short lines and what follows
        # each passage on its page, for quoting.
        where = [i for i, c in enumerate(every) if not c.short and not c.beyond]
        candidates = [every[i] for i in where]
        if not candidates or not question.strip():
            return None
        # A sentence that ends in ":" is scored with the short lines it introduces
        # (an option list, a command): they are quoted with it and often hold the fact.
        scored = [_with_introduced(every, i) for i in where]
        if self._memo is not None:
            vectors = self._memo.embed(first=question, texts=scored, embed=self._embed)
        else:
            vectors = np.asarray(self._embed([question, *scored]), dtype=np.float32)
        sentence_vectors = vectors[1:]
        scale = self._scale()
        before = previous_in_passage([c.passage for c in candidates])
        read = paired_cosines(
            question=vectors[0],
            vectors=sentence_vectors,
            texts=scored,
            before=before,
            embed=self._embed_kept,
        )
        cosines = read.cosines
        base = sentence_features(question=question, sentences=scored, semantic=scale.apply(cosines))
        features = np.zeros((len(candidates), len(FEATURES)), dtype=np.float32)
        features[:, : base.shape[1]] = base
        features[:, _COLUMN["fragment"]] = [c.fragment for c in candidates]
        relevance = features @ RELEVANCE.vector()
        gate = relevance
        if across:
            # Only the gate reads the scale of another language: the choice among
            # sentences stays that of the sentences' own scale.
            lifted = scale.across().apply(cosines) - base[:, 0]
            gate = relevance + RELEVANCE.semantic * lifted
        features[:, _COLUMN["neighbour"]] = _neighbour_best(candidates, relevance)
        features[:, _COLUMN["rank"]] = [1.0 - c.rank / len(passages) for c in candidates]
        return SentenceTable(
            every=every,
            where=where,
            candidates=candidates,
            vectors=sentence_vectors,
            scale=scale,
            relevance=relevance,
            gate=gate,
            features=features,
            before=before,
            paired=read.paired,
        )

    def _embed_kept(self, texts: list[str]) -> np.ndarray:
        if self._memo is None:
            return np.asarray(self._embed(texts), dtype=np.float32)
        return self._memo.rows(texts=texts, embed=self._embed)

    def answer(
        self,
        *,
        question: str,
        passages: list[Passage],
        max_sentences: int = 3,
        across: bool = False,
    ) -> ExtractiveAnswer:
        table = self.table(question=question, passages=passages, across=across)
        if table is None or max_sentences < 1:
            return _not_found()
        candidates = table.candidates
        score = table.features @ self._weights.vector()

        best = int(np.argmax(score))
        gate = float(table.gate[best])
        if gate < self._min_score:
            return _not_found()
        best = table.fullest_copy(best)
        chosen = [best]
        if max_sentences > 1:
            second = _second(
                table=table,
                score=score,
                best=best,
                floor=max(self._min_score, float(score[best]) - _SECOND_MARGIN),
            )
            if second is not None:
                chosen.append(second)
        if len(chosen) < max_sentences:
            first = _first_passage_best(
                table=table, score=score, chosen=chosen, min_score=self._min_score
            )
            if first is not None:
                chosen.append(first)
        key = candidates[best]
        lead = table.lead(best)
        parts = [_with_marker(lead, index=key.passage.index)]
        for i in chosen:
            parts += table.quoted(i, alone=i == best)
        used = sorted({candidates[i].passage.index for i in chosen})
        return ExtractiveAnswer(
            text="\n\n".join(parts),
            used_indices=used,
            found=True,
            key=lead,
            score=round(gate, 4),
            passage=key.passage.index,
        )


@dataclass(frozen=True, kw_only=True)
class SentenceTable:
    """The candidate sentences of one question's passages, as the choice reads them."""

    every: list[_Candidate]  # every line in passage order, short ones included
    where: list[int]  # the scored ones' positions in `every`
    candidates: list[_Candidate]  # the scored ones
    vectors: np.ndarray  # their embeddings (rows)
    scale: SemanticScale  # of the embedder that made them
    relevance: np.ndarray  # each one's relevance (RELEVANCE), as the choice reads it
    gate: np.ndarray  # as the gate reads it: the relevance, across languages on their scale
    features: np.ndarray  # one row of FEATURES each
    before: list[int]  # the scored sentence before each in its passage (-1: none)
    paired: np.ndarray  # bool: scored with the sentence before it (sentence_pairs.py)

    def lead(self, i: int) -> str:
        """What the answer leads with for candidate i: the sentence, and the one before
        it where the two were scored together (a sentence that leans on its predecessor,
        "It is called .linesrc", says nothing alone), when the two stand next to each
        other in the quotation."""
        text = self.candidates[i].text
        prior = self.before[i]
        if not self.paired[i] or prior < 0 or self.where[prior] != self.where[i] - 1:
            return text
        if self.candidates[prior].fragment:
            return text
        return f"{self.candidates[prior].text} {text}"

    def fullest_copy(self, i: int) -> int:
        """The copy of candidate i the answer quotes (`_fullest_copy`), and when that asks
        a question, the statement right after it in its passage: the question's answer,
        which the answer then leads with (the question is quoted above it)."""
        best = _fullest_copy(candidates=self.candidates, every=self.every, where=self.where, best=i)
        return _answer_to(self.candidates, best)

    def quoted(self, i: int, *, alone: bool = False) -> list[str]:
        """Candidate i's quotation with its passage's marker; none when it is the
        answer sentence (`alone`) and its window holds nothing else."""
        window = _window(self.every, self.where[i])
        if alone and (len(window) <= 1 or " ".join(window) == self.lead(i)):
            return []
        return [f"“{' '.join(window)}” [{self.candidates[i].passage.index}]"]

    def shown(self, i: int) -> str:
        """What the answer would show with candidate i chosen, before any second
        passage: the sentence, then its quotation (the copy the answer would quote)."""
        best = self.fullest_copy(i)
        key = self.candidates[best]
        lead = _with_marker(self.lead(best), index=key.passage.index)
        parts = [lead, *self.quoted(best, alone=True)]
        return "\n\n".join(parts)


_COLUMN = {name: n for n, name in enumerate(FEATURES)}


def score_sentences(*, question: str, sentences: list[str], semantic: np.ndarray) -> np.ndarray:
    """Each sentence's relevance to the question: cosine similarity, rare shared words,
    the code tokens the question names, headings marked down."""
    base = sentence_features(question=question, sentences=sentences, semantic=semantic)
    return base @ RELEVANCE.vector()[: base.shape[1]]


def sentence_features(*, question: str, sentences: list[str], semantic: np.ndarray) -> np.ndarray:
    """The first four FEATURES of each sentence (those read from the sentence alone):
    cosine similarity, rare shared words, the question's code tokens held (max 2),
    heading-like."""
    wanted = list(dict.fromkeys(content_words(question)))
    sentence_words = [set(content_words(s)) for s in sentences]
    n = len(sentences)
    weights = {
        w: math.log(1.0 + n / (1 + sum(w in words for words in sentence_words))) for w in wanted
    }
    total = sum(weights.values()) or 1.0
    codes = [t.lower() for t in _CODE_TOKEN.findall(question) if len(t) > 1]
    out = np.zeros((n, 4), dtype=np.float32)
    out[:, 0] = semantic
    for i, (sentence, words) in enumerate(zip(sentences, sentence_words, strict=True)):
        low = sentence.lower()
        out[i, 1] = sum(weights[w] for w in wanted if w in words) / total
        out[i, 2] = min(2, sum(1 for t in codes if t in low))
        out[i, 3] = _heading_like(sentence)
    return out


def _heading_like(sentence: str) -> bool:
    words = sentence.split()
    if _SECTION_NUMBER.match(sentence):
        return True
    return len(words) < 8 and not _TERMINAL.search(sentence) and not is_field(sentence)


def is_field(line: str) -> bool:
    """A line shorter than a sentence that states a value under its label (`_LABEL`):
    scored as a statement, where other short lines are only quoted."""
    words = line.split()
    if not 2 <= len(words) < _MIN_SENTENCE_WORDS or not _LABEL.match(words[0]):
        return False
    return all(_VALUE.search(w) for w in words[1:])


def _neighbour_best(candidates: list[_Candidate], relevance: np.ndarray) -> np.ndarray:
    """The best relevance beside each sentence in its passage (0 at least): the fact
    often sits next to the sentence that repeats the question's words."""
    out = np.zeros_like(relevance)
    for i, c in enumerate(candidates):
        around = [
            relevance[j]
            for j in (i - 1, i + 1)
            if 0 <= j < len(candidates) and candidates[j].passage is c.passage
        ]
        if around:
            out[i] = max(0.0, max(around))
    return out


def _second(*, table: SentenceTable, score: np.ndarray, best: int, floor: float) -> int | None:
    """The best sentence of another passage nearly as good as the first, unless it
    repeats it (overlapping chunks hold the same text) or sits in its window."""
    says_more = _says_more_than(table=table, best=best)
    for i in np.argsort(-score):
        i = int(i)
        if score[i] < floor or table.relevance[i] <= 0:
            return None
        if says_more(i):
            return i
    return None


def _says_more_than(*, table: SentenceTable, best: int) -> Callable[[int], bool]:
    """Whether candidate i, quoted after the answer sentence `best`, is another passage's
    and neither repeats it (overlapping chunks hold the same text) nor sits in its
    window."""
    first = table.candidates[best]
    shown = {s.lower() for s in _window(table.every, table.where[best])}

    def says_more(i: int) -> bool:
        c = table.candidates[i]
        if c.passage is first.passage or c.text.lower() in shown:
            return False
        similarity = float(table.scale.apply(table.vectors[i] @ table.vectors[best]))
        return similarity < _DUPLICATE_SIMILARITY

    return says_more


def _first_passage_best(
    *, table: SentenceTable, score: np.ndarray, chosen: list[int], min_score: float
) -> int | None:
    """Where no sentence `chosen` is from the search's first passage: that passage's best
    sentence, when it is relevant enough to answer by itself and repeats none of them.
    The search ranked the passage first over its words, its meaning and its context; the
    sentence scores read one sentence each, so where they disagree both are quoted. The
    first passage comes after the sentences chosen, whether one or two are: quoted only
    in place of a second sentence, it left out 7 facts of the blind multilingual set
    that it holds (docs/benchmarks.md)."""
    candidates = table.candidates
    mine = [i for i, c in enumerate(candidates) if c.rank == 0]
    if not mine or any(candidates[c].rank == 0 for c in chosen):
        return None
    i = max(mine, key=lambda j: float(score[j]))
    if float(table.gate[i]) < min_score:
        return None
    if not all(_says_more_than(table=table, best=c)(i) for c in chosen):
        return None
    return i


def _fullest_copy(
    *, candidates: list[_Candidate], every: list[_Candidate], where: list[int], best: int
) -> int:
    """Overlapping chunks hold the same sentence: quote the copy with the most of its
    passage after it, where the fact that follows a question's words has room. Only
    sentences that state count: a FAQ's question stands once in its contents, among the
    other questions and their numbers, and once over its answer. A question's copy that
    a statement follows directly (its answer, `_answer_to`) comes first: in the contents
    the next question follows it, and the next section's text after that."""

    def following(i: int) -> int:
        k = where[i]
        after = every[k + 1 : k + 1 + _AFTER + _MAX_SHORT_AROUND]
        return sum(
            1
            for c in after
            if c.passage is every[k].passage and not (c.short or c.beyond) and not asks(c.text)
        )

    text = candidates[best].text.lower()
    copies = [i for i, c in enumerate(candidates) if c.text.lower() == text and not c.fragment] or [
        best
    ]
    return max(copies, key=lambda i: (_answer_to(candidates, i) != i, following(i), i == best))


def _answer_to(candidates: list[_Candidate], i: int) -> int:
    """The statement after candidate i in its passage when i asks; else i."""
    c, j = candidates[i], i + 1
    if not asks(c.text) or j >= len(candidates):
        return i
    after = candidates[j]
    if after.passage is not c.passage or after.fragment or asks(after.text):
        return i
    return j


def _window(candidates: list[_Candidate], i: int) -> list[str]:
    """The sentence with the one before and after it in its passage, fragments left
    out. Short lines (an option name above its description) come with the sentence
    they sit next to, and a sentence that ends in ":" brings what it introduces."""
    c = candidates[i]

    def same(j: int) -> bool:
        return 0 <= j < len(candidates) and candidates[j].passage is c.passage

    start = i - 1
    while same(start) and candidates[start].short and i - start < _MAX_SHORT_AROUND:
        start -= 1
    # A diagram or a code line between sentences ("o---o master") is not one of the
    # sentences quoted after: the sentence that explains it comes next.
    end = i
    after = 0
    while same(end + 1) and after < _AFTER and end - i < _AFTER + _MAX_SHORT_AROUND:
        end += 1
        after += _word_count(candidates[end].text) >= _MIN_SENTENCE_WORDS
    while (
        same(end + 1)
        and end - i < _AFTER + _MAX_SHORT_AROUND
        and (candidates[end].short or candidates[end].text.endswith(":"))
    ):
        end += 1
    out = []
    for j in range(start, end + 1):
        if not same(j):
            continue
        if j != i and candidates[j].fragment:
            continue
        out.append(candidates[j].text)
    return out


def _with_introduced(candidates: list[_Candidate], i: int) -> str:
    """The sentence's text, and when it ends in ":" the short lines right after it."""
    c = candidates[i]
    if not c.text.endswith(":"):
        return c.text
    parts = [c.text]
    for j in range(i + 1, min(i + 1 + _MAX_SHORT_AROUND, len(candidates))):
        following = candidates[j]
        if following.passage is not c.passage or not following.short or following.beyond:
            break
        parts.append(candidates[j].text)
    return " ".join(parts)


def _not_found() -> ExtractiveAnswer:
    return ExtractiveAnswer(text=NOT_FOUND_TEXT, used_indices=[], found=False)


def _candidates(passages: list[Passage]) -> list[_Candidate]:
    out = []
    for rank, passage in enumerate(passages):
        own = split_sentences(passage.text, min_words=1)
        # The chunk ends where the chunker's window did, often inside a FAQ's answer or
        # right after "you get the following:"; a quotation that reaches it goes on
        # (blind set: the quote held 6 more facts, nothing lost).
        beyond = split_sentences(passage.after, min_words=1)[:_BEYOND]
        for position, sentence in enumerate([*own, *beyond]):
            out.append(
                _Candidate(
                    passage=passage,
                    rank=rank,
                    position=position,
                    text=sentence,
                    # A chunk starts wherever its token window did: a first sentence
                    # that starts in lower case began in the chunk before.
                    fragment=position == 0 and _starts_mid_sentence(passage.text),
                    short=word_count(sentence) < _MIN_SENTENCE_WORDS and not is_field(sentence),
                    beyond=position >= len(own),
                )
            )
    return out


def _word_count(sentence: str) -> int:
    """Tokens that are mostly letters: a diagram ("o---o---o master") or a row of
    symbols has few."""
    count = 0
    for token in sentence.split():
        letters = sum(ch.isalpha() for ch in token)
        count += letters >= 2 and 2 * letters >= len(token)
    return count


def _starts_mid_sentence(text: str) -> bool:
    head = text.lstrip()[:1]
    return bool(head) and (head.islower() or head in ",;:)]")


def _with_marker(sentence: str, *, index: int) -> str:
    """'The filter is cleaned monthly.' -> 'The filter is cleaned monthly [2].'"""
    match = _TERMINAL.search(sentence)
    if match is None:
        # List items and table rows end without punctuation, split parts with ";".
        return f"{sentence.rstrip(',;: ')} [{index}]."
    body = sentence[: match.start()].rstrip()
    return f"{body} [{index}]{match.group(1)}{match.group(2)}"
