from __future__ import annotations

from engine.rag.each.whole import PER_PASSAGE_TOKENS, PROMPT_OVERHEAD_TOKENS, whole_fit
from engine.rag.store.records import DocumentRecord

DOC = DocumentRecord(
    doc_id="d",
    path="/d/a.pdf",
    size=1,
    mtime=1.0,
    content_hash="h",
    status="indexed",
    error=None,
    pages=2,
    chunks=3,
)


def words(text: str) -> int:
    return len(text.split())


def test_a_document_that_fits_gives_all_its_passages() -> None:
    texts = ["one two three", "four five", "six"]
    need = 6 + 3 * PER_PASSAGE_TOKENS + PROMPT_OVERHEAD_TOKENS + 100
    fit = whole_fit(
        doc=DOC, texts=texts, count_tokens=words, context_tokens=need, answer_tokens=100
    )
    assert fit.k == 3 and fit.refusal == ""


def test_one_that_does_not_is_refused_with_by_how_much() -> None:
    texts = ["word " * 3000]
    fit = whole_fit(
        doc=DOC, texts=texts, count_tokens=words, context_tokens=2048, answer_tokens=256
    )
    assert fit.k == 0
    assert "does not fit the model's context" in fit.refusal and "3,008 tokens" in fit.refusal
    assert "of 2,048" in fit.refusal
    empty = whole_fit(doc=DOC, texts=[], count_tokens=words, context_tokens=2048, answer_tokens=1)
    assert empty.k == 0 and "no text" in empty.refusal
