"""A sentence read together with the one before it in its passage.

A sentence that leans on its predecessor ("Den kallas vanligen .linesrc i UNIX, och
lines.cfg i MS-Windows." after "Det finns även en konfigurationsfil …") does not name
what the question asks about, and alone scores low against it, though it holds the
fact. Read with the sentence before it, it does name it. The pair counts only where it
reads closer to the question than each of its sentences alone: where the two together
say what neither does. A pair that merely carries its predecessor's relevance would hand
an unrelated sentence the score of the one before it, and let the gate pass questions
the passages do not answer.

Embedding every pair anew would double the sentences' cost (on this CPU, 255 -> 562 ms a
question with multilingual-e5-small). The pair's promise is read first from the two
sentence vectors the answer has already (their normalised sum: no model call), and only
the most promising pairs are embedded: on the blind set, the best 4 quote as many facts
as the best 8, at 302 ms against 394 (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Embed = Callable[[list[str]], np.ndarray]

# Pairs embedded a question. Blind set, the answer holds the fact (of 458): 2 pairs 278,
# 4 282, 8 282; about 10 ms a pair with multilingual-e5-small on two cores.
PAIRS_READ = 4


def previous_in_passage(passages: Sequence[object]) -> list[int]:
    """For each sentence (given as the passage it belongs to, in passage order), the
    position of the sentence before it in the same passage; -1 for a passage's first."""
    return [i - 1 if i and passages[i - 1] is passage else -1 for i, passage in enumerate(passages)]


@dataclass(frozen=True, kw_only=True)
class PairedCosines:
    cosines: np.ndarray  # each sentence's cosine with the question: its own or its pair's
    paired: np.ndarray  # bool: the pair's (the sentence is read with the one before it)


def paired_cosines(
    *,
    question: np.ndarray,
    vectors: np.ndarray,
    texts: Sequence[str],
    before: Sequence[int],
    embed: Embed,
    read: int = PAIRS_READ,
) -> PairedCosines:
    """Each sentence's cosine with `question`: its own, or its pair's with the sentence
    before it (`previous_in_passage`) where the pair reads closer than both of them
    alone. `vectors` are the sentences' own (L2-normalised rows, as `embed` gives);
    `read`: how many of the most promising pairs are embedded."""
    own = vectors @ question
    paired = np.zeros(len(own), dtype=bool)
    led = [i for i, b in enumerate(before) if b >= 0]
    if not led or read < 1:
        return PairedCosines(cosines=own, paired=paired)
    prior = [before[i] for i in led]
    promise = vectors[led] + vectors[prior]
    promise /= np.maximum(np.linalg.norm(promise, axis=1, keepdims=True), 1e-9)
    order = np.argsort(-(promise @ question), kind="stable")[:read]
    chosen = [led[j] for j in order]
    pairs = [f"{texts[before[i]]} {texts[i]}" for i in chosen]
    read_together = np.asarray(embed(pairs), dtype=np.float32) @ question
    out = own.copy()
    for i, cosine in zip(chosen, read_together, strict=True):
        if cosine > own[i] and cosine > own[before[i]]:
            out[i] = cosine
            paired[i] = True
    return PairedCosines(cosines=out, paired=paired)
