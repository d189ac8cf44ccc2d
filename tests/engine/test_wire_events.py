"""The streamed events and their one SSE codec: what the wire carries stays as
docs/api.md describes it, and whatever is encoded decodes to the same event."""

from __future__ import annotations

import json

from engine.wire import (
    ANSWER_EVENTS,
    AnswerDone,
    Citation,
    CitationsEvent,
    DoneEvent,
    FailedEvent,
    IngestProgress,
    ProgressEvent,
    SearchedEvent,
    TokenEvent,
    decode_sse,
    encode_sse,
    ends_answer,
)

CITATION = Citation(
    index=1,
    chunk_id="doc#0",
    path="/docs/a.md",
    page=None,
    text="Tomatoes need sun.",
    score=0.9,
    char_start=0,
    char_end=18,
)
ANSWER = [
    CitationsEvent(citations=[CITATION]),
    TokenEvent(text="Sun "),
    TokenEvent(text="[1]."),
    DoneEvent(done=AnswerDone(answer="Sun [1].", mode="generative", model="m")),
]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_the_wire_format_is_the_documented_one() -> None:
    frames = [encode_sse(e) for e in [*ANSWER, FailedEvent(message="boom")]]
    assert frames[0].startswith("event: citations\ndata: ")
    assert json.loads(_lines(frames[0])[1][6:]) == {
        "citations": [
            {
                "index": 1,
                "chunk_id": "doc#0",
                "path": "/docs/a.md",
                "page": None,
                "text": "Tomatoes need sun.",
                "score": 0.9,
                "char_start": 0,
                "char_end": 18,
                "section": "",
            }
        ]
    }
    assert frames[1] == 'event: token\ndata: {"text": "Sun "}\n\n'
    # done carries AnswerDone itself, not wrapped
    assert json.loads(_lines(frames[3])[1][6:]) == {
        "answer": "Sun [1].",
        "mode": "generative",
        "note": None,
        "model": "m",
        "prompt_tokens": None,
        "completion_tokens": None,
        "finish_reason": "stop",
        "quoted_from": None,
    }
    assert frames[4] == 'event: error\ndata: {"message": "boom"}\n\n'
    progress = encode_sse(ProgressEvent(progress=IngestProgress(job_id="j", state="done")))
    assert progress.startswith("event: progress\ndata: ")
    assert json.loads(_lines(progress)[1][6:])["job_id"] == "j"


def test_what_is_encoded_decodes_to_the_same_events() -> None:
    stream = "".join(encode_sse(e) for e in ANSWER)
    decoded = list(decode_sse(lines=stream.split("\n"), kinds=ANSWER_EVENTS))
    assert decoded == ANSWER
    assert [ends_answer(e) for e in decoded] == [False, False, False, True]
    assert ends_answer(FailedEvent(message="x"))


def test_an_unknown_kind_is_skipped_so_an_older_client_survives_a_newer_engine() -> None:
    newer = (
        'event: reranked\ndata: {"order": [2, 1]}\n\n'
        + encode_sse(TokenEvent(text="a"))
        + ": a comment line\n"
        + encode_sse(ProgressEvent(progress=IngestProgress(job_id="j", state="running")))
    )
    decoded = list(decode_sse(lines=newer.split("\n"), kinds=ANSWER_EVENTS))
    assert decoded == [TokenEvent(text="a")]
    (progress,) = decode_sse(lines=newer.split("\n"), kinds=(ProgressEvent,))
    assert isinstance(progress, ProgressEvent) and progress.progress.state == "running"


def test_a_follow_ups_query_travels_as_its_own_event() -> None:
    frame = encode_sse(SearchedEvent(query="exim POP3 what about POP3?"))
    assert frame.startswith("event: searched\n")
    (event,) = decode_sse(lines=_lines(frame), kinds=ANSWER_EVENTS)
    assert event == SearchedEvent(query="exim POP3 what about POP3?", rewritten_by="history")
