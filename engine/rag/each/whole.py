"""Whole-document questions: the model is given every passage of a document instead
of its top few, where the document's text fits the model's context; where it does not,
that document's row says so (nothing is cut silently: the prompt builder would drop
the passages that do not fit, and the answer would then be about part of the file).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rag.store.records import DocumentRecord
from engine.rag.store.search import quote

# What the prompt takes besides the passages: the instructions, the question, the
# numbering of each source. Generous, so that a document said to fit is never cut.
PROMPT_OVERHEAD_TOKENS = 256
PER_PASSAGE_TOKENS = 8


@dataclass(frozen=True, kw_only=True)
class WholeFit:
    """How a document fits the model's context: `k` passages (all of them), or a refusal."""

    k: int
    refusal: str = ""


def whole_fit(
    *,
    doc: DocumentRecord,
    texts: Sequence[str],
    count_tokens: Callable[[str], int],
    context_tokens: int,
    answer_tokens: int,
) -> WholeFit:
    """Every passage of `doc` (their `texts`) if their tokens, the prompt's and the
    answer's fit `context_tokens`; else a refusal that says by how much it does not."""
    if not texts:
        return WholeFit(k=0, refusal="the document has no text to give the model")
    used = sum(count_tokens(t) + PER_PASSAGE_TOKENS for t in texts)
    # The answerer keeps at most half the context for the answer (engine/rag/answer/generative.py).
    answer_tokens = min(answer_tokens, context_tokens // 2)
    room = context_tokens - answer_tokens - PROMPT_OVERHEAD_TOKENS
    if used > room:
        return WholeFit(
            k=0,
            refusal=(
                f"the whole document does not fit the model's context: its text is about "
                f"{used:,} tokens and {room:,} are left for it (of {context_tokens:,}); "
                "ask from its passages instead"
            ),
        )
    return WholeFit(k=len(texts))


def chunk_texts(*, chunks: Any, doc_id: str) -> list[str]:
    """The texts of a document's chunks (the passages a whole-document question gives)."""
    found = chunks.search().where(f"doc_id = {quote(doc_id)}").select(["text"]).limit(None)
    return [str(t) for t in found.to_arrow().column("text").to_pylist()]


def fit_for(
    *, chunks: Any, tokenizer: Any, context_tokens: int, answer_tokens: int
) -> Callable[[DocumentRecord], WholeFit]:
    """`whole_fit` for each document, its chunks read from the store's `chunks` table and
    counted by the model's `tokenizer`."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def fit(doc: DocumentRecord) -> WholeFit:
        return whole_fit(
            doc=doc,
            texts=chunk_texts(chunks=chunks, doc_id=doc.doc_id),
            count_tokens=count,
            context_tokens=context_tokens,
            answer_tokens=answer_tokens,
        )

    return fit
