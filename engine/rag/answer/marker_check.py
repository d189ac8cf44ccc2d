"""A written answer's [n] markers checked against the passages they point at.

A small model puts markers where the prompt's example taught it to, not where the
passage says what the sentence says: the real Qwen2.5-Coder-1.5B cited `set -e` to the
`shopt` page, and answered "[2]" alone or "Yes, [5]" (the opposite of the page). So,
once the answer is written, each marker's claim (the text from the sentence's start to
the marker, markers removed) is embedded with the passages' sentences, by the same
embedder that attributes unmarked answers (engine/rag/answer/attribution.py), so the check
holds in whatever language that embedder reads:

- a marker stays when its passage holds a sentence close to the claim;
- else it moves to the passage that does, when one does;
- else it goes: a claim no passage supports shows no marker. A claim too short to
  compare ("Yes,") supports nothing, so its markers go too.

An answer whose words, markers aside, are too few to say anything is `bare`: the
caller shows something else (engine/rag/pipeline/answer_stream.py shows the sources'
best sentences, as the extractive answer does, with a note).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale, passage_similarity
from engine.rag.answer.sentences import CHARACTERS_PER_WORD, UNSPACED, asks, split_sentences

# The embedder's cosine of a claim and a passage's sentence above which the passage is
# taken to hold the claim, on all-MiniLM-L6-v2's scale (another embedder's cosines are
# put on it first: engine/rag/answer/semantic_scale.py). MiniLM: a restatement scores
# 0.7-0.9, a sentence on the same topic saying something else 0.4-0.6; the `set -e`
# claim scored 0.47 against the `shopt` page and 0.62 against The Set Builtin's.
SUPPORT = 0.55
MIN_CLAIM_WORDS = 3  # fewer words than this cannot be compared with a passage
MIN_ANSWER_WORDS = 3  # an answer with fewer words than this, markers aside, is bare
# One marker group: "[2]", "[1, 3]", "[1-3]", or a run of them "[1][2]".
_MARKER = re.compile(r"\[(\d+(?:\s*[,–-]\s*\d+)*)\]")
_ONE = r"\[\d+(?:\s*[,–-]\s*\d+)*\]"
_BETWEEN = r"(?:[ \t]*(?:,|;|&|and|…|\.\.\.))*[ \t]*"  # only between two markers
MARKER_RUN = rf"{_ONE}(?:{_BETWEEN}{_ONE})*"
_RUN = re.compile(rf"[ \t]*{MARKER_RUN}[ \t]*")
# Where a claim starts: after a sentence's end, a line break or a list bullet.
# Chinese and Japanese end a sentence at a full-width stop, with no space after it.
_CLAIM_START = re.compile(
    r"(?:[.!?]+[\"'”’)\]]*\s+|[。！？｡]+[」』”’）)\]]*\s*|\n\s*(?:[-*•]\s+|\d+[.)]\s+)?)"
)
_CLAUSE_END = re.compile(r"(?<=[.!?;:])\s+")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)  # words of letters, in any script
_CLOSING = ".!?:;,。！？：；，"  # what may close a claim before its marker


@dataclass(frozen=True, kw_only=True)
class CheckedMarkers:
    text: str
    kept: int  # markers whose passage holds their claim
    moved: int  # markers moved to the passage that holds their claim
    dropped: int  # markers whose claim no passage holds (or too short to compare)
    bare: bool  # markers aside, the answer says nothing


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A run of markers in the answer and the text it is the source of."""

    start: int  # of the marker run in the answer
    end: int
    cited: tuple[int, ...]  # the passage numbers it names, in order
    text: str  # the claim, markers removed
    # The sentences before it on its line since the previous run, nearest first, each
    # with where a marker would go: a run after a paragraph ("… source. It is key. [1]")
    # often stands for a sentence before the last.
    earlier: tuple[tuple[int, str], ...] = ()


