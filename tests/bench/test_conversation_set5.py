"""The fifth tuning set: follow-ups phrased as people type them, on new pages."""

from __future__ import annotations

from bench.conversation import LATER_PARTS, TUNING_PARTS
from bench.conversation_set import (
    CONVERSATIONS,
    HELD_OUT2,
    SWITCHES4,
    TUNING2,
    TUNING3,
    TUNING4,
    TUNING5,
)


def test_the_set_is_big_enough_and_spread_over_the_corpus() -> None:
    assert len(TUNING5) >= 30
    assert len({c.file for c in TUNING5}) >= 10


def test_pages_are_given_for_pdfs_only() -> None:
    for c in TUNING5:
        assert (c.pages is not None) == c.file.endswith(".pdf"), c
        assert all(p >= 1 for p in c.pages or ())


def test_no_page_of_another_set_is_reused() -> None:
    others = (*CONVERSATIONS, *HELD_OUT2, *TUNING2, *TUNING3, *TUNING4, *SWITCHES4)
    used = {(c.file, p) for c in others for p in c.pages or ()}
    mine = {(c.file, p) for c in TUNING5 for p in c.pages or ()}
    # Counted, not listed: the held-out pages stay unread by whoever tunes on this set.
    assert not used & mine, f"{len(used & mine)} page(s) of the other sets reused"


def test_no_question_of_another_set_is_asked_again() -> None:
    others = (*CONVERSATIONS, *HELD_OUT2, *TUNING2, *TUNING3, *TUNING4, *SWITCHES4)
    asked = {q.casefold() for c in others for q in (c.first, c.follow_up)}
    assert not [c for c in TUNING5 if c.first.casefold() in asked], "a first question reused"


def test_it_is_a_tuning_part_of_the_bench() -> None:
    assert LATER_PARTS["tuned5"] == TUNING5
    assert "tuned5" in TUNING_PARTS
