"""engine/rag/pipeline/answer_stream.py: a pipeline request as the wire's answer events;
here, the "searched for" line of a question the earlier turn changed the results of."""

from __future__ import annotations

import numpy as np

from engine.rag.answer.conversation import resolve
from engine.rag.answer.extractive import ExtractiveAnswer
from engine.rag.pipeline.answer_stream import answer_events
from engine.rag.pipeline.answering import GatedHits
from engine.rag.pipeline.requests import Finished, Piece, RequestHandle, Retrieved, new_question
from engine.rag.store.records import ChunkRecord, SearchHit
from engine.wire import Citation, CitationsEvent, SearchedEvent, Turn

LOCALE = Turn(
    question="How do I change the locale on a Debian system?",
    answer="Run dpkg-reconfigure locales [1].",
    citations=[
        Citation(
            index=1, chunk_id="c1", path="/d/debian-reference.pdf", page=158, text="passage",
            score=0.6, char_start=0, char_end=1,
        )
    ],
)  # fmt: skip


def _hit() -> SearchHit:
    chunk = ChunkRecord(
        chunk_id="c2", doc_id="d", path="/d/debian-reference.pdf", ordinal=0, page=157,
        char_start=0, char_end=10, text="UTF-8 is the modern preferred choice.",
        text_hash="h", section="8.1.1 Rationale for UTF-8 locale",
    )  # fmt: skip
    return SearchHit(chunk=chunk, similarity=0.6, fused=0.03)


def _events(question: str, *, changed: bool) -> list[object]:
    follow_up = resolve(question=question, history=(LOCALE,))
    assert follow_up is not None
    handle = RequestHandle(
        question=new_question(text=follow_up.query, k=3, conversation=follow_up), submitted=0.0
    )
    handle.resolved(question=handle.question)  # as the pipeline tells it, before retrieval
    found = ExtractiveAnswer(text="UTF-8 [1].", used_indices=[1], found=True, score=0.8)
    gated = GatedHits(hits=(_hit(),), extract=found, history_changed=changed)
    handle.emit(Retrieved(hits=gated))
    handle.emit(Piece(text="UTF-8 [1]."))
    handle.emit(Finished(status="done"))
    return list(answer_events(handle=handle, cancel=None))


def test_a_question_whose_results_the_history_changed_says_what_was_searched() -> None:
    # "Why UTF-8?" names its subject: the detector judges it standalone, so nothing is
    # said before its search; the earlier question changed its results, so the line
    # comes with them, before the citations, as a follow-up's does.
    events = _events("Why UTF-8?", changed=True)
    searched = [e for e in events if isinstance(e, SearchedEvent)]
    assert len(searched) == 1
    assert searched[0].hedged
    assert (
        searched[0].shown() == "Why UTF-8?  (with: How do I change the locale on a Debian system?)"
    )
    first_citations = next(i for i, e in enumerate(events) if isinstance(e, CitationsEvent))
    assert events.index(searched[0]) < first_citations


def test_a_question_the_history_did_not_change_says_nothing() -> None:
    events = _events("Why UTF-8?", changed=False)
    assert not [e for e in events if isinstance(e, SearchedEvent)]


def test_a_follow_up_is_told_once_before_its_citations() -> None:
    # Its line comes from the pipeline's `Resolved`, before the search; none after it.
    events = _events("And how do I undo it?", changed=True)
    (searched,) = [e for e in events if isinstance(e, SearchedEvent)]
    assert searched.rewritten_by == "history" and not searched.hedged
    assert searched.context == LOCALE.question
    first_citations = next(i for i, e in enumerate(events) if isinstance(e, CitationsEvent))
    assert events.index(searched) < first_citations


def test_a_translated_question_says_what_it_was_searched_as_before_its_citations() -> None:
    import dataclasses

    asked = new_question(text="Wie wähle ich die Systemsprache?", k=3, translate_to="en")
    handle = RequestHandle(question=asked, submitted=0.0)
    translated = "How do I choose the system language?"
    # As the pipeline tells it at the translation's end, before retrieval.
    handle.resolved(question=dataclasses.replace(asked, translate_to=None, translated=translated))
    found = ExtractiveAnswer(text="UTF-8 [1].", used_indices=[1], found=True, score=0.8)
    handle.emit(Retrieved(hits=GatedHits(hits=(_hit(),), extract=found)))
    handle.emit(Finished(status="done"))
    events = list(answer_events(handle=handle, cancel=None))
    (searched,) = [e for e in events if isinstance(e, SearchedEvent)]
    assert searched.shown() == translated and searched.rewritten_by == "model"
    first_citations = next(i for i, e in enumerate(events) if isinstance(e, CitationsEvent))
    assert events.index(searched) < first_citations


def test_a_written_answer_that_cites_nothing_is_done_with_markers() -> None:
    """Done's text carries the [n], and so does the text streamed before it."""
    from engine.wire import DoneEvent, TokenEvent

    handle = RequestHandle(question=new_question(text="Why UTF-8?", k=3), submitted=0.0)
    handle.served_by = "a model"
    found = ExtractiveAnswer(text="UTF-8 [1].", used_indices=[1], found=True, score=0.8)
    handle.emit(Retrieved(hits=GatedHits(hits=(_hit(),), extract=found)))
    written = "UTF-8 is the modern and preferred choice today."
    handle.emit(Piece(text=written))
    handle.emit(Finished(status="done"))

    def embed(texts: list[str]) -> np.ndarray:  # the answer's sentence is the passage's
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    events = list(answer_events(handle=handle, cancel=None, embed=embed))
    (done,) = [e.done for e in events if isinstance(e, DoneEvent)]
    assert done.mode == "generative"
    assert done.answer == "UTF-8 is the modern and preferred choice today [1]."
    # The words stream as they come; the last one waits for its marker.
    streamed = [e.text for e in events if isinstance(e, TokenEvent)]
    assert streamed == ["UTF-8 is the modern and preferred choice", " today [1]."]


