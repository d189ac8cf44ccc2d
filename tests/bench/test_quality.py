"""`ragdoll bench quality`: the question set is sound, and the quick form runs on real
documents through the product's path (skipped when they have not been fetched)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench import quality
from bench.quality import QualityQuestion, contains, load_set, right_source, summarise
from bench.real_docs import DOCS, find_real_docs
from engine.rag.ingest.embedder import DEFAULT_EMBEDDER


def test_the_set_is_big_enough_split_and_spread_over_every_file() -> None:
    questions = load_set()
    answerable = [q for q in questions if q.answerable]
    unanswerable = [q for q in questions if not q.answerable]
    assert len(answerable) >= 90 and len(unanswerable) >= 20
    assert len({q.id for q in questions}) == len(questions)
    first = [q for q in questions if q.split in ("tune", "held")]
    held = sum(q.split == "held" for q in first) / len(first)
    assert 0.25 <= held <= 0.4
    per_file = Counter(q.file for q in answerable)
    assert set(per_file) == {d.name for d in DOCS}
    assert min(per_file.values()) >= 5
    for q in answerable:
        assert q.answer and q.question.endswith("?"), q.id
        paged = q.file.endswith(".pdf")
        assert bool(q.pages) == paged, q.id
    raw = json.loads(quality.SET_FILE.read_text(encoding="utf-8"))
    assert all(q["split"] in quality.SPLITS for q in raw["questions"])


def test_the_second_tuning_part_asks_about_pages_no_other_question_uses() -> None:
    questions = load_set()
    tune2 = [q for q in questions if q.split == "tune2"]
    assert sum(q.answerable for q in tune2) >= 40
    assert sum(not q.answerable for q in tune2) >= 10
    others = {
        (file, page)
        for q in questions
        if q.split != "tune2"
        for file, pages in ((q.file, q.pages), *q.also)
        for page in pages or (None,)
    }
    for q in tune2:
        if q.answerable:
            assert all((q.file, page) not in others for page in q.pages), q.id


@pytest.mark.parametrize(("split", "prefix"), [("held2", "h2"), ("held3", "h3")])
def test_each_later_held_back_part_is_spread_over_pages_no_other_question_uses(
    split: str, prefix: str
) -> None:
    questions = load_set()
    part = [q for q in questions if q.split == split]
    answerable = [q for q in part if q.answerable]
    unanswerable = [q for q in part if not q.answerable]
    assert [q.id for q in answerable] == [f"{prefix}a{i:02d}" for i in range(1, 41)]
    assert [q.id for q in unanswerable] == [f"{prefix}u{i:02d}" for i in range(1, 11)]
    per_file = Counter(q.file for q in answerable)
    assert len(per_file) >= 8 and max(per_file.values()) <= 7
    assert set(per_file) <= {d.name for d in DOCS}
    for q in answerable:
        # A short string stated on the page: an option, a path, a number, a phrase.
        assert q.answer.strip() and len(q.answer.split()) <= 8, q.id
        assert not q.also, q.id
    for q in unanswerable:
        assert (q.pages, q.also, q.answer) == ((), (), ""), q.id
    others = {
        (file, page)
        for q in questions
        if q.split != split
        for file, pages in ((q.file, q.pages), *q.also)
        for page in pages
    }
    mine = [(q.file, page) for q in answerable for page in q.pages]
    assert len(mine) == len(set(mine)), f"two {split} questions share a page"
    assert not set(mine) & others
    texts = [q.question for q in questions]
    assert len(texts) == len(set(texts))


def test_the_held_back_parts_are_held_out_and_the_tuning_parts_are_not() -> None:
    split_of = {q.split: q.held_out for q in load_set()}
    assert split_of == {
        "tune": False,
        "tune2": False,
        "held": True,
        "held2": True,
        "held3": True,
    }


@pytest.mark.parametrize("split", ["held2", "held3"])
def test_the_quick_form_asks_tune_and_held_or_the_named_split_alone(split: str) -> None:
    questions = load_set()
    quick_all = quality.select(questions, quick=True, split="all")
    assert {q.split for q in quick_all} == {"tune", "held"}  # what CI times
    quick_part = quality.select(questions, quick=True, split=split)
    assert {q.split for q in quick_part} == {split}
    assert all(q.file in quality.QUICK_FILES for q in quick_part if q.answerable)
    assert any(q.answerable for q in quick_part)
    assert sum(not q.answerable for q in quick_part) == quality.QUICK_UNANSWERABLE
    full = quality.select(questions, quick=False, split=split)
    assert len(full) == 50 and {q.split for q in full} == {split}


def _outcome(
    question: QualityQuestion,
    *,
    rank: int | None = None,
    refused: bool = False,
    contains: bool = False,
) -> quality.Outcome:
    return quality.Outcome(
        question=question,
        rank=rank,
        refused=refused,
        contains_answer=contains,
        key_contains=contains,
        answer_text="x" if contains else "",
        seconds=0.1,
        score=None,
    )


@pytest.mark.parametrize("split", ["held2", "held3"])
def test_the_report_has_a_line_for_each_later_held_back_part(split: str) -> None:
    question = QualityQuestion(
        id="h", question="?", split=split, file="a.pdf", pages=(1,), also=(), answer="x"
    )
    outcome = _outcome(question, rank=1, contains=True)
    figures = {split: summarise([outcome]), "all": summarise([outcome])}
    lines = quality.report({**figures, "load_average_1m": 0.0, "cpus": 2}).splitlines()
    assert any(line.startswith(f"{split}  1") for line in lines), lines


def test_a_right_source_is_the_file_and_one_of_its_pages_or_an_alternative() -> None:
    q = QualityQuestion(
        id="x",
        question="?",
        split="tune",
        file="a.pdf",
        pages=(3, 4),
        also=(("b.pdf", (9,)),),
        answer="x",
    )
    assert right_source(q, path="/docs/a.pdf", page=4)
    assert not right_source(q, path="/docs/a.pdf", page=5)
    assert right_source(q, path="/else/b.pdf", page=9)
    assert not right_source(q, path="/docs/c.pdf", page=3)


def test_the_answer_string_is_found_across_wrapped_lines_and_typographic_quotes() -> None:
    assert contains("the default\n  increment is 1 [2].", "default increment is 1")
    assert contains("‘%1’ is a synonym for ‘fg %1’", "'%1' is a synonym for 'fg %1'")
    assert contains("unix−word−rubout (C−w)", "unix-word-rubout")
    assert not contains("exit code 126", "125")


def test_the_summary_counts_hits_answers_and_refusals() -> None:
    def q(i: int, answerable: bool) -> QualityQuestion:
        return QualityQuestion(
            id=str(i),
            question="?",
            split="tune",
            file="a.pdf" if answerable else None,
            pages=(1,),
            also=(),
            answer="x",
        )

    outcomes = [
        _outcome(q(1, True), rank=1, contains=True),
        _outcome(q(2, True), rank=3),
        _outcome(q(3, True), refused=True),
        _outcome(q(4, False), refused=True),
        _outcome(q(5, False)),
    ]
    s = summarise(outcomes)
    assert (s["hit_at_1"], s["hit_at_3"], s["mrr"]) == (0.333, 0.667, 0.444)
    assert s["answer_contains"] == 0.333 and s["answerable_refused"] == 0.333
    assert s["refusal_recall"] == 0.5 and s["refusal_precision"] == 0.5


# The three text and HTML manuals of the quick slice: `make test` fetches the real
# documents where it can, and the quick slice's PDF and questions took over 5 minutes
# on a loaded 2-core machine (docs/benchmarks.md, "The real documents in CI").
TEST_FILES = ("git-bisect.txt", "apt-guide.txt", "git-rebase.html")


def test_the_quick_form_runs_on_the_real_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quality, "QUICK_FILES", TEST_FILES)
    if find_real_docs() is None:
        pytest.skip(
            "the real documents are not fetched: run `python -m bench.real_docs` "
            "(or set RAGDOLL_REAL_DOCS to where they are)"
        )
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    quality.add_arguments(parser)
    # The embedder named as `--embedder` is the one that indexes and answers.
    args = parser.parse_args(["--quick", "--json", "--embedder", DEFAULT_EMBEDDER])
    figures = quality.run(args)
    assert figures["embedder"] == DEFAULT_EMBEDDER
    assert figures["ingest"]["documents"] == len(quality.QUICK_FILES)
    for split in ("tune", "held"):
        f = figures[split]
        assert f["answerable"] > 0 and f["unanswerable"] == quality.QUICK_UNANSWERABLE
        # Small, easy files: retrieval that breaks shows here first.
        assert f["hit_at_3"] >= 0.6, figures
        assert f["answer_contains"] >= 0.3, figures


def test_the_model_ranker_is_loaded_as_the_engine_loads_a_model(
    tmp_path: Path, ragdoll_home: Path
) -> None:
    from engine.rag.answer.model_ranker import ModelRanker
    from engine.runtime.models.synthetic import write_random_model

    with pytest.raises(SystemExit, match="needs --model"):
        quality._ranker(reranker="model", answerer=None)
    assert quality._ranker(reranker=None, answerer=None) is None
    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=2)
    answerer = quality._answerer(model=str(folder))
    ranker = quality._ranker(reranker="model", answerer=answerer, sweep="5,0.5")
    assert isinstance(ranker, ModelRanker)
    assert (ranker.candidates, ranker.rank_weight) == (5, 0.5)
