"""The third tuning set: the detector's tuning conversations and standalone questions."""

from __future__ import annotations

from bench.conversation_set import CONVERSATIONS, STANDALONE3, TUNING3


def test_the_set_is_big_enough_and_spread_over_the_corpus() -> None:
    assert len(TUNING3) >= 30
    assert len({c.file for c in TUNING3}) >= 8
    assert len(STANDALONE3) >= 15


def test_pages_are_given_for_pdfs_only() -> None:
    for c in TUNING3:
        assert (c.pages is not None) == c.file.endswith(".pdf"), c
        assert all(p >= 1 for p in c.pages or ())


def test_the_set_stays_off_the_held_out_pages() -> None:
    from bench.conversation_set import HELD_OUT2

    held_out = [c for c in CONVERSATIONS if c.held_out] + list(HELD_OUT2)
    held = {(c.file, p) for c in held_out for p in c.pages or ()}
    mine = {(c.file, p) for c in TUNING3 for p in c.pages or ()}
    # Counted, not listed: the held-out pages stay unread by whoever tunes on this set.
    assert not held & mine, f"{len(held & mine)} tuning page(s) are held-out pages"
