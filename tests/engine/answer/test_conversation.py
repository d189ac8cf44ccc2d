"""Follow-up questions resolved into search queries (no model), and a model's rewrite."""

from __future__ import annotations

from engine.answer.conversation import (
    PREVIOUS_QUESTION_WEIGHT,
    looks_dependent,
    resolve,
    rewritten,
)
from engine.wire import Citation, SearchedEvent, Turn


def _cite(path: str, page: int | None) -> Citation:
    return Citation(
        index=1, chunk_id="c", path=path, page=page, text="t", score=0.5, char_start=0, char_end=1
    )


FIRST = Turn(
    question="How do I configure exim to deliver mail over IMAP?",
    answer="Set the transport to maildir and enable the IMAP server.",
    citations=[_cite("/docs/exim.pdf", 12)],
)


def test_follow_ups_are_told_from_questions_that_stand_alone() -> None:
    for q in ("what about POP3?", "And the second one?", "When was it?", "why?", "and how"):
        assert looks_dependent(q), q
    for q in (
        "How do I configure the exim mail transport for maildir delivery?",
        "Which options does git rebase --empty accept?",
        "How do I tell git bisect that the current commit is good?",
    ):
        assert not looks_dependent(q), q


def test_a_follow_up_weighs_in_the_earlier_question_and_its_pages() -> None:
    follow = resolve(question="what about  POP3?", history=(FIRST,))
    assert follow is not None and follow.dependent
    assert follow.query == "what about POP3?"  # its own words are the search text
    assert follow.context == FIRST.question
    assert follow.blend == ((FIRST.question, PREVIOUS_QUESTION_WEIGHT),)
    assert follow.cited == frozenset({("/docs/exim.pdf", 12)})


def test_a_question_that_names_its_subject_is_searched_as_asked() -> None:
    q = "Which options does git rebase --empty accept?"
    follow = resolve(question=q, history=(FIRST,))
    assert follow is not None and not follow.dependent
    assert follow.query == q and follow.blend == () and not follow.cited
    assert follow.history == (FIRST,)  # the model still sees the conversation


def test_no_history_no_follow_up() -> None:
    assert resolve(question="and the second one?", history=()) is None


def test_a_chain_of_follow_ups_keeps_the_subject() -> None:
    second = Turn(question="what about POP3?", answer="Use the pop3 transport.")
    follow = resolve(question="when was it added?", history=(FIRST, second))
    assert follow is not None
    assert follow.context == f"{FIRST.question} / what about POP3?"
    assert {text for text, _ in follow.blend} == {FIRST.question, "what about POP3?"}


def test_a_models_rewrite_replaces_the_query_but_keeps_the_pages() -> None:
    follow = resolve(question="what about POP3?", history=(FIRST,))
    assert follow is not None
    better = rewritten(follow_up=follow, query=' "configure exim for POP3 delivery" ')
    assert better.query == "configure exim for POP3 delivery"
    assert better.rewritten_by == "model" and better.blend == ()
    assert better.cited == follow.cited
    assert SearchedEvent(query="q", context="earlier").shown() == "q  (with: earlier)"
    assert rewritten(follow_up=follow, query="   ") is follow  # nothing said: keep it


def test_a_follow_up_that_names_nothing_borrows_the_earlier_questions_words() -> None:
    options = Turn(question="What choices does git rebase --empty accept?", answer="drop, keep")
    follow = resolve(question="And what does the second one do?", history=(options,))
    assert follow is not None and follow.dependent
    assert "rebase empty" in follow.query and follow.query.endswith(
        "And what does the second one do?"
    )
    assert follow.blend[0][1] > PREVIOUS_QUESTION_WEIGHT  # it leans on it more