def check_markers(
    *,
    answer: str,
    passages: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    scale: SemanticScale = IDENTITY,
    across: Sequence[bool] = (),
    support: float = SUPPORT,
    before: str = "",
) -> CheckedMarkers:
    """`answer` with each marker kept, moved to the passage that holds its claim, or
    dropped (passages numbered from 1 in the order given). `scale` puts `embed`'s
    cosines on the scale `support` is set on; `across[n - 1]`: passage n is in another
    language than the answer (read on a translation's scale). `before`: the text that
    stood before `answer` on its line since the last marker, already shown (an answer
    checked as it is written): its sentences vouch for the first marker run as earlier
    sentences do, but cannot take it, so the run stays where it is."""
    claims = find_claims(answer)
    bare = len(words(strip_markers(answer))) < MIN_ANSWER_WORDS
    if not claims:
        return CheckedMarkers(text=answer, kept=0, moved=0, dropped=0, bare=bare)
    before = before[before.rfind("\n") + 1 :]  # its own line's
    cuts = [0, *(m.end() for m in _CLAIM_START.finditer(before)), len(before)]
    shown = [strip_markers(before[a:b]).strip() for a, b in itertools.pairwise(cuts)][::-1]
    vouching = tuple((-1, t) for t in shown if t)  # -1: nowhere to move the marker to
    if vouching and "\n" not in answer[: claims[0].start]:
        claims[0] = replace(claims[0], earlier=(*claims[0].earlier, *vouching))
    owners: list[int] = []
    sentences: list[str] = []
    for n, passage in enumerate(passages, start=1):
        for piece in _pieces(passage):
            owners.append(n)
            sentences.append(piece)
    every = dict.fromkeys(t for c in claims for t in (c.text, *(e for _, e in c.earlier)))
    said = [t for t in every if len(words(t)) >= MIN_CLAIM_WORDS]
    best: dict[str, np.ndarray] = {}  # claim text -> best similarity per passage
    if said and sentences:
        similarity = passage_similarity(
            said=said, sentences=sentences, owners=owners, embed=embed, scale=scale, across=across
        )
        for text, row in zip(said, similarity, strict=True):
            per_passage = np.full(len(passages), -1.0, dtype=np.float32)
            for column, n in enumerate(owners):
                per_passage[n - 1] = max(per_passage[n - 1], float(row[column]))
            best[text] = per_passage
    squashed = [_squash(p) for p in passages]
    out = answer
    kept = moved = dropped = 0
    # From the end, so that earlier claims keep their offsets.
    for claim in reversed(claims):
        if _quoted(answer=answer, claim=claim, passages=squashed):
            continue  # "[1] 25647" copied from a page that prints it: the page's words
        # A sentence that asks (the model repeating the question) states nothing to cite.
        asking = _asking(answer, claim)
        scores = None if asking else best.get(claim.text)
        cited = [n for n in dict.fromkeys(claim.cited) if 1 <= n <= len(passages)]
        keep: list[int] = []
        back: tuple[int, int] | None = None  # (where, n): the marker goes to an earlier sentence
        if scores is not None:
            keep = [n for n in cited if scores[n - 1] >= support]
        if not keep:
            back = _earlier_home(claim=claim, cited=cited, best=best, support=support)
        if keep:
            kept += len(keep)
            dropped += len(set(claim.cited) - set(keep))
        elif back is None and scores is not None and float(scores.max()) >= support:
            keep = [int(scores.argmax()) + 1]
            moved += 1
        elif back is not None and back[0] < 0 and asking:  # shown, but a question cites nothing
            dropped += len(set(claim.cited))
            back = None
        elif back is not None and back[0] < 0:  # vouched for by what is shown: stays
            keep = [back[1]]
            kept += 1
            back = None
        elif back is not None:
            moved += 1
        else:
            dropped += len(set(claim.cited))
        run = out[claim.start : claim.end]
        replacement = " " + "".join(f"[{n}]" for n in keep) if keep else ""
        # Keep what the run swallowed after it: a space before the next word.
        if keep and run.endswith((" ", "\t")):
            replacement += " "
        elif not keep and run.startswith((" ", "\t")) and run.endswith((" ", "\t")):
            replacement = " "
        out = out[: claim.start] + replacement + out[claim.end :]
        if back is not None:
            where, n = back
            out = f"{out[:where]} [{n}]{out[where:]}"
    return CheckedMarkers(text=out.strip(), kept=kept, moved=moved, dropped=dropped, bare=bare)


def _earlier_home(
    *,
    claim: Claim,
    cited: Sequence[int],
    best: dict[str, np.ndarray],
    support: float,
) -> tuple[int, int] | None:
    """Where a run its own sentence does not support belongs: after the nearest earlier
    sentence on its line that a passage it names holds."""
    for where, text in claim.earlier:
        scores = best.get(text)
        if scores is None or asks(text):
            continue
        for n in cited:
            if scores[n - 1] >= support:
                return where, n
    return None


