"""A follow-up's rewrite as a stage of the pipeline (engine/rag/pipeline/follow_up.py,
workers.py): submitted with `rewrite`, the question is a generation row beside the
answers waiting, and what the model writes becomes its search query before its
retrieval; the caller only reads events. A rewrite that fails, or a batch that
raises, leaves the history-aware query; a cancel ends it there."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from engine.rag.answer.conversation import FollowUp, resolve
from engine.rag.pipeline.policies import Scheduling
from engine.rag.pipeline.requests import Finished, Piece, Question, Resolved, Retrieved
from engine.rag.pipeline.stages import DONE, GenerationJob, RowFailed, Stages
from engine.rag.pipeline.workers import Pipeline
from engine.wire import Turn

WAIT_S = 10.0
HISTORY = (Turn(question="How do I configure exim for IMAP?", answer="Use maildir."),)
REWRITE = "configure exim for POP3 delivery"


def follow_up() -> FollowUp:
    follow = resolve(question="does it work over POP3?", history=HISTORY)
    assert follow is not None and follow.dependent
    return follow


class Fakes:
    """Retrieval gives "hits(query)"; generation writes the model's rewrite for a
    rewrite row (`rewrite`: its text, or a RowFailed) and "answer(hits)" for the others,
    noting each batch's rows."""

    def __init__(self, *, rewrite: str | RowFailed = REWRITE + "\nmore words") -> None:
        self.rewrite = rewrite
        self.raises = False
        self.searched: list[list[str]] = []
        self.batches: list[list[str]] = []  # "rewrite:<id>" or "answer:<id>" per row

    def retrieve(self, questions: Sequence[Question]) -> list[str]:
        self.searched.append([q.text for q in questions])
        return [f"hits({q.text})" for q in questions]

    def generate(self, jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, object]]:
        self.batches.append(
            [f"{'rewrite' if j.question.rewrite else 'answer'}:{j.request_id}" for j in jobs]
        )
        if self.raises:
            raise RuntimeError("the model fell over")
        for j in jobs:
            if j.question.rewrite:
                assert j.hits is None  # a rewrite reads no passages
                if isinstance(self.rewrite, RowFailed):
                    yield j.request_id, self.rewrite
                    continue
                yield j.request_id, Piece(text=self.rewrite, tokens=4)
            else:
                yield j.request_id, Piece(text=f"answer({j.hits})", tokens=2)
            yield j.request_id, DONE


def pipeline(fakes: Fakes, *, start: bool) -> Pipeline[str, str]:
    return Pipeline(stages=Stages(retrieve=fakes.retrieve, generate=fakes.generate), start=start)


def test_a_follow_up_is_rewritten_in_the_batch_of_the_answers_waiting() -> None:
    fakes = Fakes()
    pipe = pipeline(fakes, start=True)
    try:
        with pipe.generation.paused():  # the answers wait for generation meanwhile
            others = [pipe.submit(question=q, request_id=q) for q in ("first", "second")]
            for h in others:
                assert isinstance(next(h.events(timeout=WAIT_S)), Retrieved)
            follow = pipe.submit(
                question=follow_up().query,
                request_id="follow",
                conversation=follow_up(),
                rewrite=True,
            )
            assert pipe.generation.status().queue_length == 3
            assert pipe.retrieval.status().queue_length == 0  # not searched before it
        events = list(follow.events(timeout=WAIT_S))
        for h in others:
            assert h.text(timeout=WAIT_S) == f"answer(hits({h.request_id}))"
    finally:
        pipe.close()
    # One generation batch held the rewrite beside the answers; then the follow-up's
    # search was the model's first line, and its answer came from that search.
    assert sorted(fakes.batches[0]) == ["answer:first", "answer:second", "rewrite:follow"]
    assert [REWRITE] in fakes.searched
    assert [type(e) for e in events] == [Resolved, Retrieved, Piece, Finished]
    resolved, retrieved, piece, finished = events
    assert isinstance(resolved, Resolved) and resolved.conversation.rewritten_by == "model"
    assert resolved.conversation.query == REWRITE
    assert isinstance(retrieved, Retrieved) and retrieved.hits == f"hits({REWRITE})"
    assert isinstance(piece, Piece) and piece.text == f"answer(hits({REWRITE}))"
    assert isinstance(finished, Finished) and finished.status == "done"
    # The rewrite's text is nobody's answer: the request counts its answer's tokens,
    # and the pipeline one request per question.
    assert follow.tokens == 2
    assert pipe.status().submitted == 3 and pipe.status().finished == 3


