"""Follow-up questions resolved into search queries (no model), and a model's rewrite."""

from __future__ import annotations

from engine.rag.answer.conversation import (
    PREVIOUS_QUESTION_WEIGHT,
    lean,
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
    for q in ("does it work over POP3?", "And the second one?", "When was it?", "Why not those?"):
        assert looks_dependent(q), q
    for q in (
        "How do I configure the exim mail transport for maildir delivery?",
        "Which options does git rebase --empty accept?",
        "How do I tell git bisect that the current commit is good?",
    ):
        assert not looks_dependent(q), q


def test_a_follow_up_weighs_in_the_earlier_question_and_its_pages() -> None:
    follow = resolve(question="does it  work over POP3?", history=(FIRST,))
    assert follow is not None and follow.dependent
    assert follow.query == "does it work over POP3?"  # its own words are the search text
    assert follow.context == FIRST.question
    assert follow.blend == ((FIRST.question, PREVIOUS_QUESTION_WEIGHT),)
    assert follow.cited == frozenset({("/docs/exim.pdf", 12)})


def test_a_question_that_names_its_subject_is_searched_as_asked_and_hedged() -> None:
    q = "Which options does git rebase --empty accept?"
    follow = resolve(question=q, history=(FIRST,))
    assert follow is not None and not follow.dependent and follow.hedged
    assert follow.query == q and follow.blend == ()  # its own search is the question's
    # The history-aware search comes first among the others (`lean` reads its score).
    assert follow.also[0].text == q
    assert follow.also[0].blend == ((FIRST.question, PREVIOUS_QUESTION_WEIGHT),)
    assert follow.cited == frozenset({("/docs/exim.pdf", 12)})
    assert follow.history == (FIRST,)  # the model still sees the conversation


def test_a_follow_up_is_not_hedged() -> None:
    follow = resolve(question="does it work over POP3?", history=(FIRST,))
    assert follow is not None and follow.dependent and not follow.hedged


def test_lean_grows_with_what_the_earlier_question_adds() -> None:
    assert lean(alone=0.6, with_history=0.55) == 0.0  # a new subject: diluted
    assert lean(alone=0.6, with_history=0.6) == 0.0
    assert 0.0 < lean(alone=0.3, with_history=0.33) < lean(alone=0.3, with_history=0.36) < 1.0
    assert lean(alone=0.2, with_history=0.5) == 1.0


def test_no_history_no_follow_up() -> None:
    assert resolve(question="and the second one?", history=()) is None


def test_a_chain_of_follow_ups_keeps_the_subject() -> None:
    second = Turn(question="does it work over POP3?", answer="Use the pop3 transport.")
    follow = resolve(question="when was it added?", history=(FIRST, second))
    assert follow is not None
    assert follow.context == f"{FIRST.question} / does it work over POP3?"
    assert {text for text, _ in follow.blend} == {FIRST.question, "does it work over POP3?"}


def test_a_models_rewrite_replaces_the_query_but_keeps_the_pages() -> None:
    follow = resolve(question="does it work over POP3?", history=(FIRST,))
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


def test_a_follow_up_is_also_searched_with_the_earlier_question_and_the_quoted_passage() -> None:
    def cite(index: int, path: str, page: int, text: str) -> Citation:
        return Citation(
            index=index, chunk_id=f"c{index}", path=path, page=page, text=text, score=0.5,
            char_start=0, char_end=1,
        )  # fmt: skip

    upload = Turn(
        question="How do I upload a package to the Debian archive?",
        # The answer quotes its third source: that file and page weigh more.
        answer="Once you are a developer you can upload it [3].",
        citations=[
            cite(1, "/d/devref.pdf", 43, "Uploading to ftp-master"),
            cite(2, "/d/devref.pdf", 42, "Uploads go to the queue"),
            cite(3, "/d/maint.pdf", 57, "you can upload the package to the archive"),
        ],
    )
    follow = resolve(question="When must the orig.tar.gz go with it?", history=(upload,))
    assert follow is not None and follow.dependent
    with_question, with_passage = follow.also
    # The earlier question's words join the full-text half; its embedding weighs more.
    assert with_question.text.startswith("upload package Debian archive")
    assert with_question.text.endswith("When must the orig.tar.gz go with it?")
    assert with_question.blend[0][0] == upload.question
    assert with_question.blend[0][1] > PREVIOUS_QUESTION_WEIGHT
    # The passage the answer quoted, not the first source.
    assert with_passage.blend[0][0] == "you can upload the package to the archive"
    assert follow.quoted == frozenset({("/d/maint.pdf", 57)})
    shares = dict(follow.files)
    assert shares["/d/maint.pdf"] == 2 / 4 and shares["/d/devref.pdf"] == 2 / 4
    # A model's rewrite keeps where the last answer came from, and the history-aware
    # searches are fused with its own: a small model's rewrite may be an answer.
    better = rewritten(follow_up=follow, query="when to include orig.tar.gz in an upload")
    assert better.quoted == follow.quoted and better.files == follow.files
    assert better.query == "when to include orig.tar.gz in an upload" and better.blend == ()
    assert better.also[0].text == follow.query and better.also[0].blend == follow.blend
    assert better.also[1:] == follow.also