def _asking(answer: str, claim: Claim) -> bool:
    """Whether the claim's sentence asks, its marker run before the question mark
    ("… guillemets [2]?") or after it."""
    after = answer[claim.end :].lstrip()
    return asks(claim.text) or asks(claim.text + after[:1])


def find_claims(answer: str) -> list[Claim]:
    """Each run of markers with the text it stands after: from the start of its
    sentence (or of the text after the previous run in the same sentence) to the run.
    A run right after a sentence's end ("… fails. [2]") is that sentence's."""
    claims: list[Claim] = []
    for run in _RUN.finditer(answer):
        cited = _numbers(run.group())
        if not cited or in_code(
            answer, at=run.start() + len(run.group()) - len(run.group().lstrip())
        ):
            continue
        before = answer[: run.start()]
        body = before.rstrip()
        body_end = len(body)
        while body and body[-1] in _CLOSING:
            body = body[:-1]
        starts = [m.end() for m in _CLAIM_START.finditer(body)]
        start = starts[-1] if starts else 0
        if claims and claims[-1].end > start:
            start = claims[-1].end  # a sentence's second marker run: the text between
        text = strip_markers(answer[start:body_end]).strip()
        line_start = before.rfind("\n") + 1
        region = max(line_start, claims[-1].end if claims else 0)
        bounds = [region, *(b for b in starts if region < b < start), start]
        earlier = []
        for a, b in itertools.pairwise(bounds):
            sentence = answer[a:b].rstrip()
            where = a + len(sentence.rstrip(".!?:;,"))
            earlier.append((where, strip_markers(sentence).strip()))
        claims.append(
            Claim(
                start=run.start(),
                end=run.end(),
                cited=cited,
                text=text,
                earlier=tuple(reversed([e for e in earlier if e[1]])),
            )
        )
    return claims


def in_code(answer: str, *, at: int) -> bool:
    """Whether the bracket at `at` is code's, not a marker: an index written onto a name
    ("arr[1]", "${arr[1]}") or inside an inline code span on its line. A marker stands
    after a space (the real 1.5B put one before all its 87 markers on four blind parts)
    or after a sentence's end; a script written without spaces puts it onto a letter,
    which is no ASCII one."""
    before = answer[at - 1] if at else ""
    if before and before.isascii() and (before.isalnum() or before in "_$}"):
        return True
    line = answer[answer.rfind("\n", 0, at) + 1 : at]
    return line.count("`") % 2 == 1


def strip_markers(text: str) -> str:
    return _MARKER.sub("", text)


def words(text: str) -> list[str]:
    """The words of `text`; a run of a script written without spaces (Chinese,
    Japanese) counts a word per CHARACTERS_PER_WORD letters, as sentences.word_count."""
    out: list[str] = []
    for word in _WORD.findall(text):
        if UNSPACED.search(word):
            step = CHARACTERS_PER_WORD
            out += [word[i : i + step] for i in range(0, len(word), step)]
        else:
            out.append(word)
    return out


def _numbers(run: str) -> tuple[int, ...]:
    out: list[int] = []
    for group in _MARKER.findall(run):
        for part in re.split(r"\s*,\s*", group):
            bounds = re.split(r"\s*[–-]\s*", part)
            if len(bounds) == 2 and bounds[0] and bounds[1]:
                low, high = int(bounds[0]), int(bounds[1])
                out.extend(range(low, high + 1) if 0 < high - low < 20 else (low, high))
            elif part:
                out.append(int(part))
    return tuple(out)


def _pieces(passage: str) -> list[str]:
    """The passage's sentences, and the clauses within them: a manual's option entry
    ("-e Exit immediately if …") follows the previous sentence without a capital and
    stays inside it, where the whole sentence's vector dilutes what the entry says."""
    sentences = split_sentences(passage, min_words=MIN_CLAIM_WORDS) or [passage]
    pieces = list(sentences)
    for sentence in sentences:
        parts = [p for p in _CLAUSE_END.split(sentence) if len(words(p)) >= MIN_CLAIM_WORDS]
        if len(parts) > 1:
            pieces.extend(parts)
    return pieces


def _quoted(*, answer: str, claim: Claim, passages: Sequence[str]) -> bool:
    """Whether the marker run and the words around it are a passage's own text."""
    around = _squash(answer[max(0, claim.start - 24) : claim.end + 24])
    return len(around) > 12 and any(around in p for p in passages)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()
