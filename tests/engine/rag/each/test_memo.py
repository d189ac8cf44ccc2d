from __future__ import annotations

from pathlib import Path

from engine.rag.each.memo import AnsweredHow, EachMemo
from engine.wire import Citation
from engine.wire_each import DocumentAnswer

HOW = AnsweredHow(
    question="Who wrote it?",
    k=3,
    whole_document=False,
    answerer="extractive",
    embedder="minilm",
    reranker="",
)


def _row(*, path: str = "/d/a.pdf", status: str = "answered", content_hash: str = "h1"):  # type: ignore[no-untyped-def]
    cite = Citation(
        index=1,
        chunk_id="c",
        path=path,
        page=2,
        text="By Ada.",
        score=0.5,
        char_start=0,
        char_end=7,
    )
    return DocumentAnswer(
        number=4,
        path=path,
        status=status,  # type: ignore[arg-type]
        answer="By Ada [1].",
        mode="extractive",
        citations=[cite],
        content_hash=content_hash,
    )


def test_a_kept_row_comes_back_for_the_same_content_only(tmp_path: Path) -> None:
    memo = EachMemo(file=tmp_path / "each.json")
    memo.put(how=HOW, row=_row())
    memo.flush()
    again = EachMemo(file=tmp_path / "each.json")  # read from disk
    assert again.get(how=HOW, path="/d/a.pdf", content_hash="h1") == _row()
    assert again.get(how=HOW, path="/d/a.pdf", content_hash="h2") is None  # the file changed
    assert again.get(how=HOW, path="/d/b.pdf", content_hash="h1") is None
    # Any other question, k, model or ranker is another answer.
    for other in (
        AnsweredHow(**{**HOW.__dict__, "question": "Who edited it?"}),
        AnsweredHow(**{**HOW.__dict__, "k": 5}),
        AnsweredHow(**{**HOW.__dict__, "answerer": "qwen"}),
        AnsweredHow(**{**HOW.__dict__, "whole_document": True}),
    ):
        assert again.get(how=other, path="/d/a.pdf", content_hash="h1") is None
    # Spacing is not a different question.
    spaced = AnsweredHow(**{**HOW.__dict__, "question": " Who  wrote it? "})
    assert again.get(how=spaced, path="/d/a.pdf", content_hash="h1") is not None


def test_failed_and_cancelled_rows_are_asked_again(tmp_path: Path) -> None:
    memo = EachMemo(file=tmp_path / "each.json")
    memo.put(how=HOW, row=_row(status="failed"))
    memo.put(how=HOW, row=_row(path="/d/c.pdf", status="cancelled"))
    memo.flush()
    assert not (tmp_path / "each.json").exists()
    assert memo.get(how=HOW, path="/d/a.pdf", content_hash="h1") is None


def test_a_damaged_file_is_set_aside_not_trusted(tmp_path: Path) -> None:
    (tmp_path / "each.json").write_text("{not json", encoding="utf-8")
    memo = EachMemo(file=tmp_path / "each.json")
    assert memo.get(how=HOW, path="/d/a.pdf", content_hash="h1") is None
    assert (tmp_path / "each.broken").exists()
    memo.put(how=HOW, row=_row())
    memo.flush()
    assert (
        EachMemo(file=tmp_path / "each.json").get(how=HOW, path="/d/a.pdf", content_hash="h1")
        is not None
    )
