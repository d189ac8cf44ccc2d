"""What every held-out conversation set written blind must hold (sets 7 and 8): its
size and spread, well-formed rows, pages and questions no other set uses, and its
place in the bench as a held-out part. Each set's test runs these on its own part."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.conversation import LATER_PARTS, PARTS, TUNING_PARTS
from bench.conversation_set import CONVERSATIONS, TwoTurns
from bench.real_docs import DOCS

Check = Callable[..., None]


def _others(name: str) -> tuple[TwoTurns, ...]:
    """Every other set the bench asks, so that a set added later is checked against too."""
    later = (c for part, convs in LATER_PARTS.items() if part != name for c in convs)
    return (*CONVERSATIONS, *later)


def forty_spread_over_the_corpus(*, name: str, convs: Sequence[TwoTurns]) -> None:
    assert len(convs) == 40
    files = [c.file for c in convs]
    assert len(set(files)) >= 8
    assert max(files.count(f) for f in set(files)) <= 9
    assert set(files) <= {d.name for d in DOCS}


def rows_well_formed_and_held_out(*, name: str, convs: Sequence[TwoTurns]) -> None:
    for c in convs:
        assert isinstance(c, TwoTurns)
        assert c.held_out
        assert c.first.strip() and c.follow_up.strip()
        assert c.first != c.follow_up
        # A follow-up leans on the first turn: short, as people type them.
        assert len(c.follow_up) <= 64, c.follow_up
        assert (c.pages is not None) == c.file.endswith(".pdf"), c.file
        assert c.pages is None or (c.pages and all(p >= 1 for p in c.pages))
        assert c.pages is None or len(set(c.pages)) == len(c.pages)


def no_page_or_question_of_another_set(*, name: str, convs: Sequence[TwoTurns]) -> None:
    others = _others(name)
    used = {(c.file, p) for c in others for p in c.pages or ()}
    mine = {(c.file, p) for c in convs for p in c.pages or ()}
    # Counted, not listed: the other held-out sets' pages stay unread.
    assert not used & mine, f"{len(used & mine)} page(s) of the other sets reused"
    asked = {q.casefold() for c in others for q in (c.first, c.follow_up)}
    reused = [c for c in convs if {c.first.casefold(), c.follow_up.casefold()} & asked]
    assert not reused, f"{len(reused)} question(s) of the other sets reused"
    follow_ups = [c.follow_up.casefold() for c in convs]
    assert len(set(follow_ups)) == len(follow_ups)


def a_held_out_part_of_the_bench(*, name: str, convs: Sequence[TwoTurns]) -> None:
    assert LATER_PARTS[name] == tuple(convs)
    assert name in PARTS
    assert name not in TUNING_PARTS


CHECKS: tuple[Check, ...] = (
    forty_spread_over_the_corpus,
    rows_well_formed_and_held_out,
    no_page_or_question_of_another_set,
    a_held_out_part_of_the_bench,
)
