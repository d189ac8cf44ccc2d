"""A conversation's follow-up question, resolved before its retrieval.

History-aware resolution (engine/rag/answer/conversation.py) needs no model. With a model
in use, the model also rewrites a follow-up into a standalone search query: a short
generation submitted to the same pipeline as the answers (so it is batched with them
and scheduled, as the interactive request it is, ahead of background work), read
here before the question itself is submitted. A rewrite that fails or says nothing
leaves the history-aware query in place.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from engine.rag.answer.conversation import FollowUp, resolve, rewritten
from engine.rag.answer.conversation_dependence import specific_in_collection
from engine.rag.pipeline.requests import Finished, Piece
from engine.rag.pipeline.workers import Pipeline
from engine.wire_events import Turn

if TYPE_CHECKING:
    from engine.rag.store.lance_store import LanceStore

log = logging.getLogger(__name__)

REWRITE_TOKENS = 48  # a search query is a line
_POLL_S = 0.05


def specific_words(store: LanceStore) -> Callable[[str], bool]:
    """Whether a word is rare enough in the store's chunks to name a subject: how a
    conversation's question naming few words is told from a follow-up. Each word is
    one capped full-text count, asked only for such questions, once per question."""
    return specific_in_collection(
        holding=lambda word, cap: store.chunks_holding(word, cap=cap),
        chunks=lambda: store.counts()[1],
    )


def resolve_follow_up(
    *,
    pipeline: Pipeline,
    question: str,
    history: Sequence[Turn],
    with_model: bool,
    cancel: threading.Event | None = None,
    specific: Callable[[str], bool] | None = None,
) -> FollowUp | None:
    """How to search for `question` asked after `history` (None: no earlier turn).
    `specific(word)`: whether the collection holds a word rarely enough for it to
    name a subject (engine/rag/answer/conversation_dependence.py)."""
    follow_up = resolve(question=question, history=tuple(history), specific=specific)
    if follow_up is None or not follow_up.dependent or not with_model:
        return follow_up
    handle = pipeline.submit(
        question=follow_up.query,
        priority="interactive",
        k=1,
        max_new_tokens=REWRITE_TOKENS,
        conversation=follow_up,
        rewrite=True,
        cancel=cancel,
    )
    pieces: list[str] = []
    outcome: Finished | None = None
    try:
        while outcome is None:
            if cancel is not None and cancel.is_set():
                handle.cancel()
            event = handle.next_event(timeout=_POLL_S)
            if isinstance(event, Piece):
                pieces.append(event.text)
            elif isinstance(event, Finished):
                outcome = event
    finally:
        if outcome is None:
            handle.cancel()
    if outcome.status != "done":
        log.info("the rewrite of a follow-up ended %s: searching history-aware", outcome.status)
        return follow_up
    # The first line: a model may go on after the query.
    text = "".join(pieces).strip().splitlines()
    return rewritten(follow_up=follow_up, query=text[0] if text else "")
