"""Questions asked through the engine bridge (app/engine_bridge.py): one question's
answer fed into its AnswerStream, a list of questions answered together, and one
question of every document of a scope. Each reads the engine in a bridge worker
(app/answer_reader.py, app/each/runner.py) and reports on the GUI thread; a
failure always reaches whoever waits (the stream, the dialog)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.answer_reader import Post, batch_run, read_answer
from app.batch.runner import BatchResult, BatchRun
from app.bridge_plumbing import EngineOp, describe_error
from app.chat.answer_stream import AnswerStream
from app.each.runner import EachRun
from engine.errors import EngineUnavailableError
from engine.service.client import EngineClient
from engine.wire_each import DocumentAnswer, EachPlan, EachRequest


@dataclass(frozen=True, kw_only=True)
class Via:
    """What asking needs of the bridge."""

    run: Callable[[EngineOp[Any]], bool]  # the op in a worker; False when not connected
    client: Callable[[], EngineClient | None]  # the engine connected now, if any
    closed: Callable[[], bool]  # the window has shut the bridge's door
    post: Post  # run something on the GUI thread
    error: Callable[[str, str], None]  # what was being done, why it failed
    probe: Callable[[], None]  # is the engine still there? find out now


def ask(*, via: Via, stream: AnswerStream) -> bool:
    """Feed the engine's answer to `stream.question` into `stream`, until it ends
    or is stopped (`stream.cancel`). False, the stream failed, when not sent."""

    def read(client: EngineClient) -> None:
        read_answer(client=client, stream=stream, closed=via.closed, post=via.post)

    def failed(error: BaseException) -> None:
        stream.fail(message=describe_error(error=error))  # nothing, once stopped
        if isinstance(error, EngineUnavailableError):
            via.probe()  # the engine may have died: find out now

    if via.client() is None:
        via.error("Asking", "The engine is not connected yet.")
        stream.fail(message="the engine is not connected")
        return False
    return via.run(EngineOp(what="Asking", call=read, failure=failed))


def ask_batch(
    *,
    via: Via,
    questions: Sequence[str],
    k: int,
    on_result: Callable[[BatchResult, int], None],
    on_finished: Callable[[list[BatchResult]], None],
) -> BatchRun | None:
    """Answer a list of questions together, as background work the engine may
    batch (app/batch/runner.py). `on_result(result, finished)` as each answer
    lands and `on_finished(results)` once, both on the GUI thread. Returns the
    run, to cancel it; None when the engine is not connected."""
    client = via.client()
    if client is None:
        return None
    run = batch_run(
        client=client,
        questions=questions,
        k=k,
        closed=via.closed,
        post=via.post,
        on_result=on_result,
    )

    def answer_all(_client: EngineClient) -> list[BatchResult]:
        run.start().wait()
        return run.results()

    def failed(error: BaseException) -> None:
        via.error("Answering the questions", describe_error(error=error))
        on_finished(run.results())  # the dialog must not wait for ever

    via.run(
        EngineOp(
            what="Answering the questions", call=answer_all, success=on_finished, failure=failed
        )
    )
    return run


def ask_each(
    *,
    via: Via,
    request: EachRequest,
    on_plan: Callable[[EachPlan], None],
    on_row: Callable[[DocumentAnswer], None],
    on_finished: Callable[[EachRun], None],
) -> EachRun | None:
    """One question of every document of a scope (app/each/runner.py), read on a
    worker: `on_plan`, `on_row` as each document finishes and `on_finished` once,
    all on the GUI thread. Returns the run, to cancel it; None when not connected."""
    if via.client() is None:
        return None

    def posted(call: Callable[[], None]) -> None:
        if not via.post(call):  # the window closed: the engine drops the rest
            run.cancel()

    run = EachRun(
        on_plan=lambda plan: posted(lambda: on_plan(plan)),
        on_row=lambda row: posted(lambda: on_row(row)),
    )

    def read(client: EngineClient) -> EachRun:
        run.read(client.ask_each_stream(request=request, cancel=run.cancel_event))
        return run

    def failed(error: BaseException) -> None:
        run.error = describe_error(error=error)
        on_finished(run)  # the dialog must not wait for ever

    via.run(EngineOp(what="Asking each document", call=read, success=on_finished, failure=failed))
    return run
