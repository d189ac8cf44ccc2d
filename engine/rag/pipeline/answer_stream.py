"""One pipeline request as the answer stream the wire carries: a follow-up's search
once resolved, the citations once retrieved, the text as it is written, then done
(engine/wire_events.py's typed events).
The engine core's ask_stream yields these; nothing else turns requests into events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from engine.rag.answer.conversation import FollowUp
from engine.rag.answer.extractive import NO_MODEL_NOTE
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.answer.written_answer import Checking
from engine.rag.pipeline.answering import GatedHits, refusal_text, still_adding_note
from engine.rag.pipeline.requests import (
    Finished,
    Piece,
    RequestHandle,
    Resolved,
    Retrieved,
    Translated,
)
from engine.rag.store.records import SearchHit
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DoneEvent,
    IngestProgress,
    SearchedEvent,
    TokenEvent,
)

CANCEL_POLL_S = 0.05  # how often a waiting answer looks at its caller's cancel flag
# Said beside a written answer the length limit cut: its last sentence is unfinished
# (a list of steps at 256 tokens), which otherwise reads as the model's whole answer.
CUT_NOTE = "The answer stops at its length limit ({tokens} tokens): the model had not finished."


def answer_events(
    *,
    handle: RequestHandle,
    cancel: threading.Event | None,
    unfinished: Callable[[], Sequence[IngestProgress]] = list,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    scale: SemanticScale = IDENTITY,
    quoted_note: str = NO_MODEL_NOTE,
    refusal_note: str | None = None,
) -> Iterator[AnswerEvent]:
    """A pipeline request's events as ask_stream's: a follow-up's "searched for" once
    the pipeline resolved it (rewritten by the model, when one is in use), the
    citations once retrieved (none when nothing relevant was found), the text as it
    is written, then done.
    An answer quoted for want of a model says why (`quoted_note`: none chosen, the chosen
    one still loading or failed; engine/rag/answer/extractive.py `quoted_note`).
    A refusal notes the `unfinished()` ingestion jobs that still have files to read:
    "not found" then means "not found yet"; and `refusal_note`, when given (why the
    search could not read the question: engine/rag/ingest/embedder_offer.py). With
    `embed` (sentence vectors), done's text is the written answer made final
    (engine/rag/answer/written_answer.py: markers added, checked against their passages,
    a bare-marker answer replaced), its cosines read on `scale` (`embed`'s), and the text
    is shown a sentence at a time, each as checked, so what streams is done's text;
    without `embed`, as the model wrote it."""
    gated: GatedHits | None = None
    pieces: list[str] = []
    checking: Checking | None = None
    outcome: Finished | None = None
    try:
        while outcome is None:
            if cancel is not None and cancel.is_set():
                handle.cancel()
            event = handle.next_event(timeout=CANCEL_POLL_S)
            if isinstance(event, Resolved):
                searched = follow_up_search(event.conversation)
                if searched is not None:
                    yield searched
            elif isinstance(event, Translated):
                # Shown as a model's rewrite is: "searched for: …" the translation.
                yield SearchedEvent(query=event.text, rewritten_by="model")
            elif isinstance(event, Retrieved):
                gated = event.hits if isinstance(event.hits, GatedHits) else None
                found = gated is not None and gated.found
                hits = gated.hits if gated is not None and found else ()
                leaned = leaned_search(handle=handle, gated=gated)
                if leaned is not None:
                    yield leaned
                yield CitationsEvent(citations=[citation_for(i + 1, h) for i, h in enumerate(hits)])
            elif isinstance(event, Piece) and event.text:
                pieces.append(event.text)
                # A model's pieces only (a request handed over to a model after its
                # retrieval is served by it from here).
                if checking is None and embed is not None and handle.served_by is not None:
                    checking = checking_for(
                        gated=gated, embed=embed, scale=scale, question=asked_question(handle)
                    )
                shown = checking.feed(event.text) if checking is not None else event.text
                if shown:
                    yield TokenEvent(text=shown)
            elif isinstance(event, Finished):
                outcome = event
    finally:
        if outcome is None:  # the caller stopped reading: free its row in the batch
            handle.cancel()
    asked_to_stop = cancel is not None and cancel.is_set()
    model = handle.served_by  # after a model change, the pipelines that took it over
    if outcome.status == "error" or (outcome.status == "cancelled" and not asked_to_stop):
        raise RuntimeError(outcome.error or f"the answer was {outcome.status}")
    if gated is None:  # cancelled before its retrieval
        yield CitationsEvent(citations=[])
    if gated is None or not gated.found:
        answer = refusal_text(hits=gated.hits, unknown=gated.unknown) if gated is not None else ""
        notes = [n for n in (still_adding_note(unfinished=unfinished()), refusal_note) if n]
        done = AnswerDone(answer=answer, mode="none", note=" ".join(notes) or None)
    elif model is None:
        text = gated.extract.text if gated.extract is not None else "".join(pieces)
        done = AnswerDone(answer=text, mode="extractive", note=quoted_note)
    else:
        completion = handle.tokens
        text = "".join(pieces)
        note = None
        quoted_from = None
        if checking is None and embed is not None:  # the model wrote nothing
            checking = checking_for(
                gated=gated, embed=embed, scale=scale, question=asked_question(handle)
            )
        if checking is not None:
            tail, final = checking.finish()
            if tail:
                yield TokenEvent(text=tail)
            text, note, quoted_from = final.text, final.note, final.quoted_from
        limit = handle.question.max_new_tokens
        if completion >= limit and not asked_to_stop:
            note = " ".join(n for n in (note, CUT_NOTE.format(tokens=limit)) if n)
        done = AnswerDone(
            answer=text,
            mode="generative",
            note=note,
            model=model,
            prompt_tokens=handle.prompt_tokens or None,
            completion_tokens=completion,
            finish_reason="length" if completion >= limit else "stop",
            quoted_from=quoted_from,
        )
    yield DoneEvent(done=done)


def asked_question(handle: RequestHandle) -> str:
    """The question as the person asked it (a follow-up's search text is another)."""
    question = handle.question
    return question.conversation.question if question.conversation else question.text


def checking_for(
    *,
    gated: GatedHits | None,
    embed: Callable[[list[str]], np.ndarray],
    scale: SemanticScale,
    question: str = "",
) -> Checking | None:
    """The check of a model's answer to `question` (as asked) from the passages found
    (None when none was), the extractive answer its fallback
    (engine/rag/answer/written_answer.py)."""
    if gated is None or not gated.found:
        return None
    return Checking(
        passages=[h.chunk.text for h in gated.hits],
        embed=embed,
        fallback=gated.extract.text if gated.extract is not None else None,
        scale=scale,
        question=question,
    )


def follow_up_search(follow_up: FollowUp) -> SearchedEvent | None:
    """ "searched for: …" for a follow-up that leans on the history, before its
    search: the model's rewrite, or the history-aware query with the earlier
    question it was read with. None for a question judged standalone (`leaned_search`
    speaks for it once its search is known)."""
    if not follow_up.dependent:
        return None
    return SearchedEvent(
        query=follow_up.query,
        rewritten_by=follow_up.rewritten_by,
        context=follow_up.context if follow_up.rewritten_by == "history" else "",
    )


def leaned_search(*, handle: RequestHandle, gated: GatedHits | None) -> SearchedEvent | None:
    """ "searched for: …" for a question judged standalone whose results the earlier
    turn changed (engine/rag/answer/conversation.py `hedged`): what the history-aware
    search asked, as a follow-up's is shown (`follow_up_search`, told before the
    search; this one is known only after it)."""
    conversation = handle.question.conversation
    if gated is None or not gated.history_changed:
        return None
    also = getattr(conversation, "also", ())
    if not getattr(conversation, "hedged", False) or not also:
        return None
    return SearchedEvent(query=also[0].text, context=conversation.context, hedged=True)


def citation_for(index: int, hit: SearchHit) -> Citation:
    """A search hit as the wire's Citation; `index` is the n of its [n] marker."""
    c = hit.chunk
    return Citation(
        index=index,
        chunk_id=c.chunk_id,
        path=c.path,
        page=c.page,
        text=c.text,
        score=round(hit.similarity, 4),
        char_start=c.char_start,
        char_end=c.char_end,
        section=c.section,
    )
