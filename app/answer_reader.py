"""Reading the engine's answers in a bridge worker thread (app/engine_bridge.py
runs these off the GUI thread and reports their failures): one question's event
stream fed into its AnswerStream, and a list of questions run as one BatchRun.

Each gets `closed` (the window has shut the bridge's door: stop reading, send
nothing more) and `post` (run something on the GUI thread)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from app.batch.runner import BatchResult, BatchRun
from app.chat.answer_stream import AnswerStream
from engine.errors import EngineUnavailableError
from engine.service.client import EngineClient
from engine.wire import AnswerEvent, ends_answer

Post = Callable[[Callable[[], None]], bool]


def read_answer(
    *, client: EngineClient, stream: AnswerStream, closed: Callable[[], bool], post: Post
) -> None:
    """Feed the engine's answer to `stream.question` into `stream` until it ends,
    is stopped (`stream.cancel`: the client cuts the HTTP stream at once, and the
    engine drops the question) or the window closes."""
    events = client.ask_stream(
        question=stream.question, k=stream.k, history=stream.history, cancel=stream.cancel
    )
    try:
        for event in events:
            if stream.cancel.is_set() or closed():
                return
            post(lambda ev=event: stream.deliver(ev))
            if ends_answer(event):
                return
    finally:
        # Closing the generator closes the HTTP stream, so the engine
        # sees the reader leave and can stop generating.
        close = getattr(events, "close", None)
        if close is not None:
            close()
    post(lambda: stream.fail(message="The answer stream ended without a result."))


def batch_run(
    *,
    client: EngineClient,
    questions: Sequence[str],
    k: int,
    closed: Callable[[], bool],
    post: Post,
    on_result: Callable[[BatchResult, int], None],
) -> BatchRun:
    """A run of `questions` as background work the engine may batch
    (app/batch/runner.py), `on_result` called on the GUI thread; not started."""

    def ask(question: str) -> Iterator[AnswerEvent]:
        if closed():  # the window closed: send nothing more
            run.cancel()
            raise EngineUnavailableError("the window was closed")
        return client.ask_stream(
            question=question, k=k, priority="background", cancel=run.cancel_event
        )

    run = BatchRun(
        questions=questions,
        ask=ask,
        on_result=lambda result, n: post(lambda: on_result(result, n)),
    )
    return run
