"""One answer's state: what arrived, how it ended, and that nothing changes after."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.chat.answer_stream import AnswerStream
from engine.wire import AnswerDone, CitationsEvent, DoneEvent, FailedEvent, TokenEvent
from tests.app.fake_client import CITATIONS


def record(stream: AnswerStream) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    stream.sig_citations.connect(lambda c: seen.append(("citations", len(c))))
    stream.sig_token.connect(lambda t: seen.append(("token", t)))
    stream.sig_done.connect(lambda d: seen.append(("done", d.answer)))
    stream.sig_failed.connect(lambda m: seen.append(("failed", m)))
    stream.sig_stopped.connect(lambda: seen.append(("stopped", None)))
    return seen


def test_an_answer_streams_then_its_final_text_is_kept(qtbot: QtBot) -> None:
    stream = AnswerStream(request_id=1, question="q")
    seen = record(stream)
    assert stream.state == "asking" and not stream.ended
    stream.deliver(CitationsEvent(citations=CITATIONS))
    stream.deliver(TokenEvent(text="Sun "))
    assert (stream.state, stream.text, stream.citations) == ("streaming", "Sun ", CITATIONS)
    stream.deliver(TokenEvent(text="lost?"))
    stream.deliver(DoneEvent(done=AnswerDone(answer="Sun [1].", mode="extractive")))
    assert stream.state == "done" and stream.text == "Sun [1]."
    assert stream.done is not None and stream.done.mode == "extractive"
    # A late event (a stream read twice, say) changes nothing.
    stream.deliver(TokenEvent(text="late"))
    stream.fail(message="late")
    assert stream.text == "Sun [1]." and stream.state == "done"
    assert seen == [
        ("citations", 2),
        ("token", "Sun "),
        ("token", "lost?"),
        ("done", "Sun [1]."),
    ]


def test_stop_keeps_what_arrived_and_tells_the_reader(qtbot: QtBot) -> None:
    stream = AnswerStream(request_id=2, question="q")
    seen = record(stream)
    stream.deliver(TokenEvent(text="Half"))
    stream.stop()
    assert stream.cancel.is_set() and stream.state == "stopped" and stream.ended
    stream.deliver(TokenEvent(text=" more"))
    stream.deliver(DoneEvent(done=AnswerDone(answer="Half more", mode="extractive")))
    assert stream.text == "Half"
    assert seen == [("token", "Half"), ("stopped", None)]


def test_a_failure_from_the_engine_ends_it_with_the_reason(qtbot: QtBot) -> None:
    stream = AnswerStream(request_id=3, question="q")
    seen = record(stream)
    stream.deliver(FailedEvent(message="the model ran out of memory"))
    assert stream.state == "failed" and stream.error == "the model ran out of memory"
    stream.stop()
    assert not stream.cancel.is_set()  # nothing left to stop
    assert seen == [("failed", "the model ran out of memory")]