def test_a_marker_no_passage_bears_out_never_streams() -> None:
    """What an OpenAI client reads, streamed or whole, is the checked answer: a marker
    to a passage that is not there never reaches it (engine/service/api)."""
    from engine.service.api.openai_answer import AnswerAsked, collect, shaped
    from engine.wire import DoneEvent, TokenEvent

    handle = RequestHandle(question=new_question(text="Why UTF-8?", k=3), submitted=0.0)
    handle.served_by = "a model"
    found = ExtractiveAnswer(text="UTF-8 [1].", used_indices=[1], found=True, score=0.8)
    handle.emit(Retrieved(hits=GatedHits(hits=(_hit(),), extract=found)))
    written = "UTF-8 is the modern and preferred choice [4]. It is the default on Debian."
    for at in range(0, len(written), 5):
        handle.emit(Piece(text=written[at : at + 5]))
    handle.emit(Finished(status="done"))

    def embed(texts: list[str]) -> np.ndarray:  # every sentence is every other's
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    events = list(answer_events(handle=handle, cancel=None, embed=embed))
    tokens = [e.text for e in events if isinstance(e, TokenEvent)]
    (done,) = [e.done for e in events if isinstance(e, DoneEvent)]
    assert done.answer.startswith("UTF-8 is the modern and preferred choice [1].")
    # A word at a time, never the wrong marker: the first sentence's is checked first.
    assert len(tokens) > 2 and "".join(tokens) == done.answer
    assert not any("[4]" in t for t in tokens) and "[4]" not in done.answer

    def tokenizer(text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": list(range(len(text.split())))}

    asked = AnswerAsked(question="Why UTF-8?", history=[], sources_in_text=False)
    _, content, _ = collect(
        shaped(events=iter(events), asked=asked, tokenizer=tokenizer, extractive=False)
    )
    assert content == done.answer


def test_a_written_answer_is_read_on_the_embedder_s_scale() -> None:
    """A cosine of 0.85 restates a passage on MiniLM's scale; on an embedder that puts
    unrelated sentences at 0.8 (multilingual-e5) it does not, and earns no marker."""
    from engine.rag.answer.semantic_scale import SemanticScale
    from engine.wire import DoneEvent

    def done_for(scale: SemanticScale | None) -> str:
        handle = RequestHandle(question=new_question(text="Why UTF-8?", k=3), submitted=0.0)
        handle.served_by = "a model"
        found = ExtractiveAnswer(text="UTF-8 [1].", used_indices=[1], found=True, score=0.8)
        handle.emit(Retrieved(hits=GatedHits(hits=(_hit(),), extract=found)))
        handle.emit(Piece(text="UTF-8 is the modern and preferred choice today."))
        handle.emit(Finished(status="done"))

        def embed(texts: list[str]) -> np.ndarray:  # every pair of texts 0.85 apart
            out = np.zeros((len(texts), len(texts) + 1), dtype=np.float32)
            out[:, 0] = np.sqrt(0.85)
            out[np.arange(len(texts)), np.arange(len(texts)) + 1] = np.sqrt(0.15)
            return out

        extra = {} if scale is None else {"scale": scale}
        events = list(answer_events(handle=handle, cancel=None, embed=embed, **extra))
        (done,) = [e.done for e in events if isinstance(e, DoneEvent)]
        return done

    supported = done_for(None)
    assert supported.answer.endswith("[1].") and supported.quoted_from is None
    unsupported = done_for(SemanticScale(unrelated=0.8, translated=0.92))
    model_words, *quoted = unsupported.answer.split("\n\n")
    assert "[" not in model_words
    # An answer left with no marker is followed by what the documents say
    # (engine/rag/answer/written_answer.py), and the reader is told where they begin.
    assert quoted == ["UTF-8 [1]."]
    assert unsupported.answer[unsupported.quoted_from :] == "UTF-8 [1]."


def test_a_written_answer_the_length_limit_cut_says_so() -> None:
    from engine.rag.pipeline.answer_stream import CUT_NOTE
    from engine.wire import DoneEvent

    def done_of(tokens: int) -> object:
        handle = RequestHandle(
            question=new_question(text="Why UTF-8?", k=3, max_new_tokens=8), submitted=0.0
        )
        handle.served_by = "a model"
        found = ExtractiveAnswer(text="UTF-8 [1].", used_indices=[1], found=True, score=0.8)
        handle.emit(Retrieved(hits=GatedHits(hits=(_hit(),), extract=found)))
        handle.emit(Piece(text="UTF-8 is the modern and preferred", tokens=tokens))
        handle.emit(Finished(status="done"))
        (done,) = [
            e.done for e in answer_events(handle=handle, cancel=None) if isinstance(e, DoneEvent)
        ]
        return done

    cut = done_of(8)
    assert cut.finish_reason == "length" and cut.note == CUT_NOTE.format(tokens=8)
    whole = done_of(5)
    assert whole.finish_reason == "stop" and whole.note is None
