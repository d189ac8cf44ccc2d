"""The other bash manual's pages count only where they state the follow-up's answer."""

from __future__ import annotations

import json
from pathlib import Path

from bench.conversation import LATER_PARTS
from bench.conversation_also import ALSO_FILE, Place, found_also, load_also
from bench.conversation_set import CONVERSATIONS

TWINS = {"bashref.pdf": "bash-manpage.pdf", "bash-manpage.pdf": "bashref.pdf"}


def _row(*, found: bool, top: list[str]) -> dict[str, object]:
    return {"first": "q1?", "follow_up": "q2?", "found": found, "top": top}


def test_a_top_page_of_the_other_manual_counts_only_when_listed() -> None:
    also = {("q1?", "q2?"): (Place(file="bashref.pdf", pages=(52, 53)),)}
    assert found_also(row=_row(found=False, top=["x.pdf p.1", "bashref.pdf p.53"]), also=also)
    assert not found_also(row=_row(found=False, top=["bashref.pdf p.54"]), also=also)
    assert not found_also(row=_row(found=False, top=["bash-manpage.pdf p.52"]), also=also)
    assert not found_also(row=_row(found=False, top=["bashref.pdf p.53"]), also={})
    assert found_also(row=_row(found=True, top=[]), also={})  # found stays found


def test_the_file_loads_places_and_none_for_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "also.json"
    rows = [
        {"first": "a?", "follow_up": "b?", "other": "bashref.pdf", "other_pages": [7]},
        {"first": "c?", "follow_up": "d?", "other": "bashref.pdf", "other_pages": []},
    ]
    path.write_text(json.dumps(rows), encoding="utf-8")
    also = load_also(path)
    assert also[("a?", "b?")] == (Place(file="bashref.pdf", pages=(7,)),)
    assert also[("c?", "d?")] == ()


def test_every_conversation_about_a_bash_manual_is_checked_and_no_other() -> None:
    convs = [*CONVERSATIONS, *(c for part in LATER_PARTS.values() for c in part)]
    bash = {(c.first, c.follow_up): c.file for c in convs if c.file in TWINS}
    rows = json.loads(ALSO_FILE.read_text(encoding="utf-8"))
    assert {(r["first"], r["follow_up"]) for r in rows} == set(bash)
    for r in rows:
        assert r["other"] == TWINS[bash[(r["first"], r["follow_up"])]]
        assert all(isinstance(p, int) and p > 0 for p in r["other_pages"])
        assert bool(r["other_pages"]) == bool(r["phrase"].strip())
