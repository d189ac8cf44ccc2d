from __future__ import annotations

from app.batch.results_model import BatchResultsModel, sources_cell
from app.batch.runner import BatchResult
from engine.wire import Citation


def _c(index: int, path: str, page: int | None) -> Citation:
    return Citation(
        index=index,
        chunk_id=f"c{index}",
        path=path,
        page=page,
        text="t",
        score=1.0,
        char_start=0,
        char_end=1,
    )


def test_sources_cell_is_one_line_per_file_with_its_pages() -> None:
    result = BatchResult(
        number=1,
        question="q",
        status="answered",
        citations=(
            _c(3, "/d/guide.pdf", 5),
            _c(1, "/d/guide.pdf", 1),
            _c(2, "/d/notes.md", None),
            _c(4, "/d/guide.pdf", 5),
            _c(5, "/d/deck.pptx", 2),
        ),
    )
    assert sources_cell(result=result) == ("guide.pdf — pages 1, 5\nnotes.md\ndeck.pptx — slide 2")


def test_rows_wait_then_fill_and_unanswered_ones_say_so() -> None:
    model = BatchResultsModel()
    model.set_questions(["a?", "b?", "c?"])
    assert model.index(0, 2).data() == "Answering…"
    model.set_result(
        BatchResult(number=2, question="b?", status="failed", error="the engine refused it")
    )
    assert model.index(1, 2).data() == "Failed: the engine refused it"
    answered = BatchResult(number=1, question="a?", status="answered", answer="A.")
    model.finish([answered])
    assert [model.index(r, 2).data() for r in range(3)] == [
        "A.",
        "Failed: the engine refused it",
        "Not answered",
    ]
    assert [r.status for r in model.results()] == ["answered", "failed", "cancelled"]
