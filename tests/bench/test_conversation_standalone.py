"""The standalone-in-conversation check: fixed unrelated earlier turns, both sides scored."""

from __future__ import annotations

from typing import Any

from bench import conversation_standalone as standalone
from bench.conversation_set import CONVERSATIONS
from bench.quality import load_set
from engine.wire import Citation, Turn


def _cite(path: str, page: int | None) -> Citation:
    return Citation(
        index=1, chunk_id="c", path=path, page=page, text="t", score=0.5, char_start=0, char_end=1
    )


def test_every_question_follows_a_turn_on_another_file() -> None:
    turns = [Turn(question=c.first, answer="a") for c in CONVERSATIONS]
    asked: list[tuple[str, str]] = []

    def ask(*, question: str, history: list[Turn]) -> tuple[str, list[Any], str]:
        if history:
            asked.append((question, history[0].question))
        return "", [], ""

    figures = standalone.measure(ask=ask, first_turns=turns)
    file_of = {c.first: c.file for c in CONVERSATIONS}
    for i, conv in enumerate(CONVERSATIONS):
        question, after = asked[i]
        assert question == conv.first and file_of[after] != conv.file
    answerable = [q for q in load_set() if q.answerable]
    assert len(asked) == len(CONVERSATIONS) + len(answerable)
    for q, (question, after) in zip(answerable, asked[len(CONVERSATIONS) :], strict=True):
        assert question == q.question and file_of[after] not in {q.file, *(a for a, _ in q.also)}
    held = sum(c.held_out for c in CONVERSATIONS)
    assert figures["firsts"]["held_out"]["n"] == held
    assert figures["quality"]["held_out"]["n"] == sum(q.held_out for q in answerable)
    # The held-out questions' hits stay in the figures, out of the printed report.
    printed = "\n".join(standalone.report(figures))
    assert "  tuned: taken for a follow-up" in printed and "hit@1" in printed
    held_lines = [line for line in printed.splitlines() if line.startswith("  held_out")]
    assert held_lines and not any("hit@" in line for line in held_lines)


def test_hits_are_counted_in_the_conversation_and_alone() -> None:
    turns = [Turn(question=c.first, answer="a") for c in CONVERSATIONS]
    target = CONVERSATIONS[0]

    def ask(*, question: str, history: list[Turn]) -> tuple[str, list[Any], str]:
        right, wrong = _cite(f"/d/{target.file}", None), _cite("/d/other.pdf", 1)
        if question != target.first:
            return "", [], ""
        # Taken for a follow-up, the right file drops to second place.
        return ("", [wrong, right], "searched") if history else ("", [right], "")

    rows = standalone.measure(ask=ask, first_turns=turns)["firsts"]["rows"]
    row = rows[0]
    assert row["dependent"] and not row["hit1"] and row["hit3"]
    assert row["hit1_alone"] and row["hit3_alone"]
    assert not any(r["dependent"] for r in rows[1:])


def test_the_text_sets_are_judged_in_both_directions() -> None:
    judged = standalone.judged()
    for name, total in (("firsts", len(CONVERSATIONS)), ("quality", len(load_set()))):
        (t, nt), (_, nh) = judged[name]["tuned"], judged[name]["held_out"]
        # Judged follow-ups; only the tuning questions are named.
        assert nt + nh == total and len(judged[name]["wrong"]) == t
    t, nt = judged["follow_ups"]["tuned"]
    assert len(judged["follow_ups"]["wrong"]) == nt - t  # judged standalone
    held = {c.first for c in CONVERSATIONS if c.held_out} | {
        c.follow_up for c in CONVERSATIONS if c.held_out
    }
    assert not held & {q for part in judged.values() for q in part["wrong"]}
    assert judged["firsts_tuned3"]["tuned"][1] >= 45
    assert judged["follow_ups_tuned3"]["held_out"][1] == 0
    # A short question with no pronoun or stand-in is judged standalone, however few
    # its words: the history-aware search weighs in by `lean`, not by a word count.
    assert "What is a login shell?" not in judged["firsts_tuned3"]["wrong"]
    assert "What is a conffile in a Debian package?" not in judged["firsts"]["wrong"]
