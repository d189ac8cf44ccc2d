"""The second held-out conversation set: new topics and pages, spread over the corpus."""

from __future__ import annotations

from bench.conversation_set import CONVERSATIONS, HELD_OUT2


def test_the_set_is_big_enough_and_spread_over_the_corpus() -> None:
    assert len(HELD_OUT2) >= 24
    assert len({c.file for c in HELD_OUT2}) >= 8


def test_no_follow_up_page_of_the_first_set_is_reused() -> None:
    used = {(c.file, p) for c in CONVERSATIONS for p in c.pages or ()}
    new = {(c.file, p) for c in HELD_OUT2 for p in c.pages or ()}
    assert not used & new
    questions = {c.first for c in CONVERSATIONS} | {c.follow_up for c in CONVERSATIONS}
    assert not questions & ({c.first for c in HELD_OUT2} | {c.follow_up for c in HELD_OUT2})


def test_pages_are_given_for_pdfs_only() -> None:
    for c in HELD_OUT2:
        assert (c.pages is not None) == c.file.endswith(".pdf"), c
        assert all(p >= 1 for p in c.pages or ())


def test_the_tuning_conversations_stay_off_the_held_out_pages() -> None:
    from bench.conversation_set import TUNING2

    held_out = [c for c in CONVERSATIONS if c.held_out] + list(HELD_OUT2)
    held = {(c.file, p) for c in held_out for p in c.pages or ()}
    assert not held & {(c.file, p) for c in TUNING2 for p in c.pages or ()}
