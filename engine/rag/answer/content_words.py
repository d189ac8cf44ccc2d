"""The words of a text that carry its meaning, as the lexical scores read them.

The extractive answer's rare shared words (extractive.py), the gate's unknown words
(refusal.py), the attribution's minimum of words (attribution.py) and the reranker's
focus all compare a question's words with a passage's this one way: lower-cased,
common English function words left out, stemmed just enough that "filters" meets
"filter"; a script written without spaces (Chinese, Japanese, Thai) as character pairs.
"""

from __future__ import annotations

import re

from engine.rag.answer.sentences import UNSPACED


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
    "via s t get use using want need way make instead"
)


def content_words(text: str) -> list[str]:
    """The words that carry meaning, stemmed; a run of a script written without spaces
    (Chinese, Japanese, Thai) as its overlapping character pairs, the usual way to match
    such text without a dictionary."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        if UNSPACED.search(w):
            out += _character_pairs(w)
        elif w not in _STOPWORDS:
            out.append(stem(w))
    return out


_UNSPACED_RUN = re.compile(f"({UNSPACED.pattern}+)")  # split keeps the runs


def _character_pairs(word: str) -> list[str]:
    pairs: list[str] = []
    for run in _UNSPACED_RUN.split(word):
        if not run:
            continue
        if UNSPACED.match(run):
            pairs += [run[i : i + 2] for i in range(max(1, len(run) - 1))]
        elif run not in _STOPWORDS:
            pairs.append(stem(run))
    return pairs


def stem(word: str) -> str:
    # Just enough to match "filters"/"filter", "cleaned"/"cleaning"/"clean",
    # "ignore"/"ignored"/"ignores" and "copies"/"copy".
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    # "ignore" and "ignor(ed)" meet without the final e.
    return word[:-1] if word.endswith("e") and len(word) > 3 else word
