"""`ragdoll bench conversation`, the other direction: a question that stands alone, asked
after an unrelated turn, should be searched as if asked alone.

A question taken for a follow-up is searched history-aware (the earlier question
blended in, the files the last answer drew on favoured), which pulls it towards the
earlier subject. Each question here is asked twice through `Engine.ask_stream`: after
an unrelated earlier turn (as the product does: the engine decides whether it leans
on that turn) and alone; hit@1 and hit@3 of both are reported, with how many the
engine took for follow-ups.

Two sets, each earlier turn fixed by position before anything was tuned:
- each conversation's first question (bench/conversation_set.py), after the
  first turn of the conversation `PAIR_OFFSET` places on whose file differs; found
  when a top source is the conversation's file (the set gives pages for the
  follow-ups only). Tuned / held out as the conversation;
- each answerable question of the quality set (bench/quality_set.json),
  after the first turn of conversation (its position × `QUALITY_STRIDE`) mod 43,
  moved on until that turn's file is none of the question's; found as the quality
  benchmark finds it (its file and page, or one of its `also`). Tuned / held out by
  its `split`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.conversation_set import CONVERSATIONS
from bench.quality import QualityQuestion, load_set, right_source
from engine.rag.answer.conversation_dependence import looks_dependent
from engine.wire import Turn

PAIR_OFFSET = 21  # about half the set away: another manual, another subject
QUALITY_STRIDE = 7

Ask = Callable[..., tuple[str, list[Any], str]]


def measure(*, ask: Ask, first_turns: Sequence[Turn]) -> dict[str, Any]:
    """The two sets' rows and scores; `ask(question=, history=)` is the benchmark's
    (answer, citations, searched-for) and `first_turns` each conversation's first
    turn, asked alone."""
    firsts = []
    for i, conv in enumerate(CONVERSATIONS):
        j = _earlier(i + PAIR_OFFSET, avoid={conv.file})
        firsts.append(
            _row(
                ask=ask,
                question=conv.first,
                earlier=first_turns[j],
                held_out=conv.held_out,
                right=lambda c, conv=conv: Path(c.path).name == conv.file,
            )
        )
    quality = []
    for k, q in enumerate(q for q in load_set() if q.answerable):
        j = _earlier(k * QUALITY_STRIDE, avoid=_files(q))
        quality.append(
            _row(
                ask=ask,
                question=q.question,
                earlier=first_turns[j],
                held_out=q.held_out,
                right=lambda c, q=q: right_source(q, path=c.path, page=c.page),
            )
        )
    return {
        "firsts": {"rows": firsts, **_scores(firsts)},
        "quality": {"rows": quality, **_scores(quality)},
    }


def judged() -> dict[str, Any]:
    """How the engine judges the text sets alone (`looks_dependent`): all 117
    quality-set questions and the first questions should stand alone, the follow-ups
    lean on their first turn. The tuning sets' follow-ups and the third set's
    standalone questions are judged too; only tuning questions are listed as wrong
    (held-out ones are counted, not named)."""
    from bench.conversation_set import STANDALONE3, TUNING2, TUNING3

    firsts3 = [c.first for c in TUNING3] + list(STANDALONE3)
    sets = {
        "firsts": ([(c.first, c.held_out) for c in CONVERSATIONS], False),
        "quality": ([(q.question, q.held_out) for q in load_set()], False),
        "follow_ups": ([(c.follow_up, c.held_out) for c in CONVERSATIONS], True),
        "follow_ups_tuned2": ([(c.follow_up, False) for c in TUNING2], True),
        "firsts_tuned3": ([(q, False) for q in firsts3], False),
        "follow_ups_tuned3": ([(c.follow_up, False) for c in TUNING3], True),
    }
    out: dict[str, Any] = {}
    for name, (questions, follow_ups) in sets.items():
        rows = [(q, held, looks_dependent(q)) for q, held in questions]
        out[name] = {
            "tuned": [sum(d for _, h, d in rows if not h), sum(not h for _, h, _ in rows)],
            "held_out": [sum(d for _, h, d in rows if h), sum(h for _, h, _ in rows)],
            "wrong": [q for q, h, d in rows if d != follow_ups and not h],
        }
    return out


def report(figures: dict[str, Any]) -> list[str]:
    lines = []
    for name, part in figures.get("judged", {}).items():
        (t, nt), (h, nh) = part["tuned"], part["held_out"]
        lines.append(f"judged a follow-up, {name}: tuned {t}/{nt}, held out {h}/{nh}")
        lines.extend(f"    wrong: {q!r}" for q in part["wrong"])
    for name, what in (("firsts", "conversations' first questions (file)"),
                       ("quality", "quality-set questions (file and page)")):  # fmt: skip
        part = figures[name]
        lines.append(f"standalone after an unrelated turn, {what}:")
        s = part["tuned"]
        lines.append(
            f"  tuned: taken for a follow-up {s['dependent']}/{s['n']}; "
            f"hit@1 {s['hit1']}/{s['n']} in the conversation, {s['hit1_alone']} alone; "
            f"hit@3 {s['hit3']}/{s['n']} in the conversation, {s['hit3_alone']} alone"
        )
        # The held-out questions' hits are in the figures (--out), not printed: every
        # tuning run of this bench would otherwise show how the held splits rank.
        s = part["held_out"]
        lines.append(f"  held_out: taken for a follow-up {s['dependent']}/{s['n']}")
        for r in part["rows"]:
            if r["dependent"] and not r["held_out"]:
                lines.append(f"    taken for a follow-up: {r['question']!r} after {r['after']!r}")
    return lines


def _row(
    *, ask: Ask, question: str, earlier: Turn, held_out: bool, right: Callable[[Any], bool]
) -> dict[str, Any]:
    _, within, searched = ask(question=question, history=[earlier])
    _, alone, _ = ask(question=question, history=[])
    return {
        "question": question,
        "after": earlier.question,
        "held_out": held_out,
        "dependent": bool(searched),  # the engine says "searched for" for a follow-up only
        "searched": searched,
        "hit1": any(right(c) for c in within[:1]),
        "hit3": any(right(c) for c in within[:3]),
        "hit1_alone": any(right(c) for c in alone[:1]),
        "hit3_alone": any(right(c) for c in alone[:3]),
    }


def _scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def score(part: list[dict[str, Any]]) -> dict[str, int]:
        keys = ("dependent", "hit1", "hit3", "hit1_alone", "hit3_alone")
        return {"n": len(part), **{k: sum(r[k] for r in part) for k in keys}}

    return {
        "tuned": score([r for r in rows if not r["held_out"]]),
        "held_out": score([r for r in rows if r["held_out"]]),
        "all": score(rows),
    }


def _earlier(start: int, *, avoid: set[str]) -> int:
    """The first conversation from `start` on (cyclically) whose file is not in `avoid`."""
    n = len(CONVERSATIONS)
    for step in range(n):
        j = (start + step) % n
        if CONVERSATIONS[j].file not in avoid:
            return j
    raise ValueError("every conversation is about the question's files")


def _files(q: QualityQuestion) -> set[str]:
    return {f for f in (q.file, *(a for a, _ in q.also)) if f is not None}
