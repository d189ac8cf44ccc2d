"""`ragdoll bench each`: the set is consistent and the scores count what they say."""

from __future__ import annotations

import json

from bench.each import SET_FILE, score
from engine.wire import Citation
from engine.wire_each import DocumentAnswer


def test_the_set_names_fifty_documents_and_every_question_only_those() -> None:
    spec = json.loads(SET_FILE.read_text(encoding="utf-8"))
    names = [d["name"] for d in spec["documents"]]
    assert len(names) == len(set(names)) == 50
    for q in spec["questions"]:
        stated, absent = set(q["states"]), set(q["not_stated"])
        assert stated and absent and not stated & absent
        assert stated | absent <= set(names)
        assert all(pages for pages in q["states"].values())


def _row(name: str, status: str, *pages: int | None, answer: str = "") -> DocumentAnswer:
    cites = [
        Citation(
            index=i + 1,
            chunk_id=str(i),
            path=f"/c/{name}",
            page=p,
            text="t",
            score=0.5,
            char_start=0,
            char_end=1,
        )
        for i, p in enumerate(pages)
    ]
    return DocumentAnswer(
        number=1,
        path=f"/c/{name}",
        status=status,
        citations=cites,
        answer=answer,  # type: ignore[arg-type]
    )


def test_right_page_first_or_anywhere_and_refusals() -> None:
    spec = {
        "states": {"a.pdf": [2], "b.pdf": [1], "t.txt": [None], "e.pdf": [7]},
        "not_stated": ["c.pdf", "d.pdf"],
    }
    rows = [
        _row("a.pdf", "answered", 2, 5),
        _row("b.pdf", "answered", 4, 1),  # the page, but not first
        _row("t.txt", "answered", None),  # a file without pages
        # The answer cites its second passage: that page is the one it points to.
        _row("e.pdf", "answered", 3, 7, answer="Under the MIT licence [2]."),
        _row("c.pdf", "not_stated"),
        _row("d.pdf", "answered", 3),  # answered what it never states
    ]
    got = score(rows=rows, spec=spec)
    assert got["right_page_first"] == 0.75
    assert got["right_page_any"] == 1.0
    assert got["not_stated_right"] == 0.5
    assert {m["document"] for m in got["misses"]} == {"b.pdf", "d.pdf"}
