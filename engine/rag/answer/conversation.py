"""A question asked within a conversation: what it refers to, and how to search for it.

A follow-up ("and the second one?", "what about POP3?", "when was it?") means little
alone: searched as asked it finds nothing, or the wrong thing. Before retrieval it is
resolved into a `FollowUp`:

- without a language model, history-aware retrieval: the search text is the question
  as asked, its embedding is the question's blended with the earlier question's
  (weighted below the question's own). It is searched twice more (`also`): with the
  earlier question's words in the full-text half and that question weighted more, and
  with the passage the last answer quoted blended in; the three rankings are fused.
  Passages of the files the last answer drew on (by their share of its sources), of
  the pages it cited, and next to the pages it quoted (less: next to those it only
  cited) move up by bonuses a better match outranks (the weights: `ragdoll bench
  conversation`);
- with a model, the model rewrites the question as a standalone search query first (a
  short generation through the pipeline, see engine/rag/pipeline/answering.py); the
  rewritten query is searched, its ranking fused with the history-aware searches above
  (the same bonuses for the pages cited): a small model often answers the question
  instead of rewriting it (SmolLM2-135M: "No, it does not work on every system"), and
  its text alone then found fewer follow-ups than no model (`ragdoll bench conversation`).

A question that does not look like a follow-up (`looks_dependent`) is still searched
both ways (`hedged`): as asked, and history-aware as above. The detector misses
follow-ups phrased in ways it was not written for, so the history-aware rankings are
fused in by how much the earlier question helps the search (`lean`: the best match's
similarity with the earlier question blended in, against the question's own): a
question that means little alone matches passages better with it, one on a new
subject matches its own passages worse, and keeps its own ranking.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from engine.rag.answer.conversation_dependence import GENERIC, content_words, looks_dependent
from engine.wire_events import Citation, Turn

# Earlier turns' embeddings count less than the question's own words (0.4: best of 0.3-0.5
# on the tuned set over all 12 files of the corpus, `ragdoll bench conversation`).
PREVIOUS_QUESTION_WEIGHT = 0.4
PREVIOUS_ANSWER_WEIGHT = 0.0  # the answer's words pulled follow-ups back to its page
# A follow-up that names nothing but GENERIC words ("the second one", "the other
# option") borrows the earlier question's words and leans on it more.
BORROWED_QUESTION_WEIGHT = 0.6
# The fused searches' blends (_also_searches): the earlier question, the quoted passage.
WITH_QUESTION_WEIGHT = 0.8
WITH_PASSAGE_WEIGHT = 0.5
_MARKER = re.compile(r"\[(\d+)\]")
# `lean`: how far the best match's similarity must rise with the earlier question
# blended in (at PREVIOUS_QUESTION_WEIGHT) before a question judged standalone leans
# on it (0 below LEAN_FROM, fully at LEAN_FULL). On the tuning sets the earlier
# question lowered a standalone question's best similarity (median -0.02 to -0.05)
# and raised a follow-up's (median +0.06 to +0.08; `ragdoll bench conversation`).
LEAN_FROM = 0.0
LEAN_FULL = 0.08
REWRITE_INSTRUCTIONS = (
    "Rewrite the last question of the conversation below as one standalone search query "
    "that names everything it refers to. Reply with the query only."
)


@dataclass(frozen=True, kw_only=True)
class AlsoSearch:
    """One more search a follow-up's ranking is fused with: its full-text words and
    the texts blended into its embedding (with the question's own)."""

    text: str
    blend: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, kw_only=True)
class FollowUp:
    """How one question of a conversation is searched for."""

    question: str  # as asked
    query: str  # the search text (shown as "searched for: …")
    context: str = ""  # the earlier question(s) blended into its embedding
    history: tuple[Turn, ...]  # the turns before it, oldest first
    blend: tuple[tuple[str, float], ...] = ()  # (text, weight) embedded with the query
    cited: frozenset[tuple[str, int | None]] = frozenset()  # (path, page) cited last turn
    rewritten_by: str = "history"  # "history" | "model"
    dependent: bool = True  # False: judged standalone (searched as asked, and `hedged`)
    # Searched too, their rankings fused with the query's (no model: history-aware).
    also: tuple[AlsoSearch, ...] = ()
    # (path, share): how much of the last answer came from each file, the passages it
    # quoted counting double; a follow-up that names nothing else stays there.
    files: tuple[tuple[str, float], ...] = ()
    # (path, page) of the passages the last answer quoted: its answer is often next to them.
    quoted: frozenset[tuple[str, int | None]] = frozenset()

    @property
    def hedged(self) -> bool:
        """Judged standalone, but searched history-aware too: `query` and `blend` are
        the question as asked, `also` starts with the history-aware search, and the
        history's rankings and bonuses count by `lean` (engine/rag/pipeline/adapters.py)."""
        return not self.dependent


