"""`ragdoll bench conversation`'s scoring and report: parts apart, held-out rows unprinted."""

from __future__ import annotations

from typing import Any

from bench import conversation


def _row(part: str, *, found: bool, question: str) -> dict[str, Any]:
    return {
        "file": "f.pdf",
        "pages": [1],
        "held_out": part not in conversation.TUNING_PARTS,
        "part": part,
        "first": "first?",
        "follow_up": question,
        "searched": "s",
        "found": found,
        "found_alone": False,
        "top": ["f.pdf p.2"],
    }


def test_the_report_lists_only_the_tuned_part_s_misses() -> None:
    rows = [
        _row("tuned", found=False, question="tuned miss?"),
        _row("held_out", found=False, question="held miss?"),
        _row("held_out2", found=False, question="other miss?"),
        _row("held_out2", found=True, question="other hit?"),
    ]
    figures: dict[str, Any] = {
        "top": 3,
        "machine": {"load_average": [0.0, 0.0, 0.0]},
        "rows": rows,
        "tuned": conversation._score(rows[:1]),
        "held_out": conversation._score(rows[1:2]),
        "held_out2": conversation._score(rows[2:]),
        "tuned2": conversation._score([]),
        "all": conversation._score(rows[:2]),
        "with_pages": conversation._score(rows[:2]),
        "all_parts": conversation._score(rows),
        "standalone": {"firsts": _empty(), "quality": _empty()},
    }
    text = conversation._report(figures)
    assert "tuned miss?" in text
    assert "held miss?" not in text and "other miss?" not in text
    assert "second held-out set: 1/2 (50%)" in text
    assert "all follow-up parts asked: 1/4 (25%)" in text
    assert "third tuning set" not in text  # a part not asked is not reported


def test_the_fourth_set_s_misses_and_switches_are_listed_and_counted_apart() -> None:
    rows = [
        _row("tuned4", found=False, question="fourth miss?"),
        _row("switch4", found=False, question="switch miss?"),
        _row("switch4", found=True, question="switch hit?"),
    ]
    assert not any(r["held_out"] for r in rows)
    figures: dict[str, Any] = {
        "top": 3,
        "machine": {"load_average": [0.0, 0.0, 0.0]},
        "rows": rows,
        "tuned4": conversation._score(rows[:1]),
        "switch4": conversation._score(rows[1:]),
        "all": conversation._score([]),
        "with_pages": conversation._score([]),
        "all_parts": conversation._score(rows[:1]),
        "standalone": {"firsts": _empty(), "quality": _empty()},
    }
    text = conversation._report(figures)
    assert "fourth miss?" in text and "switch miss?" in text
    assert "fourth tuning set's topic switches: 1/2 (50%)" in text


def test_the_hand_written_rewrites_are_counted_where_a_row_has_one() -> None:
    rows = [
        {**_row("tuned", found=False, question="a?"), "found_rewritten": True},
        {**_row("tuned", found=True, question="b?"), "found_rewritten": False},
        {**_row("tuned", found=True, question="c?"), "found_rewritten": None},
    ]
    score = conversation._score(rows)
    assert (score["rewritten"], score["found_rewritten"]) == (2, 1)
    figures = _tuned_only(rows=rows, score=score)
    lines = conversation._report(figures).splitlines()
    assert "written out in full by hand and asked alone 1/2" in lines[1]
    # A part without rewrites says nothing of them.
    empty = conversation._report({**figures, "tuned": conversation._score(rows[2:])})
    assert "by hand" not in empty.splitlines()[1]


def test_the_other_bash_manual_is_counted_apart_and_said_only_when_it_adds() -> None:
    rows = [
        {**_row("tuned", found=False, question="a?"), "found_also": True},
        {**_row("tuned", found=False, question="b?"), "found_also": False},
    ]
    score = conversation._score(rows)
    assert (score["found"], score["found_also"]) == (0, 1)
    figures = _tuned_only(rows=rows, score=score)
    line = conversation._report(figures).splitlines()[1]
    assert "0/2 (0%) with the conversation" in line
    assert "1/2 counting the same answer in the other bash manual" in line
    plain = conversation._score([{**rows[1]}])
    assert (
        "other bash manual" not in conversation._report({**figures, "tuned": plain}).splitlines()[1]
    )


def _tuned_only(*, rows: list[dict[str, Any]], score: dict[str, Any]) -> dict[str, Any]:
    parts = ("tuned", "all", "with_pages", "all_parts")
    return {
        "top": 3,
        "machine": {"load_average": None},
        "rows": rows,
        **dict.fromkeys(parts, score),
        "standalone": {},
    }


def _empty() -> dict[str, Any]:
    zero = {"n": 0, "dependent": 0, "hit1": 0, "hit3": 0, "hit1_alone": 0, "hit3_alone": 0}
    return {"rows": [], "tuned": zero, "held_out": zero, "all": zero}


def test_the_report_names_the_reranker_the_run_used() -> None:
    rows = [_row("tuned", found=True, question="hit?")]
    figures: dict[str, Any] = {
        "top": 3,
        "machine": {"load_average": [0.0, 0.0, 0.0]},
        "rows": rows,
        "tuned": conversation._score(rows),
        "all": conversation._score(rows),
        "with_pages": conversation._score(rows),
        "all_parts": conversation._score(rows),
        "standalone": {"firsts": _empty(), "quality": _empty()},
    }
    assert "re-ordered" not in conversation._report(figures)
    figures["reranker"] = "/models/ms-marco-MiniLM-L-6-v2"
    assert "candidates re-ordered by ms-marco-MiniLM-L-6-v2" in conversation._report(figures)