def test_a_follow_up_without_a_rewrite_says_how_it_is_searched_first() -> None:
    fakes = Fakes()
    pipe = pipeline(fakes, start=False)
    handle = pipe.submit(question=follow_up().query, conversation=follow_up())
    assert pipe.retrieval.run_once() and pipe.generation.run_once()
    events = list(handle.events(timeout=WAIT_S))
    assert [type(e) for e in events] == [Resolved, Retrieved, Piece, Finished]
    resolved = events[0]
    assert isinstance(resolved, Resolved) and resolved.conversation.rewritten_by == "history"
    assert fakes.batches == [[f"answer:{handle.request_id}"]]


def _rewrite_then_answer(fakes: Fakes) -> tuple[list[object], Fakes]:
    pipe = pipeline(fakes, start=False)
    handle = pipe.submit(question=follow_up().query, conversation=follow_up(), rewrite=True)
    assert not pipe.retrieval.run_once()  # nothing to search before the rewrite
    assert pipe.generation.run_once()
    fakes.raises = False
    assert pipe.retrieval.run_once() and pipe.generation.run_once()
    return list(handle.events(timeout=WAIT_S)), fakes


def test_a_failed_rewrite_searches_history_aware() -> None:
    events, fakes = _rewrite_then_answer(Fakes(rewrite=RowFailed(message="server said no")))
    resolved = events[0]
    assert isinstance(resolved, Resolved) and resolved.conversation == follow_up()
    assert fakes.searched == [[follow_up().query]]
    assert isinstance(events[-1], Finished) and events[-1].status == "done"


def test_a_rewrite_that_says_nothing_searches_history_aware() -> None:
    events, fakes = _rewrite_then_answer(Fakes(rewrite="   "))
    assert fakes.searched == [[follow_up().query]]
    assert isinstance(events[-1], Finished) and events[-1].status == "done"


def test_a_batch_that_raises_fails_its_answers_and_not_the_rewrite() -> None:
    fakes = Fakes()
    fakes.raises = True
    pipe = pipeline(fakes, start=False)
    other = pipe.submit(question="other")
    assert pipe.retrieval.run_once()
    follow = pipe.submit(question=follow_up().query, conversation=follow_up(), rewrite=True)
    assert pipe.generation.run_once()  # one batch: the answer and the rewrite; it raises
    assert other.wait(timeout=WAIT_S) and other.outcome is not None
    assert other.outcome.status == "error" and "fell over" in other.outcome.error
    assert not follow.done  # it went on to its search, history-aware
    fakes.raises = False
    assert pipe.retrieval.run_once() and pipe.generation.run_once()
    assert follow.text(timeout=WAIT_S) == f"answer(hits({follow_up().query}))"
    assert pipe.status().generation.batches == 2


def test_a_cancel_during_the_rewrite_ends_the_request_there() -> None:
    fakes = Fakes()
    pipe = pipeline(fakes, start=False)
    cancel = threading.Event()
    handle = pipe.submit(
        question=follow_up().query, conversation=follow_up(), rewrite=True, cancel=cancel
    )
    cancel.set()
    assert not pipe.generation.run_once()  # it left the queue
    events = list(handle.events(timeout=WAIT_S))
    assert [type(e) for e in events] == [Finished]
    assert handle.outcome is not None and handle.outcome.status == "cancelled"
    assert fakes.searched == [] and pipe.idle()


def test_a_rewrite_waiting_at_a_model_change_is_done_by_the_new_pipelines() -> None:
    old_fakes, new_fakes = Fakes(rewrite="old model's query"), Fakes()
    old, new = pipeline(old_fakes, start=False), pipeline(new_fakes, start=False)
    handle = old.submit(question=follow_up().query, conversation=follow_up(), rewrite=True)
    old.hold()
    assert old.hand_over(to=new) == 1
    assert new.generation.run_once()  # the new model rewrites it
    assert new.retrieval.run_once() and new.generation.run_once()
    assert handle.text(timeout=WAIT_S) == f"answer(hits({REWRITE}))"
    assert old_fakes.batches == [] and new_fakes.searched == [[REWRITE]]


def test_a_background_follow_ups_rewrite_goes_ahead_of_background_answers() -> None:
    """The rewrite is scheduled as interactive work (Scheduling.rewrite_priority), as
    when it was a request of its own: its answer cannot start its search before it."""
    fakes = Fakes()
    pipe = Pipeline(
        stages=Stages(retrieve=fakes.retrieve, generate=fakes.generate),
        scheduling=Scheduling(generation_cap=1),
        start=False,
    )
    pipe.submit(question="waiting", request_id="waiting", priority="background")
    assert pipe.retrieval.run_once()
    pipe.submit(
        question=follow_up().query,
        request_id="follow",
        priority="background",
        conversation=follow_up(),
        rewrite=True,
    )
    assert pipe.generation.run_once()
    assert fakes.batches == [["rewrite:follow"]]
