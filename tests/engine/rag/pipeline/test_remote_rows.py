"""A generation batch on a model server: rows are concurrent streamed requests,
never more in flight than the answerer's concurrency; questions join as rows end;
a row the server fails ends alone with its message while the others finish."""

from __future__ import annotations

import threading
from collections import defaultdict

from engine.rag.answer.passages import Passage
from engine.rag.answer.remote import RemoteAnswerer
from engine.rag.answer.server_client import ServerEndpoint
from engine.rag.pipeline.adapters import generate_rows
from engine.rag.pipeline.requests import Piece, Question
from engine.rag.pipeline.stages import DONE, GenerationJob, RowFailed
from tests.support.model_server_stub import ANSWER, model_server_stub

PASSAGE = Passage(index=1, text="The honey is extracted in late August.", path="/b.md", page=None)


def _job(n: int) -> GenerationJob:
    question = Question(request_id=f"q{n}", text=f"When is the honey extracted? ({n})")
    return GenerationJob(request_id=f"q{n}", question=question, hits=None, cancel=threading.Event())


def _collect(stream: object) -> tuple[dict[str, str], dict[str, object]]:
    texts: dict[str, str] = defaultdict(str)
    ends: dict[str, object] = {}
    for request_id, item in stream:  # type: ignore[attr-defined]
        if isinstance(item, Piece):
            texts[request_id] += item.text
        else:
            ends[request_id] = item
    return texts, ends


def test_rows_run_concurrently_within_the_bound_and_joiners_are_served() -> None:
    with model_server_stub() as stub:
        stub.state.piece_delay_s = 0.02  # rows overlap long enough to count them
        answerer = RemoteAnswerer(
            endpoint=ServerEndpoint(url=stub.url, model="stub-model"), concurrency=3
        )
        later = [_job(n) for n in range(5, 9)]

        def incoming() -> list[GenerationJob]:
            taken = later[:1]
            del later[:1]
            return taken

        texts, ends = _collect(
            generate_rows(
                answerer=answerer,  # type: ignore[arg-type]
                jobs=[_job(n) for n in range(5)],
                passages=lambda job: [PASSAGE],
                incoming=incoming,
            )
        )
        assert stub.state.most_in_flight <= 3
        assert stub.state.most_in_flight >= 2
        assert len(stub.state.requests) == 9
    assert set(ends) == {f"q{n}" for n in range(9)}
    assert all(end is DONE for end in ends.values())
    assert all(text == ANSWER for text in texts.values())


def test_a_failed_row_ends_alone() -> None:
    with model_server_stub() as stub:
        good = RemoteAnswerer(endpoint=ServerEndpoint(url=stub.url, model="stub-model"))
        jobs = [_job(0), _job(1)]
        failing = {"q1"}

        def passages(job: GenerationJob) -> list[Passage]:
            if job.request_id in failing:
                raise RuntimeError("no passages for this one")
            return [PASSAGE]

        texts, ends = _collect(generate_rows(answerer=good, jobs=jobs, passages=passages))  # type: ignore[arg-type]
    assert ends["q0"] is DONE and texts["q0"] == ANSWER
    assert isinstance(ends["q1"], RowFailed)
    assert "no passages for this one" in ends["q1"].message


def test_a_cancelled_row_is_never_sent() -> None:
    with model_server_stub() as stub:
        answerer = RemoteAnswerer(endpoint=ServerEndpoint(url=stub.url, model="stub-model"))
        jobs = [_job(0), _job(1)]
        jobs[1].cancel.set()  # type: ignore[attr-defined]
        _, ends = _collect(
            generate_rows(answerer=answerer, jobs=jobs, passages=lambda j: [PASSAGE])
        )  # type: ignore[arg-type]
        assert len(stub.state.requests) == 1
    assert set(ends) == {"q0"}


def test_a_translation_row_asks_the_server_to_translate() -> None:
    with model_server_stub() as stub:
        answerer = RemoteAnswerer(endpoint=ServerEndpoint(url=stub.url, model="stub-model"))
        question = "Wie halte ich ein Paket auf seiner Version?"
        job = GenerationJob(
            request_id="t",
            question=Question(request_id="t", text=question, translate_to="en"),
            hits=None,
            cancel=threading.Event(),
        )
        _, ends = _collect(
            generate_rows(answerer=answerer, jobs=[job], passages=lambda job: [])  # type: ignore[arg-type]
        )
        assert ends == {"t": DONE}
        (sent,) = stub.state.requests
        system, user = sent["messages"]
        assert "into English" in system["content"] and user["content"] == question
