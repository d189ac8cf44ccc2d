"""The blind multilingual corpus and its set: every file a question names is one the
fetcher takes, and the second blind part (blind2) is a held-out part of its own, in
languages the first part does not ask in, that `--split` asks alone."""

from __future__ import annotations

from collections import Counter

from bench import quality
from bench.blind_docs import BLIND_DOCS
from bench.quality import BLIND_SET_FILE, load_set


def _blind_set() -> list[quality.QualityQuestion]:
    return load_set(file=BLIND_SET_FILE)


def test_every_file_a_question_names_is_fetched() -> None:
    fetched = {d.name for d in BLIND_DOCS}
    named = {
        file for q in _blind_set() for file, _ in ((q.file, q.pages), *q.also) if file is not None
    }
    assert named <= fetched
    assert len(fetched) == len(BLIND_DOCS)  # one name per document


def test_the_second_part_asks_new_languages_with_enough_questions_in_each() -> None:
    questions = _blind_set()
    first = {q.language for q in questions if q.split == "blind"}
    second = [q for q in questions if q.split == "blind2"]
    languages = {q.language for q in second}
    assert len(languages) >= 2 and not languages & first
    for language in languages:
        part = [q for q in second if q.language == language]
        assert sum(q.answerable for q in part) >= 15, language
        assert sum(not q.answerable for q in part) >= 3, language
        assert all(q.id.startswith(language) for q in part)
    assert {q.split for q in questions} == {"blind", "blind2"}
    ids = Counter(q.id for q in questions)
    assert max(ids.values()) == 1
    texts = Counter(q.question.casefold() for q in questions)
    assert max(texts.values()) == 1


def test_the_second_part_is_held_out_and_its_rows_well_formed() -> None:
    for q in _blind_set():
        assert q.held_out
        if not q.answerable:
            assert (q.pages, q.also, q.answer) == ((), (), ""), q.id
            continue
        assert q.answer.strip(), q.id
        # Pages for PDF and EPUB (chapters), none for HTML.
        assert bool(q.pages) == (not q.file.endswith(".html")), q.id


def test_split_asks_one_part_of_the_blind_set_alone() -> None:
    questions = _blind_set()
    second = quality.select(questions, quick=False, split="blind2")
    assert second and {q.split for q in second} == {"blind2"}
    assert quality.select(questions, quick=False, split="all") == questions
