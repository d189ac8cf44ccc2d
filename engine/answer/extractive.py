"""Answers without a language model: the passages' own sentences that answer best.

Each sentence is scored by its embedding's cosine similarity with the question, plus a
small bonus for sharing the question's words (embedders are weak on names, codes and
numbers) and one for coming from a better-ranked passage. The best few sentences that
are not near-duplicates of one another are quoted, in reading order, each with the [n]
marker of its passage.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.answer.passages import Passage
from engine.answer.sentences import split_sentences

NO_MODEL_NOTE = (
    "No language model is installed, so answers are quoted from your documents. "
    'To get written answers, add one with "ragdoll model /path/to/model" '
    "or the 'Model…' button in the window."
)
NOT_FOUND_TEXT = "Your documents do not seem to answer this question."

# Tuned with all-MiniLM-L6-v2: sentences that answer a question score about 0.45-0.8,
# unrelated ones below 0.25.
DEFAULT_MIN_SCORE = 0.35
# A sentence this much weaker than the best one is context, not answer.
_RELATIVE_MARGIN = 0.15
_LEXICAL_WEIGHT = 0.15
_RANK_WEIGHT = 0.04
# How strongly similarity to sentences already chosen counts against a candidate (MMR).
_REDUNDANCY_WEIGHT = 0.3
_DUPLICATE_SIMILARITY = 0.82  # MiniLM: paraphrases score 0.82-0.92, related sentences ~0.65
_DUPLICATE_WORD_OVERLAP = 0.8


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = _words(
    "a an the and or but if of to in on at by for with from into onto about as is are "
    "was were be been being do does did done have has had having it its this that "
    "these those there here what which who whom whose when where why how can could "
    "should would will shall may might must not no yes i you he she we they me my "
    "your our their his her them us so than then too very just also any all some each "
    "every more most much many such own same other only both either neither nor per "
    "via s t"
)
_TERMINAL = re.compile(r"([.!?…]+)([\"'”’)\]]*)$")


@dataclass(frozen=True, kw_only=True)
class ExtractiveAnswer:
    text: str  # quoted sentences, each followed by its marker: "... monthly [2]."
    used_indices: list[int]  # the passages quoted, ascending
    found: bool  # False when no sentence is relevant enough


@dataclass(frozen=True, kw_only=True)
class _Candidate:
    passage: Passage
    rank: int  # the passage's position in the list given (0 = best)
    position: int  # the sentence's position within its passage
    text: str


class ExtractiveAnswerer:
    """Quotes the sentences that best answer a question.

    `embed` turns texts into L2-normalised rows (as sentence-transformers' encode does
    with normalize_embeddings=True); it is called once per answer.
    """

    def __init__(
        self,
        *,
        embed: Callable[[list[str]], np.ndarray],
        min_score: float = DEFAULT_MIN_SCORE,
    ) -> None:
        self._embed = embed
        self._min_score = min_score

    def answer(
        self, *, question: str, passages: list[Passage], max_sentences: int = 3
    ) -> ExtractiveAnswer:
        candidates = _candidates(passages)
        if not candidates or not question.strip() or max_sentences < 1:
            return _not_found()

        vectors = np.asarray(
            self._embed([question] + [c.text for c in candidates]), dtype=np.float32
        )
        sentence_vectors = vectors[1:]
        semantic = sentence_vectors @ vectors[0]
        question_words = _content_words(question)
        lexical = np.array([_overlap(question_words, c.text) for c in candidates])
        relevance = semantic + _LEXICAL_WEIGHT * lexical
        rank = np.array([c.rank for c in candidates], dtype=np.float32)
        score = relevance + _RANK_WEIGHT * (1.0 - rank / len(passages))

        best = int(np.argmax(relevance))
        if relevance[best] < self._min_score:
            return _not_found()
        cutoff = max(self._min_score, float(relevance[best]) - _RELATIVE_MARGIN)
        chosen = _select(
            candidates=candidates,
            vectors=sentence_vectors,
            score=score,
            eligible=relevance >= cutoff,
            limit=max_sentences,
        )
        chosen.sort(key=lambda i: (candidates[i].passage.index, candidates[i].position))
        text = " ".join(
            _with_marker(candidates[i].text, index=candidates[i].passage.index) for i in chosen
        )
        used = sorted({candidates[i].passage.index for i in chosen})
        return ExtractiveAnswer(text=text, used_indices=used, found=True)


def _not_found() -> ExtractiveAnswer:
    return ExtractiveAnswer(text=NOT_FOUND_TEXT, used_indices=[], found=False)


def _candidates(passages: list[Passage]) -> list[_Candidate]:
    return [
        _Candidate(passage=passage, rank=rank, position=position, text=sentence)
        for rank, passage in enumerate(passages)
        for position, sentence in enumerate(split_sentences(passage.text))
    ]


def _select(
    *,
    candidates: list[_Candidate],
    vectors: np.ndarray,
    score: np.ndarray,
    eligible: np.ndarray,
    limit: int,
) -> list[int]:
    """Greedy maximal marginal relevance over the eligible sentences, skipping any that
    repeat one already chosen (the same text often sits in overlapping chunks)."""
    similarity = vectors @ vectors.T
    words = [set(_content_words(c.text)) for c in candidates]
    remaining = [i for i in np.argsort(-score) if eligible[i]]
    chosen: list[int] = []
    while remaining and len(chosen) < limit:
        redundancy = [max((similarity[i, j] for j in chosen), default=0.0) for i in remaining]
        pick = max(
            range(len(remaining)),
            key=lambda k: score[remaining[k]] - _REDUNDANCY_WEIGHT * redundancy[k],
        )
        i = int(remaining.pop(pick))
        if redundancy[pick] >= _DUPLICATE_SIMILARITY or any(
            _jaccard(words[i], words[j]) >= _DUPLICATE_WORD_OVERLAP for j in chosen
        ):
            continue
        chosen.append(i)
    return chosen


def _with_marker(sentence: str, *, index: int) -> str:
    """'The filter is cleaned monthly.' -> 'The filter is cleaned monthly [2].'"""
    match = _TERMINAL.search(sentence)
    if match is None:
        # List items and table rows end without punctuation, split parts with ";".
        return f"{sentence.rstrip(',;: ')} [{index}]."
    body = sentence[: match.start()].rstrip()
    return f"{body} [{index}]{match.group(1)}{match.group(2)}"


def _content_words(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def _stem(word: str) -> str:
    # Just enough to match "filters"/"filter" and "cleaned"/"cleaning"/"clean".
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _overlap(question_words: list[str], sentence: str) -> float:
    wanted = set(question_words)
    if not wanted:
        return 0.0
    return len(wanted & set(_content_words(sentence))) / len(wanted)


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
