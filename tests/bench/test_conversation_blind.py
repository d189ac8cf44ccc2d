"""The blind multilingual conversation set and the bench's rule switches."""

from __future__ import annotations

from collections import Counter

from bench.blind_docs import BLIND_DOCS
from bench.conversation_blind import RULES, _scores, load_set, switched_off
from engine.rag.answer import conversation_dependence


def test_set_has_ten_of_each_kind_in_four_languages() -> None:
    turns = load_set()
    counts = Counter((t.language, t.kind) for t in turns)
    for language in ("de", "fr", "es", "en"):
        assert counts[(language, "follow_up")] >= 10
        assert counts[(language, "standalone")] >= 10
    assert len({t.id for t in turns}) == len(turns)


def test_rows_name_corpus_files_and_pages_only_where_the_file_has_them() -> None:
    names = {d.name for d in BLIND_DOCS}
    for t in load_set():
        assert t.file in names and set(t.also) <= names
        paged = t.file.endswith((".pdf", ".epub"))
        assert (t.pages is not None) == paged, t.id
        assert t.pages is None or all(p >= 1 for p in t.pages)
        assert t.first.strip() and t.second.strip() and t.answer.strip()
        assert t.first != t.second


def test_a_rule_is_switched_off_for_the_block_only() -> None:
    from engine.rag.answer import conversation

    assert conversation_dependence.looks_dependent("And where did it take place?")
    with switched_off("detector"):
        assert not conversation.looks_dependent("And where did it take place?")
    with switched_off("pronouns"):
        assert not conversation_dependence._PRONOUNS
        assert not conversation_dependence.looks_dependent("And where did it take place?")
    assert conversation_dependence._PRONOUNS
    assert conversation.looks_dependent("And where did it take place?")
    with switched_off(None):
        assert conversation_dependence.looks_dependent("And where did it take place?")
    assert set(RULES) >= {"detector", "pronouns", "hedge (lean)"}


def test_scores_count_per_language_and_kind() -> None:
    rows = [
        {"language": "de", "kind": "follow_up", "rank": 1, "rank_alone": None,
         "refused": False, "dependent": True, "leaned": 0.0},
        {"language": "de", "kind": "follow_up", "rank": 4, "rank_alone": 2,
         "refused": True, "dependent": False, "leaned": 0.5},
        {"language": "fr", "kind": "standalone", "rank": 2, "rank_alone": 2,
         "refused": False, "dependent": True, "leaned": 0.0},
    ]  # fmt: skip
    s = _scores(rows)
    assert s["de/follow_up"] == {
        "n": 2, "first": 1, "top3": 1, "top3_alone": 1, "refused": 1,
        "right_verdict": 1, "leaned": 1,
    }  # fmt: skip
    assert s["fr/standalone"]["right_verdict"] == 0
    assert s["all/follow_up"]["n"] == 2 and "de/standalone" not in s
