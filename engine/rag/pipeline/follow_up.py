"""A conversation's follow-up question, resolved before its retrieval.

History-aware resolution (engine/rag/answer/conversation.py) needs no model and is done
where the question is asked. With a model in use, the model also rewrites a follow-up
into a standalone search query: the pipeline's rewrite stage (workers.py), a short
generation row in the same batches as the answers, after which the question goes on to
its retrieval with the query `after_rewrite` makes of what the model wrote. A rewrite
that fails or says nothing leaves the history-aware query in place.
"""

from __future__ import annotations

import dataclasses
import logging

from engine.rag.answer.conversation import FollowUp, rewritten
from engine.rag.pipeline.requests import Question

log = logging.getLogger(__name__)


def needs_rewrite(*, follow_up: FollowUp | None, with_model: bool) -> bool:
    """Whether the pipeline's rewrite stage runs on this question: a follow-up that
    leans on the history, when a model is in use to rewrite it."""
    return with_model and follow_up is not None and follow_up.dependent


def after_translation(*, question: Question, text: str | None) -> Question:
    """The translation's end (engine/rag/answer/translation.py): `question` searched also
    as what the model wrote (`text`; None when it failed: as asked only)."""
    from engine.rag.answer.translation import searched_translation

    translated = searched_translation(question=question.text, text=text)
    if not translated:
        log.info("the translation of a question gave no search text: searching it as asked")
    return dataclasses.replace(question, translate_to=None, translated=translated)


def after_rewrite(*, question: Question, text: str | None) -> Question:
    """The rewrite stage's end: `question` as retrieval searches it, from what the model
    wrote (`text`; None when the rewrite failed). The first line is the query (a model
    may go on after it); none leaves the history-aware query."""
    follow_up = question.conversation
    if follow_up is None:
        raise ValueError("only a follow-up of a conversation is rewritten")
    if text is None:
        log.info("the rewrite of a follow-up failed: searching history-aware")
    lines = (text or "").strip().splitlines()
    resolved = rewritten(follow_up=follow_up, query=lines[0] if lines else "")
    return dataclasses.replace(question, text=resolved.query, conversation=resolved, rewrite=False)