def resolve(*, question: str, history: tuple[Turn, ...]) -> FollowUp | None:
    """The history-aware search for `question` (no model needed); None when there is
    no earlier turn. A question that names what it asks about (`dependent` False) is
    searched as asked and, hedged, history-aware (fused in by `lean`); the model
    still sees the turns before it.

    A follow-up that names something of its own ("what about POP3?") is searched with
    its own words (borrowing the earlier question's words pulled the search back to
    the earlier answer's page), the earlier question it leans on blended lightly into
    its embedding (`context`). One that names nothing ("and the second one?") borrows
    the earlier question's words into its search text and leans on it more."""
    question = " ".join(question.split())
    last = _last_answered(history)
    if last is None:
        return None
    dependent = looks_dependent(question)
    referents = _referents(history)
    own = [w.casefold() for w in content_words(question)]
    if all(w in GENERIC for w in own):
        # Nothing of its own to search for: the earlier question's words join its own.
        mine = set(own)
        borrowed = [w for q in referents for w in content_words(q) if w.casefold() not in mine]
        query = " ".join([*_unique(borrowed), question])
        weight = BORROWED_QUESTION_WEIGHT
    else:
        query, weight = question, PREVIOUS_QUESTION_WEIGHT
    blend = [(q, weight) for q in referents]
    if last.answer.strip() and PREVIOUS_ANSWER_WEIGHT > 0:
        blend.append((last.answer, PREVIOUS_ANSWER_WEIGHT))
    also = _also_searches(question=question, referents=referents, last=last)
    if not dependent:
        # Searched as asked first; the history-aware search is the first of the others.
        also = (AlsoSearch(text=query, blend=tuple(blend)), *also)
        query, blend = question, []
    return FollowUp(
        question=question,
        query=query,
        context=" / ".join(referents),
        history=history,
        blend=tuple(blend),
        cited=frozenset((c.path, c.page) for c in last.citations),
        dependent=dependent,
        also=also,
        files=_file_shares(last),
        quoted=frozenset((c.path, c.page) for c in _quoted(last)),
    )


def lean(*, alone: float, with_history: float) -> float:
    """How much a question judged standalone leans on the earlier turn, 0 to 1, from
    its best match's similarity searched alone and with the earlier question blended
    in: an incomplete question ("Why might mine be held back?") matches its passage
    better once the earlier question says what "mine" is."""
    gain = with_history - alone
    return min(1.0, max(0.0, (gain - LEAN_FROM) / (LEAN_FULL - LEAN_FROM)))


def _also_searches(*, question: str, referents: list[str], last: Turn) -> tuple[AlsoSearch, ...]:
    """The follow-up searched with what it leans on spelled out, fused with its own
    search: once with the earlier question's words in its full-text half and that
    question weighted more in its embedding, once with the passage the last answer
    quoted first blended into its embedding (the follow-up often asks about what
    sits next to it)."""
    mine = {w.casefold() for w in content_words(question)}
    borrowed = _unique([w for q in referents for w in content_words(q) if w.casefold() not in mine])
    out = [
        AlsoSearch(
            text=" ".join([*borrowed, question]),
            blend=tuple((q, WITH_QUESTION_WEIGHT) for q in referents),
        )
    ]
    quoted = _quoted(last)
    if quoted and WITH_PASSAGE_WEIGHT > 0:
        out.append(AlsoSearch(text=question, blend=((quoted[0].text, WITH_PASSAGE_WEIGHT),)))
    return tuple(out)


def _quoted(turn: Turn) -> list[Citation]:
    """The citations the turn's answer quotes ([n] markers), in marker order; all of
    them when it has none (a model's answer may not mark its sources)."""
    marked = [int(n) for n in _MARKER.findall(turn.answer)]
    by_index = {c.index: c for c in turn.citations}
    out = [by_index[n] for n in _unique_ints(marked) if n in by_index]
    return out or list(turn.citations)


def _file_shares(turn: Turn) -> tuple[tuple[str, float], ...]:
    quoted = {c.index for c in _quoted(turn)}
    weights: dict[str, float] = {}
    for c in turn.citations:
        weights[c.path] = weights.get(c.path, 0.0) + (2.0 if c.index in quoted else 1.0)
    total = sum(weights.values())
    return tuple((path, w / total) for path, w in weights.items()) if total else ()


def _unique_ints(values: list[int]) -> list[int]:
    return list(dict.fromkeys(values))


def rewritten(*, follow_up: FollowUp, query: str) -> FollowUp:
    """The model's standalone rewrite searched first, as it is (no blend: it names
    what the question refers to), and the history-aware searches fused with it: the
    history-aware query with its blend, then its own `also` searches."""
    query = " ".join(query.split()).strip(" \"'")
    if not query:
        return follow_up
    return dataclasses.replace(
        follow_up,
        query=query,
        blend=(),
        rewritten_by="model",
        also=(AlsoSearch(text=follow_up.query, blend=follow_up.blend), *follow_up.also),
    )


def rewrite_prompt_text(*, question: str, history: tuple[Turn, ...], max_turns: int = 3) -> str:
    """The user message of the rewrite generation: the last turns (answers cut short)
    and the question."""
    lines = []
    for turn in history[-max_turns:]:
        lines.append(f"Question: {' '.join(turn.question.split())}")
        answer = " ".join(turn.answer.split())
        lines.append(f"Answer: {answer[:400]}{'…' if len(answer) > 400 else ''}")
    lines.append(f"Last question: {' '.join(question.split())}")
    return "\n".join(lines)


def _referents(history: tuple[Turn, ...]) -> list[str]:
    """The earlier questions a follow-up leans on: the last one, and the one before it
    when the last was itself a follow-up ("and the second one?" then "when was it?")."""
    questions: list[str] = []
    for turn in reversed(history[-2:]):
        questions.insert(0, " ".join(turn.question.split()))
        if not looks_dependent(turn.question):
            break
    return questions


def _last_answered(history: tuple[Turn, ...]) -> Turn | None:
    for turn in reversed(history):
        if turn.question.strip():
            return turn
    return None


def _unique(words: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for w in words:
        if w.casefold() not in seen:
            seen.add(w.casefold())
            out.append(w)
    return out
