"""A request hears its caller's cancel event (the server sets it when the reader
leaves), but not once it has finished: the server sets it too when a stream simply
ends, and the decode loop must still store a finished row's KV for the next turn."""

from __future__ import annotations

import threading

from engine.rag.pipeline.requests import Finished, RequestHandle, new_question


def _handle(cancel: threading.Event) -> RequestHandle:
    return RequestHandle(question=new_question(text="q"), submitted=0.0, cancel=cancel)


def test_the_callers_cancel_stops_a_request_in_flight() -> None:
    cancel = threading.Event()
    handle = _handle(cancel)
    assert not handle.cancelled and not handle.cancel_event.is_set()
    cancel.set()
    assert handle.cancelled and handle.cancel_event.is_set()


def test_a_finished_request_is_not_cancelled_when_its_stream_ends() -> None:
    cancel = threading.Event()
    handle = _handle(cancel)
    handle.emit(Finished(status="done"))
    cancel.set()  # what the server does when the answer's stream ends
    assert not handle.cancelled and not handle.cancel_event.is_set()
    handle.cancel()  # its own cancel still holds
    assert handle.cancelled
