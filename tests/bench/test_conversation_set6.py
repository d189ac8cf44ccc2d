"""The third held-out set: written after the other sets were measured, on new pages."""

from __future__ import annotations

from bench.conversation import LATER_PARTS, TUNING_PARTS
from bench.conversation_set import CONVERSATIONS, HELD_OUT3

# Every other set the bench asks, so that a set added later is checked against too.
OTHERS = (
    *CONVERSATIONS,
    *(c for name, part in LATER_PARTS.items() if name != "held_out3" for c in part),
)


def test_the_set_is_big_enough_and_spread_over_the_corpus() -> None:
    assert len(HELD_OUT3) >= 36
    files = [c.file for c in HELD_OUT3]
    assert len(set(files)) >= 6
    assert max(files.count(f) for f in set(files)) <= 9


def test_every_conversation_is_held_out() -> None:
    assert all(c.held_out for c in HELD_OUT3)


def test_pages_are_given_for_pdfs_only() -> None:
    for c in HELD_OUT3:
        assert (c.pages is not None) == c.file.endswith(".pdf"), c.file
        assert all(p >= 1 for p in c.pages or ())


def test_no_page_of_another_set_is_reused() -> None:
    used = {(c.file, p) for c in OTHERS for p in c.pages or ()}
    mine = {(c.file, p) for c in HELD_OUT3 for p in c.pages or ()}
    # Counted, not listed: the other held-out sets' pages stay unread.
    assert not used & mine, f"{len(used & mine)} page(s) of the other sets reused"


def test_no_question_of_another_set_is_asked_again() -> None:
    asked = {q.casefold() for c in OTHERS for q in (c.first, c.follow_up)}
    reused = [c for c in HELD_OUT3 if {c.first.casefold(), c.follow_up.casefold()} & asked]
    assert not reused, f"{len(reused)} question(s) reused"


def test_it_is_a_held_out_part_of_the_bench() -> None:
    assert LATER_PARTS["held_out3"] == HELD_OUT3
    assert "held_out3" not in TUNING_PARTS
