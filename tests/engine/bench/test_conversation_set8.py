"""The fifth held-out set: written blind after held_out4, on new pages."""

from __future__ import annotations

from engine.bench.conversation import LATER_PARTS, PARTS, TUNING_PARTS
from engine.bench.conversation_set import CONVERSATIONS, TwoTurns
from engine.bench.conversation_set8 import HELD_OUT5
from engine.bench.real_docs import DOCS

# Every other set the bench asks, so that a set added later is checked against too.
OTHERS = (
    *CONVERSATIONS,
    *(c for name, part in LATER_PARTS.items() if name != "held_out5" for c in part),
)


def test_the_set_has_forty_conversations_spread_over_the_corpus() -> None:
    assert len(HELD_OUT5) == 40
    files = [c.file for c in HELD_OUT5]
    assert len(set(files)) >= 8
    assert max(files.count(f) for f in set(files)) <= 9


def test_every_file_is_in_the_corpus() -> None:
    corpus = {d.name for d in DOCS}
    assert {c.file for c in HELD_OUT5} <= corpus


def test_rows_are_well_formed_and_held_out() -> None:
    for c in HELD_OUT5:
        assert isinstance(c, TwoTurns)
        assert c.held_out
        assert c.first.strip() and c.follow_up.strip()
        assert c.first != c.follow_up
        # A follow-up leans on the first turn: short, as people type them.
        assert len(c.follow_up) <= 64, c.follow_up


def test_pages_are_given_for_pdfs_only() -> None:
    for c in HELD_OUT5:
        assert (c.pages is not None) == c.file.endswith(".pdf"), c.file
        assert c.pages is None or (c.pages and all(p >= 1 for p in c.pages))
        assert c.pages is None or len(set(c.pages)) == len(c.pages)


def test_no_page_of_another_set_is_reused() -> None:
    used = {(c.file, p) for c in OTHERS for p in c.pages or ()}
    mine = {(c.file, p) for c in HELD_OUT5 for p in c.pages or ()}
    # Counted, not listed: the other held-out sets' pages stay unread.
    assert not used & mine, f"{len(used & mine)} page(s) of the other sets reused"


def test_no_question_is_asked_twice() -> None:
    asked = {q.casefold() for c in OTHERS for q in (c.first, c.follow_up)}
    reused = [c for c in HELD_OUT5 if {c.first.casefold(), c.follow_up.casefold()} & asked]
    assert not reused, f"{len(reused)} question(s) of the other sets reused"
    follow_ups = [c.follow_up.casefold() for c in HELD_OUT5]
    assert len(set(follow_ups)) == len(follow_ups)


def test_it_is_a_held_out_part_of_the_bench() -> None:
    assert LATER_PARTS["held_out5"] == HELD_OUT5
    assert "held_out5" in PARTS
    assert "held_out5" not in TUNING_PARTS
