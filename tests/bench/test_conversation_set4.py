"""The fourth tuning set: follow-ups phrased many ways and topic switches, on new pages."""

from __future__ import annotations

from bench.conversation_set import CONVERSATIONS, HELD_OUT2, SWITCHES4, TUNING2, TUNING3, TUNING4


def test_the_set_is_big_enough_and_spread_over_the_corpus() -> None:
    assert len(TUNING4) >= 30
    assert len(SWITCHES4) >= 10
    assert len({c.file for c in TUNING4}) >= 5


def test_pages_are_given_for_pdfs_only() -> None:
    for c in (*TUNING4, *SWITCHES4):
        assert (c.pages is not None) == c.file.endswith(".pdf"), c
        assert all(p >= 1 for p in c.pages or ())


def test_no_page_of_another_set_is_reused() -> None:
    others = (*CONVERSATIONS, *HELD_OUT2, *TUNING2, *TUNING3)
    used = {(c.file, p) for c in others for p in c.pages or ()}
    mine = {(c.file, p) for c in (*TUNING4, *SWITCHES4) for p in c.pages or ()}
    # Counted, not listed: the held-out pages stay unread by whoever tunes on this set.
    assert not used & mine, f"{len(used & mine)} page(s) of the other sets reused"


def test_a_switch_asks_about_another_file_than_its_first_turn() -> None:
    subject = {c.first: c.file for c in TUNING4}
    for c in SWITCHES4:
        assert subject[c.first] != c.file, c
